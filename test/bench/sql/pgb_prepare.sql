-- test/bench/sql/pgb_prepare.sql: after pgbench -i in the schema of the
-- current search_path, replace the primary key of pgbench_accounts by no
-- index at all (pgb_index.sql adds one per AM); the other tables keep their
-- keys.
SET client_min_messages = warning;
ALTER TABLE pgbench_accounts DROP CONSTRAINT pgbench_accounts_pkey;
VACUUM ANALYZE pgbench_accounts;
