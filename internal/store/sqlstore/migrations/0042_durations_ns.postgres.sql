-- Durations in whole nanoseconds (BIGINT) instead of float milliseconds
-- (see durations.go): each duration column x_ms of requests and
-- request_attempts becomes x_ns, its values rounded to the nanosecond.
-- A rename is a catalogue change; the type change rewrites each day
-- partition once (one ALTER TABLE a table). A BIGINT is the 8 bytes a
-- DOUBLE PRECISION was: PostgreSQL keeps the engines' one schema.
ALTER TABLE requests RENAME COLUMN auth_ms TO auth_ns;
ALTER TABLE requests RENAME COLUMN distribution_ms TO distribution_ns;
ALTER TABLE requests RENAME COLUMN body_read_ms TO body_read_ns;
ALTER TABLE requests RENAME COLUMN upstream_headers_ms TO upstream_headers_ns;
ALTER TABLE requests RENAME COLUMN upstream_start_ms TO upstream_start_ns;
ALTER TABLE requests RENAME COLUMN upstream_headers_at_ms TO upstream_headers_at_ns;
ALTER TABLE requests RENAME COLUMN first_sse_event_ms TO first_sse_event_ns;
ALTER TABLE requests RENAME COLUMN first_response_ms TO first_response_ns;
ALTER TABLE requests RENAME COLUMN first_text_delta_ms TO first_text_delta_ns;
ALTER TABLE requests RENAME COLUMN first_text_sent_ms TO first_text_sent_ns;
ALTER TABLE requests RENAME COLUMN upstream_done_ms TO upstream_done_ns;
ALTER TABLE requests RENAME COLUMN total_handler_ms TO total_handler_ns;
ALTER TABLE requests RENAME COLUMN inter_token_latency_ms TO inter_token_latency_ns;
ALTER TABLE requests RENAME COLUMN max_output_gap_ms TO max_output_gap_ns;
ALTER TABLE requests RENAME COLUMN max_output_gap_at_ms TO max_output_gap_at_ns;
ALTER TABLE requests RENAME COLUMN request_wait_ms TO request_wait_ns;
ALTER TABLE requests RENAME COLUMN headers_sent_ms TO headers_sent_ns;
ALTER TABLE requests RENAME COLUMN admission_wait_ms TO admission_wait_ns;
ALTER TABLE requests RENAME COLUMN upstream_auth_ms TO upstream_auth_ns;
ALTER TABLE requests RENAME COLUMN provider_latency_ms TO provider_latency_ns;
ALTER TABLE requests
	ALTER COLUMN auth_ns TYPE BIGINT USING round(auth_ns * 1000000)::bigint,
	ALTER COLUMN distribution_ns TYPE BIGINT USING round(distribution_ns * 1000000)::bigint,
	ALTER COLUMN body_read_ns TYPE BIGINT USING round(body_read_ns * 1000000)::bigint,
	ALTER COLUMN upstream_headers_ns TYPE BIGINT USING round(upstream_headers_ns * 1000000)::bigint,
	ALTER COLUMN upstream_start_ns TYPE BIGINT USING round(upstream_start_ns * 1000000)::bigint,
	ALTER COLUMN upstream_headers_at_ns TYPE BIGINT USING round(upstream_headers_at_ns * 1000000)::bigint,
	ALTER COLUMN first_sse_event_ns TYPE BIGINT USING round(first_sse_event_ns * 1000000)::bigint,
	ALTER COLUMN first_response_ns TYPE BIGINT USING round(first_response_ns * 1000000)::bigint,
	ALTER COLUMN first_text_delta_ns TYPE BIGINT USING round(first_text_delta_ns * 1000000)::bigint,
	ALTER COLUMN first_text_sent_ns TYPE BIGINT USING round(first_text_sent_ns * 1000000)::bigint,
	ALTER COLUMN upstream_done_ns TYPE BIGINT USING round(upstream_done_ns * 1000000)::bigint,
	ALTER COLUMN total_handler_ns TYPE BIGINT USING round(total_handler_ns * 1000000)::bigint,
	ALTER COLUMN inter_token_latency_ns TYPE BIGINT USING round(inter_token_latency_ns * 1000000)::bigint,
	ALTER COLUMN max_output_gap_ns TYPE BIGINT USING round(max_output_gap_ns * 1000000)::bigint,
	ALTER COLUMN max_output_gap_at_ns TYPE BIGINT USING round(max_output_gap_at_ns * 1000000)::bigint,
	ALTER COLUMN request_wait_ns TYPE BIGINT USING round(request_wait_ns * 1000000)::bigint,
	ALTER COLUMN headers_sent_ns TYPE BIGINT USING round(headers_sent_ns * 1000000)::bigint,
	ALTER COLUMN admission_wait_ns TYPE BIGINT USING round(admission_wait_ns * 1000000)::bigint,
	ALTER COLUMN upstream_auth_ns TYPE BIGINT USING round(upstream_auth_ns * 1000000)::bigint,
	ALTER COLUMN provider_latency_ns TYPE BIGINT USING round(provider_latency_ns * 1000000)::bigint;
ALTER TABLE request_attempts RENAME COLUMN upstream_start_ms TO upstream_start_ns;
ALTER TABLE request_attempts RENAME COLUMN upstream_headers_ms TO upstream_headers_ns;
ALTER TABLE request_attempts RENAME COLUMN upstream_headers_at_ms TO upstream_headers_at_ns;
ALTER TABLE request_attempts RENAME COLUMN first_response_at_ms TO first_response_at_ns;
ALTER TABLE request_attempts
	ALTER COLUMN upstream_start_ns TYPE BIGINT USING round(upstream_start_ns * 1000000)::bigint,
	ALTER COLUMN upstream_headers_ns TYPE BIGINT USING round(upstream_headers_ns * 1000000)::bigint,
	ALTER COLUMN upstream_headers_at_ns TYPE BIGINT USING round(upstream_headers_at_ns * 1000000)::bigint,
	ALTER COLUMN first_response_at_ns TYPE BIGINT USING round(first_response_at_ns * 1000000)::bigint;
