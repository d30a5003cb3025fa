-- test/bench/sql/unique_insert.sql: one measurement of the insert test of
-- test/bench/unique.sh.  Variables: kt, keytype (key type and its SQL type),
-- cfg (the index: pmhash_unique, btree_unique, pmhash or none), am (its
-- access method), uniq ('UNIQUE' or empty), n (rows).
-- Creates table ins_<kt>_<cfg> holding the n rows of base_<kt>, builds its
-- index (none for cfg none), vacuums and checkpoints, then inserts the n rows
-- of new_<kt> in one INSERT ... SELECT, timed from the client's side so that
-- its commit is included.  Prints RESULT lines: microseconds and WAL bytes
-- per inserted row.  Then checks the table holds 2n rows, that the index
-- finds the sample keys as a sequential scan does (and as many as the sample
-- holds keys of rows 1..2n), that a unique index rejects a key again (one of
-- the first n rows and one of the inserted ones), that pmhash_verify counts
-- 2n entries, and drops the table.
SET client_min_messages = warning;
\set tab ins_:kt _:cfg
\set idx :tab _k
SELECT :'cfg' <> 'none' AS has_index, :'am' = 'pmhash' AS is_pmhash, :'uniq' = 'UNIQUE' AS is_unique \gset
DROP TABLE IF EXISTS :tab;
CREATE TABLE :tab (id int8 NOT NULL, k :keytype NOT NULL) WITH (autovacuum_enabled = off);
INSERT INTO :tab SELECT id, k FROM base_:kt;
\if :has_index
CREATE :uniq INDEX :idx ON :tab USING :am (k);
\endif
VACUUM ANALYZE :tab;
CHECKPOINT;
SELECT pg_current_wal_insert_lsn() AS l0, extract(epoch FROM clock_timestamp()) AS t0 \gset
INSERT INTO :tab SELECT id, k FROM new_:kt;
SELECT (extract(epoch FROM clock_timestamp()) - :t0) * 1e6 / :n AS us,
       pg_wal_lsn_diff(pg_current_wal_insert_lsn(), :'l0') / :n AS wal \gset
\echo RESULT us_per_row :us
\echo RESULT wal_per_row :wal

-- correctness
SELECT count(*) AS rows FROM :tab \gset
SELECT unique_assert(:rows = 2 * :n, :'tab' || ' holds ' || :rows || ' rows, not ' || 2 * :n) AS ok \gset
\if :has_index
\set q 'SELECT count(t.id) AS c, coalesce(sum(t.id), 0) AS s FROM sample_' :kt ' p JOIN ' :tab ' t ON t.k = p.k'
SET enable_indexscan = off;
SET enable_bitmapscan = off;
SET enable_indexonlyscan = off;
SELECT unique_plan_check(:'q', 'Seq Scan on ' || :'tab') AS plan \gset
:q \gset seq_
RESET ALL;
SET client_min_messages = warning;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SELECT unique_plan_check(:'q', 'Index Scan using ' || :'idx' || ' ') AS plan \gset
:q \gset idx_
RESET ALL;
SET client_min_messages = warning;
SELECT count(*) AS exp_c, coalesce(sum(id), 0) AS exp_s FROM sample_:kt WHERE id <= 2 * :n \gset
SELECT unique_assert(:idx_c = :seq_c AND :idx_s = :seq_s AND :seq_c = :exp_c AND :seq_s = :exp_s,
	format('sample probes of %s: index scan %s rows (id sum %s), seqscan %s (%s), expected %s (%s)',
		:'idx', :idx_c, :idx_s, :seq_c, :seq_s, :exp_c, :exp_s)) AS ok \gset
\if :is_unique
SELECT unique_assert(unique_rejects(:'tab', ('base_' || :'kt')::regclass, 'id, k', 1)
		AND unique_rejects(:'tab', ('new_' || :'kt')::regclass, 'id, k', 2 * :n),
	'unique index ' || :'idx' || ' accepted a key it holds') AS ok \gset
\endif
\if :is_pmhash
SELECT pmhash_verify(:'idx') AS entries \gset
SELECT unique_assert(:entries = 2 * :n, 'pmhash_verify(' || :'idx' || ') = ' || :entries || ', not ' || 2 * :n) AS ok \gset
\endif
\endif
DROP TABLE :tab;
