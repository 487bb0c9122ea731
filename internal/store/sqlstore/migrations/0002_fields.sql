-- Fields added in the second round of the contract (SPEC.md §1, the routing
-- section of docs/SPEC.md): the longest output gap and where it ended, the
-- wait before t0, when the response headers reached the client, the trace
-- id, the channels skipped as ejected (a JSON array of configured channel
-- names, '[]' for none); and per attempt its role, outcome, its own first
-- effective output (t4 − t0) and the tokens it consumed when known. Absent
-- marks are NULL, never 0.
ALTER TABLE requests ADD COLUMN max_output_gap_ms DOUBLE PRECISION;
ALTER TABLE requests ADD COLUMN max_output_gap_at_ms DOUBLE PRECISION;
ALTER TABLE requests ADD COLUMN request_wait_ms DOUBLE PRECISION;
ALTER TABLE requests ADD COLUMN headers_sent_ms DOUBLE PRECISION;
ALTER TABLE requests ADD COLUMN trace_id TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN skipped_ejected TEXT NOT NULL DEFAULT '[]';
ALTER TABLE request_attempts ADD COLUMN role TEXT NOT NULL DEFAULT '';
ALTER TABLE request_attempts ADD COLUMN outcome TEXT NOT NULL DEFAULT '';
ALTER TABLE request_attempts ADD COLUMN first_response_at_ms DOUBLE PRECISION;
ALTER TABLE request_attempts ADD COLUMN tokens_input BIGINT;
ALTER TABLE request_attempts ADD COLUMN tokens_output BIGINT;
