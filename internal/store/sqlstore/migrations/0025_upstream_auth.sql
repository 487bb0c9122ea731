-- upstream_auth_ms (SPEC §1): how long a request waited for an upstream
-- credential fetched on its path (an OAuth2 token of a vertex channel or an
-- Entra ID one); NULL when it did not wait (a cached token, a static key).
ALTER TABLE requests ADD COLUMN upstream_auth_ms DOUBLE PRECISION;
