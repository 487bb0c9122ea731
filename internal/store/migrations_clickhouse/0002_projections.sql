-- Projections of compacted rollups, as 0006_projections.sql on the SQL
-- engines: a compacted unit is written once per projection (level
-- l + 10×p), and rows of a projection without the status count their
-- records per status in statuses.
ALTER TABLE rollups ADD COLUMN statuses String DEFAULT '' AFTER labels;

-- Every unit compacted before is marked changed, so that it is compacted
-- again with its projections; until then reads take its finer rows.
INSERT INTO rollup_marks (level, start_ns, kind, at)
	SELECT DISTINCT level, start_ns, toUInt8(0), toInt64(toUnixTimestamp(now())) FROM rollups WHERE level >= 1 AND level <= 3;
