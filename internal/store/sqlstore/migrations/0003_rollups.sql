-- Rollups: summaries written at ingest, in the transaction that inserts the
-- records they summarise, so that /api/stats, the dashboard and the
-- diagnosis context cost in proportion to the window's length and the
-- traffic's variety, not its volume (SPEC.md §7).
--
-- A row summarises the records of one time unit (level 0: a minute, 1: ten
-- minutes, 2: an hour, 3: a UTC day, starting at start_ns, Unix
-- nanoseconds) and one key:
-- api, route, model, group, channel, region, provider, stream flag and
-- terminal status. It holds their count, their diagnosis labels as
-- {"label":[any position, primary]} JSON, and per timing field a mergeable
-- quantile sketch (internal/sketch; NULL when no record of the row had the
-- field, whose absent count is count minus the sketch's count).
--
-- Minute rows are written by each gateway under its own writer id, so that
-- gateways sharing a database never update one row: a summary merges the
-- rows of every writer. Coarser rows (writer '') are made from the next
-- finer level by compaction, never from records again; rollup_dirty marks
-- the units whose finer rows changed since, which reads then take from the
-- finer rows instead.
CREATE TABLE rollups (
	level                   INTEGER NOT NULL,
	start_ns                BIGINT NOT NULL,
	api                     TEXT NOT NULL,
	route                   TEXT NOT NULL,
	model                   TEXT NOT NULL,
	group_name              TEXT NOT NULL,
	channel                 TEXT NOT NULL,
	region                  TEXT NOT NULL,
	provider                TEXT NOT NULL,
	stream                  BOOLEAN NOT NULL,
	status                  TEXT NOT NULL,
	writer                  TEXT NOT NULL,
	count                   BIGINT NOT NULL,
	labels                  TEXT NOT NULL,
	s_auth_ms               BYTEA,
	s_distribution_ms       BYTEA,
	s_body_read_ms          BYTEA,
	s_request_wait_ms       BYTEA,
	s_upstream_headers_ms   BYTEA,
	s_first_sse_event_ms    BYTEA,
	s_first_response_ms     BYTEA,
	s_first_text_delta_ms   BYTEA,
	s_first_text_sent_ms    BYTEA,
	s_relay_lag_ms          BYTEA,
	s_upstream_done_ms      BYTEA,
	s_total_handler_ms      BYTEA,
	s_visible_output_tps    BYTEA,
	s_inter_token_latency_ms BYTEA,
	s_max_output_gap_ms     BYTEA,
	PRIMARY KEY (level, start_ns, api, route, model, group_name, channel, region, provider, stream, status, writer)
);

-- (level, start_ns, writer): the unit of level starting at start_ns has finer
-- rows that writer changed after (or before) its last compaction.
CREATE TABLE rollup_dirty (
	level                   INTEGER NOT NULL,
	start_ns                BIGINT NOT NULL,
	writer                  TEXT NOT NULL,
	seq                     BIGINT NOT NULL,
	PRIMARY KEY (level, start_ns, writer)
);
