-- Projections of compacted rollups. A ten-minute, hour or day unit is now
-- written once per projection — a set of key dimensions kept, the others
-- merged — so that a summary reads the coarsest rows that still hold what
-- it filters and groups by (see projections in rollup.go). The rows of
-- projection p at level l have level l + 10×p; projection 0 (every
-- dimension and the status) is what levels 1 to 3 held before, and at
-- level 0 the minute rows written at ingest, per writer, as before. A
-- closed minute is now compacted into the other projections too, so
-- rollup_dirty marks minutes (level 0) as well. Rows of a
-- projection without the status count their records per status here, as
-- "status=count" joined by commas.
ALTER TABLE rollups ADD COLUMN statuses TEXT NOT NULL DEFAULT '';

-- Every unit compacted before is compacted again, with its projections,
-- and every minute is compacted into its projections for the first time;
-- until then reads take their finer (for minutes: raw) rows, as for any
-- dirty unit.
INSERT INTO rollup_dirty (level, start_ns, writer, seq)
	SELECT DISTINCT level, start_ns, 'projections', 1 FROM rollups WHERE level BETWEEN 0 AND 3
	ON CONFLICT (level, start_ns, writer) DO NOTHING;
