-- test/bench/sql/pgb_select_by_tid_prepared.sql: pgb_select_by_tid.sql for
-- pgbench -M prepared, where a variable is a parameter, not text pasted
-- into a literal: the TID is built from the parameters by pmhash_bench_tid
-- (test/bench/am/bench_tid.c), which costs a few nanoseconds.
\set aid random(1, :accounts)
\set blk (:aid - 1) / :per_page
\set off (:aid - 1) % :per_page + 1
SELECT abalance FROM pgbench_accounts WHERE ctid = pmhash_bench_tid(:blk, :off);
