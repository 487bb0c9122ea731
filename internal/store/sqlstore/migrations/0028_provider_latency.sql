-- The provider's own latency figure (issue 45: Bedrock's metrics.latencyMs),
-- kept beside the gateway's marks and never mixed with them; NULL for
-- providers that report none, which is every record of the other APIs.
ALTER TABLE requests ADD COLUMN provider_latency_ms DOUBLE PRECISION;
