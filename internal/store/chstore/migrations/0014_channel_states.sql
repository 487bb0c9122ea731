-- Operators' channel states, as migrations/0024_channel_states.sql on the
-- SQL engines. channel_states only grows (a few rows per operator action);
-- its newest row per channel is read with argMax. channel_state_acks keeps
-- one row per replica and channel once merged (the newest applied_ns);
-- reads take argMax until then.
CREATE TABLE IF NOT EXISTS channel_states (
	channel String,
	state String,
	set_by String,
	set_ns Int64
) ENGINE = MergeTree() ORDER BY (channel, set_ns);

CREATE TABLE IF NOT EXISTS channel_state_acks (
	replica String,
	channel String,
	set_ns Int64,
	applied_ns Int64
) ENGINE = ReplacingMergeTree(applied_ns) ORDER BY (replica, channel);
