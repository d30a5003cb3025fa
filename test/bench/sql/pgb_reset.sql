-- test/bench/sql/pgb_reset.sql: undo what the TPC-B-like runs left behind
-- (history rows, dead row versions) before the next run, checkpoint and
-- prewarm, so that each run starts from the same state without a checkpoint
-- pending.
SET client_min_messages = warning;
TRUNCATE pgbench_history;
VACUUM pgbench_accounts;
VACUUM pgbench_tellers;
VACUUM pgbench_branches;
CHECKPOINT;
-- load pgbench_accounts and the index on aid into the pool, as far as they
-- fit, so that no run starts cold (a btree build bypasses the pool)
SELECT count(pg_prewarm(oid)) AS blocks FROM (
	SELECT oid FROM pg_class WHERE relname IN ('pgbench_accounts', 'pgb_aid')
	ORDER BY relname = 'pgb_aid') AS r \gset
