-- test/pgtap/plans.sql: what the planner does with a pmhash index that is
-- the only index on its column: used for col = const (index and bitmap
-- scans, cross-type constants, = ANY), never for ranges, IS NULL, ordering
-- or index-only scans, and not for a key that matches most of the table; and
-- preferred to hash and btree indexes on the same column, alone and as the
-- inner side of a nested loop.
BEGIN;
SELECT plan(17);

CREATE TABLE pl (id int, k int8, s text, f float8);
INSERT INTO pl
SELECT i, CASE WHEN i <= 10000 THEN i ELSE -1 END, 'v' || i, i / 2.0 FROM generate_series(1, 20000) i;
CREATE INDEX pl_k ON pl USING pmhash (k);
CREATE INDEX pl_s ON pl USING pmhash (s);
CREATE INDEX pl_f ON pl USING pmhash (f);
ANALYZE pl;

\ir helpers.psql

-- chosen on its own merits
SELECT is(pg_temp.indexes_used('SELECT * FROM pl WHERE k = 42'), 'pl_k',
	'k = const uses the pmhash index with default planner settings');
SELECT is_empty($$SELECT * FROM pg_temp.scans('SELECT * FROM pl WHERE k = 42') WHERE node = 'Seq Scan'$$,
	'k = const does not scan the table sequentially');
SELECT is(pg_temp.indexes_used($$SELECT * FROM pl WHERE s = 'v4242'$$), 'pl_s',
	'text = const uses the pmhash index on the text column');

-- both scan kinds
SET LOCAL enable_bitmapscan = off;
SELECT results_eq($$SELECT * FROM pg_temp.scans('SELECT * FROM pl WHERE k = 42')$$,
	$$VALUES ('Index Scan', 'pl_k', 'pl')$$,
	'without bitmap scans: an Index Scan using pl_k');
SELECT results_eq($$SELECT node FROM pg_temp.scans('SELECT k FROM pl WHERE k = 42')$$,
	$$VALUES ('Index Scan')$$,
	'never an Index Only Scan (the index cannot return keys)');
RESET enable_bitmapscan;
SET LOCAL enable_indexscan = off;
SELECT results_eq($$SELECT * FROM pg_temp.scans('SELECT * FROM pl WHERE k = 42')$$,
	$$VALUES ('Bitmap Heap Scan', NULL, 'pl'), ('Bitmap Index Scan', 'pl_k', NULL)$$,
	'without index scans: a Bitmap Index Scan using pl_k');
RESET enable_indexscan;

-- cross-type equality through the operator families, and = ANY
SELECT is(pg_temp.indexes_used('SELECT * FROM pl WHERE k = 42::int4'), 'pl_k',
	'int8 column = int4 constant uses the index');
SELECT is(pg_temp.indexes_used('SELECT * FROM pl WHERE k = 42::int2'), 'pl_k',
	'int8 column = int2 constant uses the index');
SELECT is(pg_temp.indexes_used($$SELECT * FROM pl WHERE s = 'v42'::name COLLATE "default"$$), 'pl_s',
	'text column = name constant (of the index''s collation) uses the index');
SELECT is(pg_temp.indexes_used('SELECT * FROM pl WHERE f = 21::float4'), 'pl_f',
	'float8 column = float4 constant uses the index');
SELECT results_eq($$SELECT node, index FROM pg_temp.scans('SELECT * FROM pl WHERE k = ANY(''{1,2,3}'')') WHERE index IS NOT NULL$$,
	$$VALUES ('Index Scan', 'pl_k')$$,
	'k = ANY(array) uses an index scan, which reads the heap in TID order as a bitmap scan would');

-- never for what a hash index cannot answer, even with seqscans disabled
SET LOCAL enable_seqscan = off;
SELECT is(pg_temp.indexes_used('SELECT * FROM pl WHERE k < 5'), '',
	'k < const does not use the index');
SELECT is(pg_temp.indexes_used('SELECT * FROM pl WHERE k IS NULL'), '',
	'k IS NULL does not use the index');
SELECT is(pg_temp.indexes_used('SELECT * FROM pl ORDER BY k LIMIT 5'), '',
	'ORDER BY k does not use the index');
RESET enable_seqscan;

-- and not when the key matches most of the table (at half, an index scan,
-- which reads the heap in TID order, costs what the Seq Scan does)
INSERT INTO pl SELECT i, -1, 'v' || i, i / 2.0 FROM generate_series(20001, 30000) i;
ANALYZE pl;
SELECT results_eq($$SELECT node FROM pg_temp.scans('SELECT * FROM pl WHERE k = -1')$$,
	$$VALUES ('Seq Scan')$$,
	'a key matching two thirds of the rows is read with a Seq Scan');

-- with a hash and a btree index on the same column, pmhash is preferred
CREATE INDEX pl_k_hash ON pl USING hash (k);
CREATE INDEX pl_k_btree ON pl (k);
CREATE TABLE probes AS SELECT (random() * 10000)::int8 AS k FROM generate_series(1, 5000);
ANALYZE pl, probes;
SELECT is(pg_temp.indexes_used('SELECT * FROM pl WHERE k = 42'), 'pl_k',
	'k = const prefers pmhash to hash and btree');
SET LOCAL enable_hashjoin = off;
SET LOCAL enable_mergejoin = off;
SET LOCAL enable_memoize = off;
SELECT is(pg_temp.indexes_used('SELECT count(*) FROM probes p JOIN pl ON pl.k = p.k'), 'pl_k',
	'the inner side of a nested loop prefers pmhash to hash and btree');

SELECT * FROM finish();
ROLLBACK;
