-- Projections of compacted rollups, as 0006_projections.sql on the SQL
-- engines: a compacted unit is written once per projection (level
-- l + 10×p), and rows of a projection without the status count their
-- records per status in statuses.
ALTER TABLE rollups ADD COLUMN statuses String DEFAULT '' AFTER labels;

-- Every unit compacted before is marked changed, so that it is compacted
-- again with its projections, and every minute, so that it is compacted
-- into its projections (minutes are now marked like coarser units); until
-- then reads take their finer (for minutes: raw) rows.
INSERT INTO rollup_marks (level, start_ns, kind, at)
	SELECT DISTINCT level, start_ns, toUInt8(0), toInt64(toUnixTimestamp(now())) FROM rollups WHERE level <= 3;
