-- Basic behaviour: build, probe, insert, delete, VACUUM, REINDEX, compared
-- with a sequential scan of the same table.
CREATE EXTENSION IF NOT EXISTS pmhash;
-- forced plans carry disable_cost, which would JIT-compile every probe
SET jit = off;
CREATE TABLE basic (id int, k int8, s text);
INSERT INTO basic SELECT i, i % 500, 'v' || (i % 700) FROM generate_series(1, 20000) i;
INSERT INTO basic VALUES (-1, NULL, NULL);
CREATE INDEX basic_k ON basic USING pmhash (k);
CREATE INDEX basic_s ON basic USING pmhash (s);

-- the planner uses the index for equality
EXPLAIN (COSTS OFF) SELECT * FROM basic WHERE k = 42;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM basic WHERE k = 42;
RESET enable_bitmapscan;

-- a function comparing index scan, bitmap scan and seqscan for one value
CREATE FUNCTION basic_check(v int8) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE a int[]; b int[]; c int[];
BEGIN
  SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off;
  SELECT array_agg(id ORDER BY id) INTO a FROM basic WHERE k = v;
  SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = on;
  SELECT array_agg(id ORDER BY id) INTO b FROM basic WHERE k = v;
  SET LOCAL enable_bitmapscan = off; SET LOCAL enable_seqscan = on;
  SELECT array_agg(id ORDER BY id) INTO c FROM basic WHERE k = v;
  RETURN a IS NOT DISTINCT FROM c AND b IS NOT DISTINCT FROM c;
END $$;
SELECT count(*) FILTER (WHERE basic_check(v)) AS agree, count(*) AS probes
FROM generate_series(-5, 505) v;

-- NULLs are not indexed and "= NULL" finds nothing
SELECT count(*) FROM basic WHERE k = NULL;
SELECT pmhash_verify('basic_k');

-- DML and VACUUM
DELETE FROM basic WHERE id % 3 = 0;
UPDATE basic SET k = k + 1000 WHERE id % 5 = 0;
INSERT INTO basic SELECT i, i % 50, 'w' || i FROM generate_series(20001, 30000) i;
VACUUM basic;
SELECT count(*) FILTER (WHERE basic_check(v)) AS agree, count(*) AS probes
FROM generate_series(-5, 1505) v;
SELECT pmhash_verify('basic_k') = (SELECT count(k) FROM basic) AS verify_counts_rows;
REINDEX INDEX basic_k;
SELECT pmhash_verify('basic_k') = (SELECT count(k) FROM basic) AS verify_counts_rows;
SELECT count(*) FROM basic WHERE s = 'v7';
SELECT entries = (SELECT count(s) FROM basic) AS stats_entries, shards > 0 AS has_shards
FROM pmhash_stats('basic_s');
DROP TABLE basic;
DROP FUNCTION basic_check(int8);

-- one key with 100,000 rows: every row is found, through deletes and VACUUM
CREATE TABLE heavy (id int, k int8);
INSERT INTO heavy SELECT i, CASE WHEN i <= 100000 THEN 7 ELSE i END
FROM generate_series(1, 120000) i;
CREATE INDEX heavy_k ON heavy USING pmhash (k);
INSERT INTO heavy SELECT i, 7 FROM generate_series(120001, 125000) i;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*), count(DISTINCT id), min(id), max(id) FROM heavy WHERE k = 7;
RESET enable_bitmapscan;
SET enable_indexscan = off;
SELECT count(*) FROM heavy WHERE k = 7;
RESET enable_indexscan;
DELETE FROM heavy WHERE k = 7 AND id % 2 = 0;
VACUUM heavy;
SET enable_bitmapscan = off;
SELECT count(*), count(DISTINCT id) FROM heavy WHERE k = 7;
RESET enable_bitmapscan;
RESET enable_seqscan;
SELECT count(*) FROM heavy WHERE k = 7;
SELECT pmhash_verify('heavy_k') = (SELECT count(*) FROM heavy) AS verify_counts_rows,
       chains > 0 AS in_chains
FROM pmhash_stats('heavy_k');
DROP TABLE heavy;

-- a build that takes many batches (maintenance_work_mem 1MB: 43,690 entries
-- each; 3.4 batches here) chooses its shards for the whole table and ends at
-- the build fill, as a build in one batch does, and holds the same entries;
-- it logs each shard's content once, so about as much WAL as one batch
CREATE TABLE batched (id int, k int8) WITH (autovacuum_enabled = off);
INSERT INTO batched SELECT i, hashint8(i) FROM generate_series(1, 150000) i;
VACUUM batched;  -- hint bits set: the builds' scans write no WAL
SELECT pg_current_wal_insert_lsn() AS wal_before \gset
SET maintenance_work_mem = '1MB';
CREATE INDEX batched_many ON batched USING pmhash (k);
RESET maintenance_work_mem;
SELECT pg_current_wal_insert_lsn() AS wal_between \gset
CREATE INDEX batched_one ON batched USING pmhash (k);
SELECT many < 1.25 * one AND one < 1.25 * many AS same_wal
FROM (SELECT :'wal_between'::pg_lsn - :'wal_before'::pg_lsn AS many,
             pg_current_wal_insert_lsn() - :'wal_between'::pg_lsn AS one) w;
SELECT m.shards = o.shards AS same_shards,
       m.buckets BETWEEN o.buckets * 0.98 AND o.buckets * 1.02 AS same_size,
       m.entries = o.entries AND m.entries = 150000 AS same_entries
FROM pmhash_stats('batched_many') m, pmhash_stats('batched_one') o;
SELECT pmhash_verify('batched_many') AS verified;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*) AS found FROM generate_series(1, 150000, 499) i
WHERE EXISTS (SELECT FROM batched WHERE k = hashint8(i) AND id = i);
RESET enable_bitmapscan;
RESET enable_seqscan;
-- a unique build in several batches checks the keys of every batch
SET maintenance_work_mem = '1MB';
CREATE UNIQUE INDEX batched_id ON batched USING pmhash (id);
DROP INDEX batched_id;
INSERT INTO batched VALUES (7, 0);
CREATE UNIQUE INDEX batched_id ON batched USING pmhash (id);
RESET maintenance_work_mem;
DROP TABLE batched;
