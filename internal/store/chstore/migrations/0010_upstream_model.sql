-- Model aliases, as migrations/0020_upstream_model.sql on the SQL engines:
-- the provider's name for the model asked, '' when it is the same name.
-- After skipped_ejected, where a new table has it (chRequestColumns).
ALTER TABLE requests ADD COLUMN upstream_model String DEFAULT '' AFTER skipped_ejected;
