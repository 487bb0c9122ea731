-- How long a request queued for the gateway's own limits, as
-- migrations/0022_admission_wait.sql on the SQL engines; NULL when it did
-- not queue.
ALTER TABLE requests ADD COLUMN admission_wait_ms Nullable(Float64) AFTER upstream_model;
