-- A six-hour level between the hour and the day, as 0008_six_hours.sql on
-- the SQL engines: every six hours of a day that has a day row or a mark is
-- marked changed, to be compacted from its hours; until then reads take
-- the hours. 21600000000000 ns = 6 h.
INSERT INTO rollup_marks (level, start_ns, kind, at)
	SELECT DISTINCT toUInt8(4), start_ns + k * 21600000000000, toUInt8(0), toInt64(toUnixTimestamp(now()))
	FROM (SELECT start_ns FROM rollups WHERE level = 3 UNION ALL SELECT start_ns FROM rollup_marks WHERE level = 3)
	ARRAY JOIN [0, 1, 2, 3] AS k;
