-- Provider budgets, as migrations/0023_rate_limits.sql on the SQL engines:
-- the channels skipped for their budget (a JSON list) and, parallel to the
-- other attempt arrays, the remaining budget each attempt's answer told.
-- AFTER keeps the table's columns in the order the gateway writes them;
-- one statement, so that a migration cut short leaves none of them.
-- Rows written before have empty arrays here: their attempts told nothing.
ALTER TABLE requests
	ADD COLUMN skipped_rate_limited String DEFAULT '[]' AFTER admission_wait_ms,
	ADD COLUMN attempt_remaining_requests Array(Nullable(Int64)) AFTER attempt_tokens_output,
	ADD COLUMN attempt_remaining_tokens Array(Nullable(Int64)) AFTER attempt_remaining_requests;
