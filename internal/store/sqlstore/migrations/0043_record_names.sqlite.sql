-- The names of a record (see names.go): the values of the columns that
-- name configuration — api, route, group_name, key_name, channel, region,
-- provider, status, terminal, finish_reason, tokens_source of requests;
-- channel, status, role, outcome of request_attempts — each stored once
-- here, the columns holding their id (0 for the empty string, which has no
-- row). An id is never reused: names are never deleted. The step in Go,
-- namesToIds, fills this table from the stored records and makes the two
-- tables again with those columns INTEGER.
CREATE TABLE record_names (
	id                      INTEGER PRIMARY KEY,
	name                    TEXT NOT NULL UNIQUE
);
