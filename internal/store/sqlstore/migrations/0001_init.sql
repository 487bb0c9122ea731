-- The request record of SPEC.md §7 / §10, one row per request. The same DDL
-- runs on SQLite and PostgreSQL: it uses only types both understand (SQLite
-- maps BIGINT to INTEGER affinity, DOUBLE PRECISION to REAL, BOOLEAN to
-- NUMERIC).
--
-- No column holds content: every TEXT column is an identifier chosen by the
-- operator's configuration or the gateway (api, route, channel, region,
-- provider, group, key name), the model name the client asked for, a status
-- or a short error summary the gateway wrote, or a keyed hash (user_hash).
-- Times are float milliseconds, NULL when the mark did not happen (never 0);
-- the wall-clock timestamp of t0 is Unix nanoseconds, UTC.
CREATE TABLE requests (
	request_id              TEXT PRIMARY KEY,
	timestamp_ns            BIGINT NOT NULL,
	api                     TEXT NOT NULL,
	route                   TEXT NOT NULL,
	model                   TEXT NOT NULL,
	group_name              TEXT NOT NULL,
	key_name                TEXT NOT NULL,
	user_hash               TEXT NOT NULL,
	channel                 TEXT NOT NULL,
	region                  TEXT NOT NULL,
	provider                TEXT NOT NULL,
	status                  TEXT NOT NULL,
	http_status             INTEGER NOT NULL,
	error                   TEXT NOT NULL,
	stream                  BOOLEAN NOT NULL,
	terminal                TEXT NOT NULL,
	finish_reason           TEXT NOT NULL,
	auth_ms                 DOUBLE PRECISION,
	distribution_ms         DOUBLE PRECISION,
	body_read_ms            DOUBLE PRECISION,
	upstream_headers_ms     DOUBLE PRECISION,
	upstream_start_ms       DOUBLE PRECISION,
	upstream_headers_at_ms  DOUBLE PRECISION,
	first_sse_event_ms      DOUBLE PRECISION,
	first_response_ms       DOUBLE PRECISION,
	first_text_delta_ms     DOUBLE PRECISION,
	first_text_sent_ms      DOUBLE PRECISION,
	upstream_done_ms        DOUBLE PRECISION,
	total_handler_ms        DOUBLE PRECISION,
	visible_output_tps      DOUBLE PRECISION,
	inter_token_latency_ms  DOUBLE PRECISION,
	tokens_input            BIGINT,
	tokens_output           BIGINT,
	tokens_reasoning        BIGINT,
	tokens_visible          BIGINT,
	tokens_source           TEXT NOT NULL,
	events_heartbeat        INTEGER NOT NULL,
	events_metadata         INTEGER NOT NULL,
	events_reasoning        INTEGER NOT NULL,
	events_tool             INTEGER NOT NULL,
	events_text             INTEGER NOT NULL,
	events_done             INTEGER NOT NULL,
	events_error            INTEGER NOT NULL,
	events_unknown          INTEGER NOT NULL,
	inflight_gateway        INTEGER NOT NULL,
	inflight_channel        INTEGER NOT NULL
);

-- Newest first with a (timestamp, id) cursor, and retention's oldest first.
CREATE INDEX requests_time ON requests (timestamp_ns, request_id);
-- A viewer's reads are always scoped to its group.
CREATE INDEX requests_group_time ON requests (group_name, timestamp_ns);
CREATE INDEX requests_model_time ON requests (model, timestamp_ns);

-- Every upstream attempt of a request, in order (SPEC.md §1: each keeps its
-- own t1, t2, status and error).
CREATE TABLE request_attempts (
	request_id              TEXT NOT NULL,
	attempt                 INTEGER NOT NULL,
	channel                 TEXT NOT NULL,
	upstream_start_ms       DOUBLE PRECISION,
	upstream_headers_ms     DOUBLE PRECISION,
	upstream_headers_at_ms  DOUBLE PRECISION,
	status                  TEXT NOT NULL,
	http_status             INTEGER NOT NULL,
	error                   TEXT NOT NULL,
	PRIMARY KEY (request_id, attempt)
);

-- Diagnosis labels (SPEC.md §4), position 0 being the primary verdict. A side
-- table rather than a list column so that both engines can filter requests by
-- label through an index and count labels with a plain GROUP BY.
CREATE TABLE request_labels (
	request_id              TEXT NOT NULL,
	position                INTEGER NOT NULL,
	label                   TEXT NOT NULL,
	PRIMARY KEY (request_id, position)
);
CREATE INDEX request_labels_label ON request_labels (label, request_id);
