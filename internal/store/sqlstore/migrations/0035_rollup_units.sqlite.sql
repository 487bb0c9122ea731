-- Sparse projections: a compacted unit stores a projection only where it
-- at least halves the rows a summary would read instead (rollup.Sparse);
-- rollup_units names, per compacted unit (level, start_ns), the
-- projections it left out (a bit per projection). A unit without a row
-- stores every projection, as every unit compacted before this did.
CREATE TABLE rollup_units (
	level INTEGER NOT NULL,
	start_ns INTEGER NOT NULL,
	missing INTEGER NOT NULL,
	PRIMARY KEY (level, start_ns)
) WITHOUT ROWID;
