-- Multi-column pmhash indexes: a row is found by equality on every key
-- column (cross-type too), by index scan and bitmap scan, as a sequential
-- scan finds it; rows with a NULL key column are not indexed; a scan that
-- leaves a column out is not chosen, and returns the right rows when
-- forced; arrays on one or several columns; unique multi-column indexes
-- and ON CONFLICT; INCLUDE refused.
CREATE EXTENSION IF NOT EXISTS pmhash;
-- forced plans carry disable_cost, which would JIT-compile every probe
SET jit = off;
CREATE TABLE mc (id int, a int8, b text, c uuid, d date);
INSERT INTO mc SELECT i, i % 100, 'b' || (i % 37), md5((i % 11)::text)::uuid,
    date '2020-01-01' + (i % 5)
  FROM generate_series(1, 20000) i;
-- NULLs in some or all key columns
INSERT INTO mc VALUES (-1, NULL, 'b1', NULL, NULL), (-2, 1, NULL, md5('1')::uuid, NULL),
  (-3, NULL, NULL, NULL, NULL), (-4, 1, 'b1', NULL, date '2020-01-02');
-- 0 and 4294967297 have one hashint8 code, so (0, 'b0') and
-- (4294967297, 'b0') have one combined code: a probe of either finds both
SELECT hashint8(0) = hashint8(4294967297) AS same_code;
INSERT INTO mc SELECT 30000 + i, 4294967297 * (i % 2), 'b0', md5('0')::uuid, date '2020-01-01'
  FROM generate_series(1, 4) i;
CREATE INDEX mc_ab ON mc USING pmhash (a, b);
CREATE INDEX mc_abcd ON mc USING pmhash (a, b, c, d);
CREATE INDEX mc_expr ON mc USING pmhash (lower(b), (a * 2));
ANALYZE mc;
-- a row whose first key column is NULL has no entry; NULLs in later
-- columns have one (so that a scan of every entry finds them)
SELECT pmhash_verify('mc_ab') = (SELECT count(a) FROM mc) AS ab_entries,
       pmhash_verify('mc_abcd') = (SELECT count(a) FROM mc) AS abcd_entries;

-- ids of the rows matching cond, by one way of scanning
CREATE FUNCTION mc_ids(cond text, way text) RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE r int[];
BEGIN
  PERFORM set_config('enable_seqscan', (way = 'seq')::text, true);
  PERFORM set_config('enable_indexscan', (way = 'index')::text, true);
  PERFORM set_config('enable_bitmapscan', (way = 'bitmap')::text, true);
  EXECUTE 'SELECT array_agg(id ORDER BY id) FROM mc WHERE ' || cond INTO r;
  RETURN r;
END $$;
-- the index (or "seq") a way of scanning uses for cond
CREATE FUNCTION mc_plan(cond text, way text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
  PERFORM set_config('enable_seqscan', (way = 'seq')::text, true);
  PERFORM set_config('enable_indexscan', (way = 'index')::text, true);
  PERFORM set_config('enable_bitmapscan', (way = 'bitmap')::text, true);
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) SELECT id FROM mc WHERE ' || cond LOOP
    IF line ~ 'Index Scan' THEN
      RETURN substring(line FROM '(?:Index Scan using|Bitmap Index Scan on) (\w+)');
    END IF;
  END LOOP;
  RETURN 'seq';
END $$;
-- whether index and bitmap scans find what a seqscan finds, how many
-- rows, and which indexes they use
CREATE FUNCTION mc_check(cond text, OUT agree boolean, OUT rows int, OUT index_plan text,
                         OUT bitmap_plan text) LANGUAGE sql AS $$
  SELECT mc_ids(cond, 'index') IS NOT DISTINCT FROM want
     AND mc_ids(cond, 'bitmap') IS NOT DISTINCT FROM want,
         coalesce(cardinality(want), 0), mc_plan(cond, 'index'), mc_plan(cond, 'bitmap')
  FROM (SELECT mc_ids(cond, 'seq') AS want) w $$;

SELECT c AS cond, (mc_check(c)).* FROM (VALUES
  ($$a = 5 AND b = 'b5'$$),
  ($$b = 'b5' AND a = 5$$),
  ($$a = 5 AND b = 'b6'$$),
  ($$a = 5::int4 AND b = 'b5'$$),
  ($$a = 5::int2 AND b = 'b5'::varchar$$),
  ($$a = 0 AND b = 'b0'$$),
  ($$a = 4294967297 AND b = 'b0'$$),
  ($$a = 1 AND b = 'b1'$$),
  ($$a = 7 AND b = 'b7' AND c = md5('7')::uuid AND d = date '2020-01-03'$$),
  ($$a = 7 AND b = 'b7' AND c = md5('7')::uuid AND d = '2020-01-04'::timestamp$$),
  ($$a = 5 AND b = 'b5' AND a = 5$$),
  ($$a = 5 AND b = 'b5' AND a = 6$$),
  ($$a = 5 AND b = NULL$$),
  ($$lower(b) = 'b5' AND a * 2 = 10$$),
  ($$a = ANY('{1,2,3,4294967297}') AND b = 'b1'$$),
  ($$a = ANY('{1,2,NULL}') AND b = ANY('{b1,b2,b0,NULL}')$$),
  ($$a = ANY('{}') AND b = 'b1'$$),
  ($$a = ANY('{NULL}') AND b = 'b1'$$),
  ($$a = ANY('{1,2}'::int4[]) AND b = ANY('{b1,b2}') AND c = md5('1')::uuid AND d = ANY('{2020-01-02,2020-01-03}'::date[])$$),
  ($$a = 5 AND b = ANY('{b5}') AND b = 'b5'$$)
) v(c);

-- conditions that leave a key column out: no pmhash plan unless forced,
-- and forced (everything else made dearer) the index reads every entry and
-- the executor rechecks: the rows are still right
SELECT c AS cond, mc_plan(c, 'index') AS index_plan, mc_plan(c, 'bitmap') AS bitmap_plan
  FROM (VALUES ($$a = 5$$), ($$b = 'b5'$$), ($$a = 7 AND b = 'b7' AND c = md5('7')::uuid$$),
               ($$a IS NULL AND b = 'b1'$$), ($$a = 1 AND b IS NULL$$)) v(c);
BEGIN;
SET LOCAL seq_page_cost = 1000;
SET LOCAL random_page_cost = 0;
SET LOCAL cpu_index_tuple_cost = 0;
SET LOCAL cpu_operator_cost = 0;
SELECT c AS cond, (mc_check(c)).* FROM (VALUES
  ($$a = 5$$), ($$a = 7 AND b = 'b7' AND c = md5('7')::uuid$$), ($$a = 1 AND d = '2020-01-02'$$),
  ($$a = 1 AND b = 'b1' AND d = '2020-01-02'$$), ($$a = 1 AND b IS NULL$$)
) v(c);
ROLLBACK;
-- arrays whose combinations are too many to probe: every entry is read
SELECT (mc_check(format('a = ANY(%L::int8[]) AND b = ANY(%L::text[])',
                        (SELECT array_agg(g) FROM generate_series(0, 2999) g),
                        (SELECT array_agg('b' || g) FROM generate_series(0, 1999) g)))).*;

-- after deletes, updates of key columns, VACUUM and REINDEX
DELETE FROM mc WHERE id % 7 = 0;
UPDATE mc SET b = 'n' || b WHERE id % 11 = 0;
UPDATE mc SET a = a + 1000 WHERE id % 13 = 0;
SELECT c AS cond, (mc_check(c)).agree FROM (VALUES
  ($$a = 5 AND b = 'b5'$$), ($$a = 1011 AND b = 'b11'$$), ($$a = 11 AND b = 'nb11'$$),
  ($$a = 1 AND b = 'b1' AND c = md5('1')::uuid AND d = '2020-01-02'$$)) v(c);
VACUUM mc;
SELECT pmhash_verify('mc_ab') = (SELECT count(a) FROM mc) AS ab_entries_after_vacuum;
REINDEX INDEX mc_abcd;
SELECT (mc_check($$a = 1 AND b = 'b1' AND c = md5('1')::uuid AND d = '2020-01-02'$$)).agree
  AS after_reindex;

-- unique multi-column indexes: the combination is the key
CREATE TABLE mu (a int8, b text, v int);
CREATE UNIQUE INDEX mu_ab ON mu USING pmhash (a, b);
INSERT INTO mu VALUES (1, 'x', 1), (1, 'y', 2), (2, 'x', 3);
INSERT INTO mu VALUES (1, 'x', 4);
INSERT INTO mu VALUES (2, 'x'::varchar, 4);
-- a NULL in any key column: no entry, no conflict
INSERT INTO mu VALUES (NULL, 'x', 5), (NULL, 'x', 6), (1, NULL, 7), (1, NULL, 8);
-- keys with one code that differ: both go in; then one of them again
INSERT INTO mu VALUES (0, 'z', 9), (4294967297, 'z', 10);
INSERT INTO mu VALUES (4294967297, 'z', 11);
-- ON CONFLICT infers the index from its columns in either order
INSERT INTO mu VALUES (1, 'x', 12), (3, 'x', 13) ON CONFLICT (a, b) DO UPDATE SET v = EXCLUDED.v
  RETURNING *;
INSERT INTO mu VALUES (1, 'y', 14), (0, 'z', 15), (4, 'y', 16) ON CONFLICT (b, a) DO NOTHING
  RETURNING *;
INSERT INTO mu VALUES (4294967297, 'z', 17) ON CONFLICT DO NOTHING RETURNING *;
INSERT INTO mu VALUES (1, 'x', 18) ON CONFLICT (a) DO NOTHING;
SELECT * FROM mu ORDER BY a NULLS FIRST, b NULLS FIRST, v;
-- a build over duplicate combinations fails, naming one
CREATE TABLE mu_dup (a int8, b text);
INSERT INTO mu_dup VALUES (1, 'x'), (1, 'y'), (2, 'x'), (1, 'x'), (NULL, 'x'), (NULL, 'x');
CREATE UNIQUE INDEX mu_dup_ab ON mu_dup USING pmhash (a, b);
DELETE FROM mu_dup WHERE ctid = (SELECT max(ctid) FROM mu_dup WHERE a = 1 AND b = 'x');
CREATE UNIQUE INDEX mu_dup_ab ON mu_dup USING pmhash (a, b);
-- an exclusion constraint on two columns
CREATE TABLE mx (a int4, b text, EXCLUDE USING pmhash (a WITH =, b WITH =));
INSERT INTO mx VALUES (1, 'x'), (1, 'y');
INSERT INTO mx VALUES (1, 'x');
-- INCLUDE and NULLS NOT DISTINCT are refused
CREATE INDEX mu_inc ON mu USING pmhash (a, b) INCLUDE (v);
CREATE UNIQUE INDEX mu_nnd ON mu USING pmhash (a, b) NULLS NOT DISTINCT;
DROP TABLE mc, mu, mu_dup, mx;
DROP FUNCTION mc_ids(text, text), mc_plan(text, text), mc_check(text);
