-- test/bench/sql/any_tid.sql: the bound of "k = ANY(array)" (any.sql) on
-- t_:ds, with no index at all: the rows that the array of :kkeys keys of
-- any.sql finds, fetched by their TIDs, which the query names as a constant
-- (ctid = ANY, a TID scan).  Checks its result against a hash join, then
-- times it as any.sql does: RESULT any_const_k<K>_ms and, what the bound
-- uses, any_const_k<K>_exec_ms, the best execution in the server.  Any
-- index scan fetches these rows too, after finding them.
\ir any_keys.sql
SELECT count(*) AS want_n, coalesce(sum(t.id), 0) AS want_s, array_agg(t.ctid)::text AS tids
FROM t_:ds t WHERE t.k IN (SELECT unnest(:'arr'::text:::keytype[])) \gset
-- the bound is the TID scan: 18 costs it above a seqscan for these 1,000
-- rows on scattered pages
SET enable_seqscan = off;
\set q 'SELECT count(*) AS got_n, coalesce(sum(id), 0) AS got_s FROM t_' :ds ' WHERE ctid = ANY(' :'tids' '::tid[])'
SELECT bench_assert(position('Tid Scan' IN p) > 0, 'the plan of ctid = ANY(constant) is no TID scan: ' || left(p, 200))
FROM bench_plan(:'q') p \gset
\set idx 'a TID scan'
\set label 'ctid = ANY(constant)'
\set metric any_const_k:kkeys''_ms
\set metric_exec any_const_k:kkeys''_exec_ms
\ir any_time.sql
\echo INFO ctid = ANY, the :want_n rows of :kkeys keys: TID scan
RESET enable_seqscan;
