-- test/bench/sql/pgb_tid_layout.sql: after pgb_prepare.sql, check that the
-- row of each aid sits where pgbench -i put it (in aid order, page after
-- page; no update has moved a row yet), so that pgb_select_by_tid.sql and
-- pgb_select_by_tid_prepared.sql can fetch it by its TID, and that their
-- queries (the TID a literal, or built by format()) are TID scans.  Prints
-- the rows per page.
SET client_min_messages = warning;
SELECT count(*) AS per_page FROM pgbench_accounts WHERE ctid < '(1,0)'::tid \gset
SELECT bench_assert(count(*) = 0, count(*) || ' pgbench_accounts rows are not where their aid says')
FROM pgbench_accounts
WHERE ctid <> ('(' || (aid - 1) / :per_page || ',' || (aid - 1) % :per_page + 1 || ')')::tid \gset
SELECT bench_assert(position('Tid Scan' IN plan) > 0, 'no TID scan: ' || plan)
FROM bench_plan($$SELECT abalance FROM pgbench_accounts WHERE ctid = '(4,2)'$$) AS plan \gset
SELECT bench_assert(position('Tid Scan' IN plan) > 0, 'no TID scan: ' || plan)
FROM bench_plan($$SELECT abalance FROM pgbench_accounts WHERE ctid = format('(%s,%s)', 4, 2)::tid$$) AS plan \gset
\echo :per_page
