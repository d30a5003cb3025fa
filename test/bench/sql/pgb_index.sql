-- test/bench/sql/pgb_index.sql: index pgbench_accounts.aid USING :index_am (as
-- pgb_aid, in place of the primary key, which pgb_prepare.sql dropped) and
-- check that pgbench's statements on pgbench_accounts use it.
SET client_min_messages = warning;
DROP INDEX IF EXISTS pgb_aid;
CREATE INDEX pgb_aid ON pgbench_accounts USING :index_am (aid);
ANALYZE pgbench_accounts;
SELECT bench_plan_check('SELECT abalance FROM pgbench_accounts WHERE aid = 4242', 'pgb_aid', false) AS plan \gset
SELECT bench_plan_check('UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 4242', 'pgb_aid', false) AS plan \gset
SELECT round(bench_index_bytes('pgb_aid') / 1048576.0, 1) AS mb \gset
\echo INFO pgbench_accounts.aid indexed USING :index_am, :mb MB
