-- Minutes keep their raw rows only (level 0, one per writer and key): the
-- projections of a minute (stored levels 10, 20, … 90) cost about as many
-- rows again as the raw ones for each projection wherever a minute holds a
-- few records a key — two thirds of the rollups' bytes at 100 000 records
-- a week — and spared a summary only the raw rows of the minutes at its
-- two ends. Reads and compaction no longer use them, nor the minutes'
-- dirty marks.
DELETE FROM rollups WHERE level IN (10, 20, 30, 40, 50, 60, 70, 80, 90);
DELETE FROM rollup_dirty WHERE level = 0;
