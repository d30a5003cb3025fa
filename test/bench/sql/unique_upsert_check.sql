-- test/bench/sql/unique_upsert_check.sql: after an upsert run of
-- test/bench/unique.sh, check up_<am>.u and print RESULT lines.  Variables:
-- am, kt, keyexpr (the key of integer i), n (rows before the run), txns
-- (transactions pgbench processed).  With sequential scans only: no key
-- twice, every row's key is the key of its id, the n first rows are all
-- there, and every transaction either added a row or counted an update
-- (rows - n + sum(n) = txns).  Then that the index finds the sample keys as
-- a sequential scan does, that it rejects keys it holds (plain INSERT), and,
-- after a VACUUM, pmhash_verify (pmhash) or amcheck's bt_index_check with
-- heapallindexed (btree).  Prints RESULT inserted_share: the share of the
-- transactions that inserted.
SET client_min_messages = warning;
SET search_path = up_:am, public;
SELECT :'am' = 'pmhash' AS is_pmhash \gset
SET enable_indexscan = off;
SET enable_bitmapscan = off;
SET enable_indexonlyscan = off;
SELECT count(*) AS rows, count(DISTINCT k) AS keys, count(DISTINCT id) AS ids,
       coalesce(sum(n), 0) AS upd, count(*) FILTER (WHERE id <= :n) AS old,
       count(*) FILTER (WHERE k IS DISTINCT FROM :keyexpr) AS wrongkey,
       min(id) AS minid, max(id) AS maxid
FROM (SELECT id AS i, * FROM u) u \gset
SELECT coalesce(string_agg(k::text || ' (' || c || ' rows)', ', '), '') AS dups
FROM (SELECT k, count(*) AS c FROM u GROUP BY k HAVING count(*) > 1 LIMIT 5) d \gset
SELECT unique_assert(:keys = :rows, format('up_%s.u: %s rows but %s distinct keys; duplicated: %s',
	:'am', :rows, :keys, :'dups')) AS ok \gset
SELECT unique_assert(:ids = :rows AND :wrongkey = 0 AND :minid >= 1 AND :maxid <= 2 * :n AND :old = :n,
	format('up_%s.u: %s rows, %s distinct ids in %s..%s, %s of the %s first, %s rows whose key is not that of their id',
		:'am', :rows, :ids, :minid, :maxid, :old, :n, :wrongkey)) AS ok \gset
SELECT unique_assert(:rows - :n + :upd = :txns,
	format('up_%s.u: %s rows added and %s updates counted, but pgbench processed %s transactions',
		:'am', :rows - :n, :upd, :txns)) AS ok \gset
\set q 'SELECT count(u.id) AS c, coalesce(sum(u.id), 0) AS s, coalesce(sum(u.n), 0) AS m FROM sample_' :kt ' p JOIN u ON u.k = p.k'
SELECT unique_plan_check(:'q', 'Seq Scan on u') AS plan \gset
:q \gset seq_
RESET ALL;
SET client_min_messages = warning;
SET search_path = up_:am, public;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SELECT unique_plan_check(:'q', 'Index Scan using u_k ') AS plan \gset
:q \gset idx_
SELECT unique_assert(:idx_c = :seq_c AND :idx_s = :seq_s AND :idx_m = :seq_m,
	format('sample probes of up_%s.u_k: index scan %s rows (id sum %s, n sum %s), seqscan %s (%s, %s)',
		:'am', :idx_c, :idx_s, :idx_m, :seq_c, :seq_s, :seq_m)) AS ok \gset
RESET ALL;
SET client_min_messages = warning;
SET search_path = up_:am, public;
SELECT unique_assert(unique_rejects('u', 'u', 'id, k, v', 1) AND unique_rejects('u', 'u', 'id, k, v', :maxid),
	'up_' || :'am' || '.u_k accepted a key it holds') AS ok \gset
VACUUM u;
\if :is_pmhash
SELECT pmhash_verify('u_k') AS entries \gset
SELECT unique_assert(:entries = :rows, format('pmhash_verify(up_%s.u_k) = %s after VACUUM, %s rows',
	:'am', :entries, :rows)) AS ok \gset
\else
SELECT bt_index_check('u_k', true) AS ok \gset
\endif
SELECT (:rows - :n)::float8 / :txns AS share \gset
\echo RESULT inserted_share :share
\echo INFO up_:am.u: :rows rows, :upd updates, :seq_c of the sample keys found, checks passed
