-- Attempts and labels carry their request's timestamp. On PostgreSQL the
-- three tables are partitioned by day on it (0004_partitions.postgres.sql),
-- so that retention drops a day instead of deleting rows; SQLite keeps one
-- table each, with the same columns so that both engines share the inserts.
ALTER TABLE request_attempts ADD COLUMN timestamp_ns BIGINT NOT NULL DEFAULT 0;
UPDATE request_attempts SET timestamp_ns = COALESCE((SELECT r.timestamp_ns FROM requests r WHERE r.request_id = request_attempts.request_id), 0);
ALTER TABLE request_labels ADD COLUMN timestamp_ns BIGINT NOT NULL DEFAULT 0;
UPDATE request_labels SET timestamp_ns = COALESCE((SELECT r.timestamp_ns FROM requests r WHERE r.request_id = request_labels.request_id), 0);
