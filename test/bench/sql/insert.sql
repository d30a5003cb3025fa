-- test/bench/sql/insert.sql: insert the :m rows of ins_:ds into t_:ds, which
-- has index :idx (or no index when :idx is "none"), in one INSERT ... SELECT
-- statement, timed from the client's side so that its commit is included.
-- Prints RESULT lines: microseconds and WAL bytes per row.  Then, with an
-- index, checks that every inserted key is found through it (and, if :verify
-- is on, pmhash_verify); finally drops the index, deletes the inserted rows
-- and vacuums, which gives the table back its pages.  With :checkpoint on,
-- a CHECKPOINT comes first (build.sql does one before the build otherwise),
-- so that no checkpoint is due during the insert.
SET client_min_messages = warning;
\if :checkpoint
CHECKPOINT;
\endif
SELECT pg_current_wal_insert_lsn() AS l0, extract(epoch FROM clock_timestamp()) AS t0 \gset
INSERT INTO t_:ds SELECT id, k FROM ins_:ds;
SELECT (extract(epoch FROM clock_timestamp()) - :t0) * 1e6 / :m AS us,
       pg_wal_lsn_diff(pg_current_wal_insert_lsn(), :'l0') / :m AS wal \gset
\echo RESULT insert_us :us
\echo RESULT insert_wal_b :wal
SELECT :'idx' <> 'none' AS has_index \gset
\if :has_index
\ir nested_loop.sql
\set qi 'SELECT count(*) AS got_n, coalesce(sum(t.id), 0) AS got_s FROM ins_' :ds ' p JOIN t_' :ds ' t ON t.k = p.k'
SELECT bench_plan_check(:'qi', :'idx', true) AS plan \gset
:qi \gset
SELECT ins_idsum FROM expect_:ds \gset
SELECT bench_check('probes of the inserted keys in ' || :'idx', :got_n, :got_s, :m, :ins_idsum) AS ok \gset
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
