-- Four more projections, without the group, as
-- 0007_projections_without_group.sql on the SQL engines: every compacted
-- unit and every minute is marked changed, to be compacted again with them.
INSERT INTO rollup_marks (level, start_ns, kind, at)
	SELECT DISTINCT level, start_ns, toUInt8(0), toInt64(toUnixTimestamp(now())) FROM rollups WHERE level <= 3;
