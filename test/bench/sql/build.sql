-- test/bench/sql/build.sql: build index :idx USING :am on t_:ds(k), timed
-- from the client's side of the statement, so its commit is included.
-- Prints RESULT lines: build time, WAL written by the build, size.
SET client_min_messages = warning;
CHECKPOINT;
SELECT pg_current_wal_insert_lsn() AS l0, extract(epoch FROM clock_timestamp()) AS t0 \gset
CREATE INDEX :idx ON t_:ds USING :am (k);
SELECT extract(epoch FROM clock_timestamp()) - :t0 AS secs,
       pg_wal_lsn_diff(pg_current_wal_insert_lsn(), :'l0') / 1048576.0 AS wal_mb \gset
SELECT bench_index_bytes(:'idx') AS bytes, (SELECT count(*) FROM t_:ds) AS rows \gset
SELECT :bytes / 1048576.0 AS mb, :bytes::float8 / :rows AS bpe \gset
\echo RESULT build_s :secs
\echo RESULT build_wal_mb :wal_mb
\echo RESULT size_mb :mb
\echo RESULT size_bpe :bpe
