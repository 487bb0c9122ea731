-- Sparse projections, as migrations/0035 on the SQL engines: a compacted
-- unit stores a projection only where it at least halves the rows a
-- summary would read instead (rollup.Sparse). The unit's compaction mark
-- (kind 1) names the projections it left out, a bit per projection; the
-- newest compaction mark of a unit (argMax by at) is the one that holds.
-- Marks written before, and change marks, say 0: every projection stored.
ALTER TABLE rollup_marks ADD COLUMN missing UInt16 DEFAULT 0;
