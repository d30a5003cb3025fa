-- test/bench/sql/pgb_select_by_tid.sql: pgbench's select-only transaction
-- with no index: the row of a random aid fetched by its TID, valid while
-- pgb_tid_layout.sql holds (pgbench -D per_page=<its output> -D
-- accounts=<rows>).  The TID is a literal that pgbench fills in, so the
-- simple protocol only (pgb_select_by_tid_prepared.sql is the one for
-- prepared statements).  No index on aid can beat it.
\set aid random(1, :accounts)
\set blk (:aid - 1) / :per_page
\set off (:aid - 1) % :per_page + 1
SELECT abalance FROM pgbench_accounts WHERE ctid = '(:blk,:off)';
