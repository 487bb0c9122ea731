-- Provider budgets (docs/admission.md): the channels a plan passed over
-- because their provider's rate-limit budget was below the request's need,
-- with the figures (a JSON list, '[]' for none), and the remaining budget
-- each attempt's answer told (NULL when it told none).
ALTER TABLE requests ADD COLUMN skipped_rate_limited TEXT NOT NULL DEFAULT '[]';
ALTER TABLE request_attempts ADD COLUMN remaining_requests BIGINT;
ALTER TABLE request_attempts ADD COLUMN remaining_tokens BIGINT;
