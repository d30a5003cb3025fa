-- test/bench/sql/pgb_tid_layout.sql: after pgb_prepare.sql, check that the
-- row of each aid sits where pgbench -i put it (in aid order, page after
-- page; no update has moved a row yet), so that pgb_select_by_tid.sql and
-- pgb_select_by_tid_prepared.sql can fetch it by its TID, and that their
-- queries (the TID a literal, or built by pmhash_bench_tid) are TID scans.
-- Prints the rows per page.
SET client_min_messages = warning;
SELECT count(*) AS per_page FROM pgbench_accounts WHERE ctid < '(1,0)'::tid \gset
SELECT bench_assert(count(*) = 0, count(*) || ' pgbench_accounts rows are not where their aid says')
FROM pgbench_accounts
WHERE ctid <> pmhash_bench_tid((aid - 1) / :per_page, (aid - 1) % :per_page + 1) \gset
SELECT bench_assert(position('Tid Scan' IN plan) > 0, 'no TID scan: ' || plan)
FROM bench_plan($$SELECT abalance FROM pgbench_accounts WHERE ctid = '(4,2)'$$) AS plan \gset
PREPARE tid_by_parameters(bigint, integer) AS
	SELECT abalance FROM pgbench_accounts WHERE ctid = pmhash_bench_tid($1, $2);
SET plan_cache_mode = force_generic_plan;
SELECT bench_assert(position('Tid Scan' IN plan) > 0, 'no TID scan: ' || plan)
FROM bench_plan('EXECUTE tid_by_parameters(4, 2)') AS plan \gset
SELECT bench_assert(abalance = 0 AND aid = 4 * :per_page + 2, 'pmhash_bench_tid(4, 2) found aid ' || aid)
FROM pgbench_accounts WHERE ctid = pmhash_bench_tid(4, 2) \gset
\echo :per_page
