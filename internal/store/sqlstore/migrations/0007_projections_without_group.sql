-- Four more projections, without the group (see projections in rollup.go):
-- model and stream, channel and stream, stream alone, and model, channel
-- and stream (the channels view's grouping). A summary over every
-- group — an administrator's overview, channels view or /api/stats — read
-- a row per group where these hold one, and at volume the rows' sketches
-- are what it spends its time on. Every compacted unit and every minute is
-- compacted again to write them; until then reads take finer rows, as for
-- any dirty unit.
INSERT INTO rollup_dirty (level, start_ns, writer, seq)
	SELECT DISTINCT level, start_ns, 'projections', 1 FROM rollups WHERE level BETWEEN 0 AND 3
	ON CONFLICT (level, start_ns, writer) DO NOTHING;
