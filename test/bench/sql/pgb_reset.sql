-- test/bench/sql/pgb_reset.sql: undo what the TPC-B-like runs left behind
-- in the pgbench tables of the current search_path (history rows, dead row
-- versions) before the next run, checkpoint and prewarm, so that each run
-- starts from the same state without a checkpoint pending.
SET client_min_messages = warning;
TRUNCATE pgbench_history;
VACUUM pgbench_accounts;
VACUUM pgbench_tellers;
VACUUM pgbench_branches;
CHECKPOINT;
-- load pgbench_accounts, then the index on aid (if any), into the pool, as
-- far as they fit, so that no run starts cold: runs on the other AMs' tables
-- and a btree build (which bypasses the pool) leave it holding other pages
SELECT count(pg_prewarm(r)) AS blocks
FROM (VALUES (to_regclass('pgbench_accounts')), (to_regclass('pgb_aid'))) AS v(r)
WHERE r IS NOT NULL \gset
