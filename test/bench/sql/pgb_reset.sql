-- test/bench/sql/pgb_reset.sql: undo what the TPC-B-like runs left behind
-- (history rows, dead row versions) before the next run, and checkpoint, so
-- that each run starts from the same state without a checkpoint pending.
SET client_min_messages = warning;
TRUNCATE pgbench_history;
VACUUM pgbench_accounts;
VACUUM pgbench_tellers;
VACUUM pgbench_branches;
CHECKPOINT;
