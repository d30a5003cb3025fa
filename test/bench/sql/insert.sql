-- test/bench/sql/insert.sql: insert the :m rows of table :src (ins_:ds, or
-- grow_:ds, which doubles the table) into t_:ds, which
-- has index :idx (or no index when :idx is "none"), in one INSERT ... SELECT
-- statement, timed from the client's side so that its commit is included.
-- Prints RESULT lines :metric_us and :metric_wal_b: microseconds and WAL
-- bytes per row.  Then, with an
-- index, checks that every inserted key is found through it (and, if :verify
-- is on, pmhash_verify); finally drops the index, deletes the inserted rows
-- and vacuums, which gives the table back its pages.  With :checkpoint on,
-- a CHECKPOINT comes first (build.sql does one before the build otherwise),
-- so that no checkpoint is due during the insert.
SET client_min_messages = warning;
\if :checkpoint
CHECKPOINT;
\endif
SELECT count(*) AS src_n, sum(id) AS src_idsum FROM :src \gset
SELECT bench_check('rows of ' || :'src', :src_n, 0, :m, 0) AS ok \gset
SELECT pg_current_wal_insert_lsn() AS l0, extract(epoch FROM clock_timestamp()) AS t0 \gset
INSERT INTO t_:ds SELECT id, k FROM :src;
SELECT (extract(epoch FROM clock_timestamp()) - :t0) * 1e6 / :m AS us,
       pg_wal_lsn_diff(pg_current_wal_insert_lsn(), :'l0') / :m AS wal \gset
\echo RESULT :metric'_us' :us
\echo RESULT :metric'_wal_b' :wal
SELECT :'idx' <> 'none' AS has_index \gset
\if :has_index
\ir nested_loop.sql
\set qi 'SELECT count(*) AS got_n, coalesce(sum(t.id), 0) AS got_s FROM ' :src ' p JOIN t_' :ds ' t ON t.k = p.k'
SELECT bench_plan_check(:'qi', :'idx', true) AS plan \gset
:qi \gset
SELECT bench_check('probes of the inserted keys in ' || :'idx', :got_n, :got_s, :m, :src_idsum) AS ok \gset
RESET ALL;
SET client_min_messages = warning;
\if :verify
SELECT pmhash_verify(:'idx') AS entries, (SELECT count(*) FROM t_:ds) AS rows \gset
SELECT bench_check('pmhash_verify of ' || :'idx', :entries, 0, :rows, 0) AS ok \gset
\echo INFO pmhash_verify(:idx) = :entries entries after the inserts
\endif
DROP INDEX :idx;
\endif
DELETE FROM t_:ds WHERE id > :n;
VACUUM t_:ds;
SELECT count(*) AS left_n FROM t_:ds \gset
SELECT bench_check('rows of t_' || :'ds' || ' after the cleanup', :left_n, 0, :n, 0) AS ok \gset
