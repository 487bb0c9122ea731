-- Thirty minutes and three hours, as 0009_half_hours_three_hours.sql on
-- the SQL engines: every half hour and three hours of a day that has a day
-- row or a mark is marked changed, to be compacted from the finer level.
INSERT INTO rollup_marks (level, start_ns, kind, at)
	SELECT toUInt8(if(k < 48, 5, 6)), if(k < 48, start_ns + k * 1800000000000, start_ns + (k - 48) * 10800000000000),
		toUInt8(0), toInt64(toUnixTimestamp(now()))
	FROM (SELECT DISTINCT start_ns FROM (SELECT start_ns FROM rollups WHERE level = 3 UNION ALL SELECT start_ns FROM rollup_marks WHERE level = 3))
	ARRAY JOIN range(56) AS k;
