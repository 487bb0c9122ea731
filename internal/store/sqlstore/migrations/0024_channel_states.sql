-- Operators' channel states (issue 48): `ttfx channels drain | disable |
-- enable` and POST /api/channels/{name}/… write a row here, and every
-- gateway sharing the database reads the newest row of each channel every
-- two seconds (as it reads api_keys) and applies it. Rows are never
-- updated: the newest set_ns (Unix ns) of a channel is its state, older
-- ones say what happened before.
CREATE TABLE channel_states (
	channel TEXT NOT NULL,
	state   TEXT NOT NULL,
	set_by  TEXT NOT NULL,
	set_ns  BIGINT NOT NULL,
	PRIMARY KEY (channel, set_ns)
);

-- Which gateway applied which state: one row per replica and channel, the
-- set_ns of the state it applied and when. GET /api/channels lists the
-- replicas whose set_ns is the channel's newest.
CREATE TABLE channel_state_acks (
	replica    TEXT NOT NULL,
	channel    TEXT NOT NULL,
	set_ns     BIGINT NOT NULL,
	applied_ns BIGINT NOT NULL,
	PRIMARY KEY (replica, channel)
);
