-- PostgreSQL: the rollups' primary key — the unit, every key column and
-- the writer, about 170 bytes an entry, 606 of the rollups' 2 596 bytes a
-- record at 100 000 records a week — becomes a unique index of the raw
-- minute rows only (level 0: the rows writers upsert, ON CONFLICT ...
-- WHERE level = 0), beside an index of (level, start_ns) for every row,
-- which is how every read and compaction finds rows. Compacted rows need
-- no unique index: compaction deletes a unit's rows before it writes them
-- again, in the transaction that claimed the unit (see compactUnit).
-- SQLite keeps its key: in a file of 16 KB pages the rollups are a
-- WITHOUT ROWID table, the key is the table (0036).
ALTER TABLE rollups DROP CONSTRAINT rollups_pkey;
CREATE UNIQUE INDEX rollups_minutes ON rollups (level, start_ns, api, route, model, group_name, channel, region, provider, stream, status, writer) WHERE level = 0;
CREATE INDEX rollups_units ON rollups (level, start_ns);
