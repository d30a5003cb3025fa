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
