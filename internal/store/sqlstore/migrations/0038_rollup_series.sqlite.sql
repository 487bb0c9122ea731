-- Rollup series: the key of a rollup row — api, route, model, group,
-- channel, region, provider, stream flag and status, about 110 bytes of
-- strings — is stored once here, and each rollup row holds its id
-- (rollups.series) instead of the nine columns, which at a few records a
-- minute made a quarter of the rollups' bytes (every raw minute row holds
-- about one record). A series is added the first time a row of its key is
-- written (ensureSeries, series.go, which keeps the ids it has seen), and
-- stays: there are as many as the traffic has distinct keys and projected
-- keys, not rows.
--
-- The rollups table is made again with the series column instead of the
-- key columns by a step in Go (toSeries, series.go), which also adds
-- the series of the rows already stored; on SQLite it keeps the table a
-- WITHOUT ROWID one where it was (0036). Reads join rollup_series.
CREATE TABLE rollup_series (
	id          INTEGER PRIMARY KEY,
	api         TEXT NOT NULL,
	route       TEXT NOT NULL,
	model       TEXT NOT NULL,
	group_name  TEXT NOT NULL,
	channel     TEXT NOT NULL,
	region      TEXT NOT NULL,
	provider    TEXT NOT NULL,
	stream      BOOLEAN NOT NULL,
	status      TEXT NOT NULL,
	UNIQUE (api, route, model, group_name, channel, region, provider, stream, status)
);
