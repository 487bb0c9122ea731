-- API keys made from the command line (`ttfx keys new | rotate | revoke`)
-- or by the zero-config gateway's first start. Only the SHA-256 of a key is
-- kept (hex), never the key. Gateways sharing the database poll this table,
-- so a key made or revoked on one machine works or stops working on every
-- replica within seconds, without a restart. Keys from the configuration
-- file are not here: they stay in the file's environment variables.
--
-- A key works from created_ns until expires_ns (Unix nanoseconds; NULL: until
-- revoked). Revoking sets expires_ns to now; rotating sets it to now plus a
-- grace period and adds a new row of the same name, role and group. Ended
-- rows stay, so that `ttfx keys list --all` can say what happened.
CREATE TABLE api_keys (
	hash       TEXT PRIMARY KEY,
	name       TEXT NOT NULL,
	role       TEXT NOT NULL,
	group_name TEXT NOT NULL,
	created_ns BIGINT NOT NULL,
	expires_ns BIGINT
);
CREATE INDEX api_keys_name ON api_keys (name);
