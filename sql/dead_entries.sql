-- Entries of rows that an index scan finds dead to every transaction are
-- removed before VACUUM runs (kill_prior_tuple): later probes and
-- uniqueness checks no longer walk them.  Autovacuum is off for the table,
-- so only the scans remove entries; every count is checked against a
-- seqscan.
CREATE EXTENSION IF NOT EXISTS pmhash;
CREATE TABLE de (id int8, k int8, v int) WITH (autovacuum_enabled = off);
INSERT INTO de SELECT g, g % 100, 0 FROM generate_series(1, 2000) g;
CREATE INDEX de_k ON de USING pmhash (k);
CREATE UNIQUE INDEX de_id ON de USING pmhash (id);
-- an index on v makes its updates non-HOT: each leaves a dead entry per index
CREATE INDEX de_v ON de (v);
-- 1000 dead versions of row 7 (k = 7)
DO $$
BEGIN
	FOR i IN 1..1000 LOOP
		UPDATE de SET v = v + 1 WHERE id = 7;
	END LOOP;
END
$$;
SELECT (SELECT entries FROM pmhash_stats('de_k')) AS k_entries,
	(SELECT entries FROM pmhash_stats('de_id')) AS id_entries;

-- a bitmap scan gets no hints: nothing is removed
SET enable_seqscan = off;
SET enable_indexscan = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM de WHERE k = 7;
SELECT count(*) FROM de WHERE k = 7;
SELECT entries FROM pmhash_stats('de_k');

-- the first index scan of k = 7 removes the 1000 dead entries
SET enable_indexscan = on;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM de WHERE k = 7;
SELECT count(*) FROM de WHERE k = 7;
SELECT entries FROM pmhash_stats('de_k');
SELECT count(*) FROM de WHERE k = 7;
-- the unique index, by its own scan
SELECT id, v FROM de WHERE id = 7;
SELECT entries FROM pmhash_stats('de_id');
SELECT pmhash_verify('de_k'), pmhash_verify('de_id');

-- answers agree with a seqscan for every key
CREATE TEMP TABLE by_index AS SELECT g AS k, (SELECT count(*) FROM de WHERE k = g) AS n
	FROM generate_series(0, 99) g;
RESET enable_indexscan;
RESET enable_bitmapscan;
SET enable_seqscan = on;
SET enable_indexscan = off;
SET enable_bitmapscan = off;
SELECT count(*) AS keys_differing FROM by_index b
	WHERE b.n <> (SELECT count(*) FROM de WHERE de.k = b.k);
SELECT sum(n) FROM by_index;
RESET ALL;

-- uniqueness still holds: a duplicate of 7 is refused, other updates work
\set VERBOSITY default
INSERT INTO de VALUES (7, 7, 0);
UPDATE de SET v = v + 1 WHERE id = 7;
SELECT id, k, v FROM de WHERE id = 7;

-- rows deleted and then probed: removed the same way; a rolled-back delete
-- leaves its rows (and entries) alone
BEGIN;
DELETE FROM de WHERE k = 8;
ROLLBACK;
DELETE FROM de WHERE k = 9;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*) FROM de WHERE k = 8;
SELECT count(*) FROM de WHERE k = 9;
SELECT entries FROM pmhash_stats('de_k');
SELECT count(*) FROM de;
RESET ALL;
DROP TABLE de;

-- A split makes what the scans noted of its slot stale.  An index of 512
-- shards holds just under 2,048 entries a shard; eight keys of slot 0,
-- the first to split, have 250 dead rows each and, last in TID order, a
-- live one: k0-k3 stay in slot 0 when it splits, k4-k7 move to slot 512
-- (the top 9 bits of their hash codes are 0, the next one 0 or 1).  A
-- cursor per key fetches its live row, having passed (and noted) the dead
-- ones.  One cursor goes on past its last TID before the split and removes
-- its key's 250 entries; the others go on after it and remove nothing, in
-- either slot.  VACUUM removes the rest.
CREATE TABLE ds (k int8) WITH (autovacuum_enabled = off);
CREATE INDEX ds_k ON ds USING pmhash (k) WITH (shards = 512);
CREATE TEMP TABLE ds_keys AS
	(SELECT k FROM generate_series(1, 100000) k
	 WHERE hashint8(k) BETWEEN 0 AND 4194303 ORDER BY k LIMIT 4)
	UNION ALL
	(SELECT k FROM generate_series(1, 100000) k
	 WHERE hashint8(k) BETWEEN 4194304 AND 8388607 ORDER BY k LIMIT 4);
-- k0-k3 stay, k4-k7 move
SELECT a[1] AS k0, a[2] AS k1, a[3] AS k2, a[4] AS k3,
	a[5] AS k4, a[6] AS k5, a[7] AS k6, a[8] AS k7
	FROM (SELECT array_agg(k ORDER BY hashint8(k) >= 4194304, k) AS a FROM ds_keys) s \gset
INSERT INTO ds SELECT 1000000 + g FROM generate_series(1, 1040000) g;
INSERT INTO ds SELECT k FROM ds_keys, generate_series(1, 250);
DELETE FROM ds WHERE k < 1000000;
INSERT INTO ds SELECT k FROM ds_keys;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
BEGIN;
DECLARE c0 CURSOR FOR SELECT k FROM ds WHERE k = :k0;
DECLARE c1 CURSOR FOR SELECT k FROM ds WHERE k = :k1;
DECLARE c2 CURSOR FOR SELECT k FROM ds WHERE k = :k2;
DECLARE c3 CURSOR FOR SELECT k FROM ds WHERE k = :k3;
DECLARE c4 CURSOR FOR SELECT k FROM ds WHERE k = :k4;
DECLARE c5 CURSOR FOR SELECT k FROM ds WHERE k = :k5;
DECLARE c6 CURSOR FOR SELECT k FROM ds WHERE k = :k6;
DECLARE c7 CURSOR FOR SELECT k FROM ds WHERE k = :k7;
FETCH 1 FROM c0;
FETCH 1 FROM c1;
FETCH 1 FROM c2;
FETCH 1 FROM c3;
FETCH 1 FROM c4;
FETCH 1 FROM c5;
FETCH 1 FROM c6;
FETCH 1 FROM c7;
SELECT shards, entries FROM pmhash_stats('ds_k');
FETCH NEXT FROM c0;
SELECT shards, entries FROM pmhash_stats('ds_k');
-- past 2,048 entries a shard: slot 0 splits first
INSERT INTO ds SELECT 3000000 + g FROM generate_series(1, 20000) g;
SELECT shards > 512 AS split, entries FROM pmhash_stats('ds_k');
FETCH NEXT FROM c1;
FETCH NEXT FROM c2;
FETCH NEXT FROM c3;
FETCH NEXT FROM c4;
FETCH NEXT FROM c5;
FETCH NEXT FROM c6;
FETCH NEXT FROM c7;
COMMIT;
SELECT entries FROM pmhash_stats('ds_k');
RESET ALL;
VACUUM (FREEZE, INDEX_CLEANUP ON) ds;
SELECT entries, pmhash_verify('ds_k') FROM pmhash_stats('ds_k');
SELECT count(*) FROM ds;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*) FROM ds WHERE k IN (SELECT k FROM ds_keys);
RESET ALL;
DROP TABLE ds;
