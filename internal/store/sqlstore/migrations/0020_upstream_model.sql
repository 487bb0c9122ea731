-- Model aliases (SPEC §5): the name the channel sent the provider for the
-- model the client asked. '' when it is the name asked (most records), so
-- the column costs next to nothing; readers put the asked name back
-- (store.FillUpstreamModel). Summaries keep grouping by model, the asked
-- name: upstream_model is detail, in no rollup.
ALTER TABLE requests ADD COLUMN upstream_model TEXT NOT NULL DEFAULT '';
