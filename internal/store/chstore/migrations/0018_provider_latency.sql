-- The provider's own latency figure, as migrations/0028_provider_latency.sql
-- on the SQL engines: NULL when the provider reports none. After
-- upstream_auth_ms (0015), where the SQL engines have it (0028 follows
-- 0025) and chRequestColumns names it.
ALTER TABLE requests ADD COLUMN provider_latency_ms Nullable(Float64) AFTER upstream_auth_ms;
