-- upstream_auth_ms, as migrations/0025_upstream_auth.sql on the SQL
-- engines: NULL when the request did not wait for an upstream credential.
-- After upstream_model, where a new table has it (chRequestColumns).
ALTER TABLE requests ADD COLUMN upstream_auth_ms Nullable(Float64) AFTER upstream_model;
