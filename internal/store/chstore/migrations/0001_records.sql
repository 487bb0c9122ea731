-- The ClickHouse schema of ttfx's records (SPEC.md §7), in SQL that runs on
-- ClickHouse 18.16 (Debian's package) and on current releases: MergeTree
-- engines in the PARTITION BY / ORDER BY syntax, Nullable, Array, no
-- LowCardinality, DateTime64, Bool, Nested-with-Nullable or data skipping
-- indexes. Every table is partitioned by the UTC day of its time column
-- (intDiv of Unix ns: no time zone involved), so retention drops whole
-- partitions, and is a ReplacingMergeTree, so a row written twice (a batch
-- retried after an ambiguous failure) is one row once merged; reads take
-- FINAL or LIMIT 1 BY, or drop duplicates in Go, where one could still be
-- visible.

-- One row per request. Times are Unix ns (Int64); milliseconds are Float64;
-- a mark, token count or rate that did not happen is NULL, never 0.
-- Attempts and diagnosis labels are arrays in the row (attempt_* arrays are
-- parallel, one element per attempt in order): every read of a record
-- wants them, and a label filter is has(labels, x) on the row itself.
-- batch is the insert token that wrote the row (see chStore.Insert).
-- The sorting key puts time first at minute resolution, then the columns
-- the API filters and groups by, so a window with a group or channel
-- filter reads few granules.
CREATE TABLE IF NOT EXISTS requests (
	request_id String,
	timestamp_ns Int64,
	api String, route String, model String, group_name String, key_name String, user_hash String,
	channel String, region String, provider String, status String,
	http_status Int64, error String, stream UInt8, terminal String, finish_reason String,
	auth_ms Nullable(Float64), distribution_ms Nullable(Float64), body_read_ms Nullable(Float64),
	upstream_headers_ms Nullable(Float64), upstream_start_ms Nullable(Float64), upstream_headers_at_ms Nullable(Float64),
	first_sse_event_ms Nullable(Float64), first_response_ms Nullable(Float64), first_text_delta_ms Nullable(Float64),
	first_text_sent_ms Nullable(Float64), upstream_done_ms Nullable(Float64), total_handler_ms Nullable(Float64),
	visible_output_tps Nullable(Float64), inter_token_latency_ms Nullable(Float64),
	tokens_input Nullable(Int64), tokens_output Nullable(Int64), tokens_reasoning Nullable(Int64), tokens_visible Nullable(Int64),
	tokens_source String,
	events_heartbeat Int64, events_metadata Int64, events_reasoning Int64, events_tool Int64, events_text Int64,
	events_done Int64, events_error Int64, events_unknown Int64, inflight_gateway Int64, inflight_channel Int64,
	max_output_gap_ms Nullable(Float64), max_output_gap_at_ms Nullable(Float64), request_wait_ms Nullable(Float64),
	headers_sent_ms Nullable(Float64),
	trace_id String, skipped_ejected Array(String),
	labels Array(String),
	attempt_channel Array(String),
	attempt_upstream_start_ms Array(Nullable(Float64)),
	attempt_upstream_headers_ms Array(Nullable(Float64)),
	attempt_upstream_headers_at_ms Array(Nullable(Float64)),
	attempt_status Array(String),
	attempt_http_status Array(Int64),
	attempt_error Array(String),
	attempt_role Array(String),
	attempt_outcome Array(String),
	attempt_first_response_at_ms Array(Nullable(Float64)),
	attempt_tokens_input Array(Nullable(Int64)),
	attempt_tokens_output Array(Nullable(Int64)),
	batch String
) ENGINE = ReplacingMergeTree()
PARTITION BY intDiv(timestamp_ns, 86400000000000)
ORDER BY (intDiv(timestamp_ns, 60000000000), group_name, channel, model, timestamp_ns, request_id);

-- The id → time index of requests (a lookup table, as ClickHouse has no
-- secondary index on 18.16): Get finds a record's minute here first, and
-- Insert finds the ids already stored, and by which batch.
CREATE TABLE IF NOT EXISTS request_ids (
	request_id String,
	timestamp_ns Int64,
	batch String
) ENGINE = ReplacingMergeTree()
PARTITION BY intDiv(timestamp_ns, 86400000000000)
ORDER BY request_id;

-- Rollups as on the other engines (rollup.go): per unit (level 0 minute,
-- 1 ten minutes, 2 hour, 3 day) and key, a count, label counts and one
-- encoded sketch per field (NULL: no value). Minute rows are written per
-- insert batch (writer = the batch token), so a retried batch rewrites the
-- same rows; coarser rows are compacted from finer ones with writer ''.
-- The version column is the row's count: a unit compacted again covers at
-- least the records it did before, so the larger count is the newer row.
-- A granule of 1024 rows rather than 8192: a week's day rows are a few
-- hundred per day among tens of thousands of minute rows, and a smaller
-- granule reads fewer of those beside them.
CREATE TABLE IF NOT EXISTS rollups (
	level UInt8,
	start_ns Int64,
	api String, route String, model String, group_name String, channel String, region String, provider String,
	stream UInt8, status String,
	writer String,
	count Int64,
	labels String,
	s_auth_ms Nullable(String), s_distribution_ms Nullable(String), s_body_read_ms Nullable(String),
	s_request_wait_ms Nullable(String), s_upstream_headers_ms Nullable(String), s_first_sse_event_ms Nullable(String),
	s_first_response_ms Nullable(String), s_first_text_delta_ms Nullable(String), s_first_text_sent_ms Nullable(String),
	s_relay_lag_ms Nullable(String), s_upstream_done_ms Nullable(String), s_total_handler_ms Nullable(String),
	s_visible_output_tps Nullable(String), s_inter_token_latency_ms Nullable(String), s_max_output_gap_ms Nullable(String),
	version UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY intDiv(start_ns, 86400000000000)
ORDER BY (level, start_ns, api, route, model, group_name, channel, region, provider, stream, status, writer)
SETTINGS index_granularity = 1024;

-- When the rows of a coarse unit (level 1..3) last changed below it
-- (kind 0) and when it was last compacted (kind 1), in the server's
-- seconds: a unit is up to date when compacted after its last change.
CREATE TABLE IF NOT EXISTS rollup_marks (
	level UInt8,
	start_ns Int64,
	kind UInt8,
	at Int64
) ENGINE = ReplacingMergeTree(at)
PARTITION BY intDiv(start_ns, 86400000000000)
ORDER BY (level, start_ns, kind)
