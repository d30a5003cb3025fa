-- test/bench/sql/pgb_select_by_tid_prepared.sql: pgb_select_by_tid.sql for
-- pgbench -M prepared, where a variable is a parameter, not text pasted
-- into a literal: the TID is built from the parameters by format() and a
-- cast to tid, which each execution pays for, so this bound is a little
-- lower than the ideal one.
\set aid random(1, :accounts)
\set blk (:aid - 1) / :per_page
\set off (:aid - 1) % :per_page + 1
SELECT abalance FROM pgbench_accounts WHERE ctid = format('(%s,%s)', :blk::int, :off::int)::tid;
