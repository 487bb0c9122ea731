-- upstream_auth_ms, as migrations/0025_upstream_auth.sql on the SQL
-- engines: NULL when the request did not wait for an upstream credential.
-- After skipped_rate_limited (0013), where the SQL engines have it
-- (0025 follows 0023) and chRequestColumns names it.
ALTER TABLE requests ADD COLUMN upstream_auth_ms Nullable(Float64) AFTER skipped_rate_limited;
