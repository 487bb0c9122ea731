-- Minutes keep their raw rows only, as 0010_minutes_raw_only.sql on the
-- SQL engines: the projections of a minute (stored levels 10, 20, … 90)
-- and the minutes' marks are no longer read or made. A mutation: the
-- server rewrites the parts that hold them in the background.
ALTER TABLE rollups DELETE WHERE level IN (10, 20, 30, 40, 50, 60, 70, 80, 90);
ALTER TABLE rollup_marks DELETE WHERE level = 0;
