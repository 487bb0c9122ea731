-- A six-hour level between the hour and the day (level 4: a level's number
-- is stored, so the new one takes the next; see levelOrder in rollup.go).
-- A window of the last 24 hours holds no whole day, and read from hours it
-- cost twenty-four rows per key; from six hours it costs at most three and
-- the hours at its two ends. Every six hours of a day that has a day row
-- or is marked dirty is marked, to be compacted from its hours; until then
-- reads take the hours, as for any dirty unit. 21600000000000 ns = 6 h.
INSERT INTO rollup_dirty (level, start_ns, writer, seq)
	SELECT DISTINCT 4, d.start_ns + q.k * 21600000000000, 'six-hours', 1
	FROM (SELECT start_ns FROM rollups WHERE level = 3 UNION SELECT start_ns FROM rollup_dirty WHERE level = 3) d
	CROSS JOIN (SELECT 0 AS k UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3) q
	WHERE true
	ON CONFLICT (level, start_ns, writer) DO NOTHING;
