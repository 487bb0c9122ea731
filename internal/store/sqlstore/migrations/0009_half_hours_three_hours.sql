-- Two more levels: thirty minutes (5, between ten minutes and the hour)
-- and three hours (6, between the hour and six hours); see levelOrder in
-- rollup.go. At volume a summary's time goes to its rows' sketches, and a
-- window's two ends, read in the coarsest units that fit, cost up to five
-- ten-minute and five hour rows per key each; these halve that. Every half
-- hour and three hours of a day that has a day row or is marked dirty is
-- marked, to be compacted from the finer level; until then reads take the
-- finer rows, as for any dirty unit. 1800000000000 ns = 30 min,
-- 10800000000000 ns = 3 h.
WITH RECURSIVE k(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM k WHERE n < 47),
days(start_ns) AS (SELECT start_ns FROM rollups WHERE level = 3 UNION SELECT start_ns FROM rollup_dirty WHERE level = 3)
INSERT INTO rollup_dirty (level, start_ns, writer, seq)
	SELECT 5, days.start_ns + k.n * 1800000000000, 'half-hours', 1 FROM days CROSS JOIN k
	UNION
	SELECT 6, days.start_ns + k.n * 10800000000000, 'three-hours', 1 FROM days CROSS JOIN k WHERE k.n < 8
	ON CONFLICT (level, start_ns, writer) DO NOTHING;
