-- "col = ANY(array)": the whole array reaches the index (amsearcharray) in
-- plain and bitmap scans, as a constant and as a parameter (a generic
-- plan, where the index compares the rows' keys itself and the executor
-- does not recheck), compared with a sequential scan.
CREATE EXTENSION IF NOT EXISTS pmhash;
-- forced plans carry disable_cost, which would JIT-compile every probe
SET jit = off;
CREATE TABLE arr (id int, k int8, s text);
INSERT INTO arr SELECT i, i % 3000, 'v' || (i % 700) FROM generate_series(1, 30000) i;
INSERT INTO arr VALUES (-1, NULL, NULL);
-- two keys whose hash codes collide: a probe of either finds both
CREATE TABLE pair AS
  SELECT min(g) AS a, max(g) AS b FROM generate_series(100000, 400000) g
  GROUP BY hashint8(g) HAVING count(*) = 2 ORDER BY 1 LIMIT 1;
SELECT count(*) AS pairs, bool_and(hashint8(a) = hashint8(b) AND a <> b) AS collide FROM pair;
INSERT INTO arr SELECT 40000 + i, a, 'a' FROM pair, generate_series(1, 2) i;
INSERT INTO arr SELECT 40010, b, 'b' FROM pair;
-- and two text keys whose hash codes collide
CREATE TABLE text_pair AS
  SELECT min(s) AS a, max(s) AS b FROM (SELECT 'c' || g AS s FROM generate_series(1, 200000) g) c
  GROUP BY hashtext(s) HAVING count(*) = 2 ORDER BY 1 LIMIT 1;
SELECT count(*) AS pairs, bool_and(hashtext(a) = hashtext(b) AND a <> b) AS collide FROM text_pair;
INSERT INTO arr SELECT 40020 + i, NULL, a FROM text_pair, generate_series(1, 2) i;
INSERT INTO arr SELECT 40030, NULL, b FROM text_pair;
CREATE INDEX arr_k ON arr USING pmhash (k);
CREATE INDEX arr_s ON arr USING pmhash (s);
CREATE INDEX arr_k2 ON arr USING pmhash ((k * 2));
ANALYZE arr;

-- ids matching col = ANY(keys), col being k, s or k * 2, by index scan,
-- bitmap scan and seqscan, keys a parameter of a generic plan; and with
-- keys a constant
-- (one function per way: PL/pgSQL caches a statement's plan per function)
DO $do$
DECLARE way text;
BEGIN
  FOREACH way IN ARRAY '{index,bitmap,seq}'::text[] LOOP
    EXECUTE format($f$
      CREATE FUNCTION ids_%s(col text, keys anyarray) RETURNS int[] LANGUAGE plpgsql
        SET enable_seqscan = %s SET enable_indexscan = %s SET enable_bitmapscan = %s
        SET plan_cache_mode = force_generic_plan AS $b$
      BEGIN
        IF col = 's' THEN
          RETURN (SELECT array_agg(id ORDER BY id) FROM arr WHERE s = ANY(keys));
        ELSIF col = 'k2' THEN
          RETURN (SELECT array_agg(id ORDER BY id) FROM arr WHERE k * 2 = ANY(keys));
        END IF;
        RETURN (SELECT array_agg(id ORDER BY id) FROM arr WHERE k = ANY(keys));
      END $b$ $f$, way, way = 'seq', way = 'index', way = 'bitmap');
  END LOOP;
END $do$;
CREATE FUNCTION ids_const(col text, keys anyarray, scan text) RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE r int[];
BEGIN
  PERFORM set_config('enable_seqscan', 'off', true);
  PERFORM set_config('enable_indexscan', (scan = 'index')::text, true);
  PERFORM set_config('enable_bitmapscan', (scan = 'bitmap')::text, true);
  EXECUTE format('SELECT array_agg(id ORDER BY id) FROM arr WHERE %s = ANY(%L::%s)',
                 CASE col WHEN 'k2' THEN 'k * 2' ELSE col END, keys, pg_typeof(keys)) INTO r;
  RETURN r;
END $$;
-- whether every way agrees with the seqscan, and the number of rows found
CREATE FUNCTION check_keys(col text, keys anyarray, OUT agree boolean, OUT rows int)
  LANGUAGE sql AS $$
  SELECT ids_index(col, keys) IS NOT DISTINCT FROM want
     AND ids_bitmap(col, keys) IS NOT DISTINCT FROM want
     AND ids_const(col, keys, 'index') IS NOT DISTINCT FROM want
     AND ids_const(col, keys, 'bitmap') IS NOT DISTINCT FROM want,
         coalesce(cardinality(want), 0)
  FROM (SELECT ids_seq(col, keys) AS want) AS w $$;

-- the plans: the array is one index condition, $1 in the generic ones
SET plan_cache_mode = force_generic_plan;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
PREPARE p_index(int8[]) AS SELECT id FROM arr WHERE k = ANY($1);
EXPLAIN (COSTS OFF) EXECUTE p_index('{1,2}');
SET enable_bitmapscan = on;
SET enable_indexscan = off;
PREPARE p_bitmap(int8[]) AS SELECT id FROM arr WHERE k = ANY($1);
EXPLAIN (COSTS OFF) EXECUTE p_bitmap('{1,2}');
DEALLOCATE ALL;
RESET plan_cache_mode;
RESET enable_indexscan;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM arr WHERE k = ANY('{1,2,3}');
RESET enable_seqscan;
RESET enable_bitmapscan;
-- left to choose, the planner takes the plain scan, which reads the heap
-- pages in TID order as a bitmap heap scan does, without the bitmap and
-- the bitmap's recheck (pmcost.c)
EXPLAIN (COSTS OFF) SELECT id FROM arr WHERE k = ANY('{1,2,3,4,5,6,7,8,9,10}');
-- (17 names an InitPlan's output (InitPlan 1).col1: printed as 15 and 16 do)
CREATE FUNCTION arr_plan(query text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
    RETURN NEXT regexp_replace(replace(line, '(InitPlan 1).col1', '$0'),
                               '^(\s*InitPlan 1)$', '\1 (returns $0)');
  END LOOP;
END $$;
SELECT arr_plan('SELECT id FROM arr WHERE k = ANY(ARRAY(SELECT g FROM generate_series(1, 200) g))');
DROP FUNCTION arr_plan(text);

-- cases: several keys, repeats, absent keys, NULL elements, empty, NULL,
-- a colliding pair and each half of it, many keys, cross-type arrays
CREATE TABLE cases (n int, keys int8[]);
INSERT INTO cases VALUES
  (1, '{1,2,3}'), (2, '{5,5,5,5}'), (3, '{-1,-2,999999}'), (4, '{}'), (5, '{NULL}'),
  (6, '{NULL,7,NULL,8}'), (7, NULL), (8, '{2999,0}'),
  (9, (SELECT ARRAY[a, b] FROM pair)), (10, (SELECT ARRAY[a] FROM pair)),
  (11, (SELECT ARRAY[b] FROM pair)), (12, (SELECT ARRAY[a, a, 17] FROM pair)),
  (13, ARRAY(SELECT g FROM generate_series(-500, 4000, 3) g)),
  (14, ARRAY(SELECT g % 50 FROM generate_series(1, 1000) g)),
  (15, (SELECT a || '{1,2,3,4,5,6,7,8}'::int8[] FROM pair)),
  (16, (SELECT ARRAY[b, a] || '{1,2,3,4,5,6,7}'::int8[] FROM pair));
SELECT n, (check_keys('k', keys)).* FROM cases ORDER BY n;
-- cross-type: int4[] and int2[] against the int8 column
SELECT (check_keys('k', '{1,2,3,NULL,2999}'::int4[])).*;
SELECT (check_keys('k', '{4,4,9}'::int2[])).*;
-- text keys, and an expression index
SELECT (check_keys('s', '{v1,v2,v2,nope,NULL,v699,a,b}'::text[])).*;
SELECT (check_keys('k2', '{2,3,4,4,5998,-2}'::int8[])).*;
-- constants of 9 elements or more, whose recheck is hashed: a plain scan
-- rechecks them by the elements it hashed (pmrecheck.c); text with one
-- and both halves of a colliding pair, and the expression index
SELECT (check_keys('s', ARRAY[a, 'v1', 'v2', 'v3', 'v4', 'v5', 'v6', 'v7', 'nope', NULL])).*
  FROM text_pair;
SELECT (check_keys('s', ARRAY[b, 'v1', 'v2', 'v3', 'v4', 'v5', 'v6', 'v7', 'v8', a])).*
  FROM text_pair;
SELECT (check_keys('k2', '{2,3,4,4,5998,-2,6,8,10,12,NULL}'::int8[])).*;

-- The executor's recheck of a constant array of 9 elements or more is
-- hashed (the planner's hashfuncid): the index leaves the row of the
-- colliding key to it, and the recheck removes it.  The index compares
-- the rows of a parameter array, or of a cross-type constant (int4[]
-- against int8, not hashed), itself: the recheck removes nothing.
CREATE FUNCTION recheck_removed(query text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || query LOOP
    IF line ~ '(Scan|Removed by Index Recheck)' THEN
      -- 18 prints row counts with two decimals; print them as 15 to 17 do
      RETURN NEXT regexp_replace(line, '(rows=[0-9]+)\.00 ', '\1 ', 'g');
    END IF;
  END LOOP;
END $$;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT recheck_removed(format('SELECT id FROM arr WHERE k = ANY(%L::int8[])', keys))
  FROM cases WHERE n = 15;
SELECT recheck_removed(format('SELECT id FROM arr WHERE k = ANY(%L::int4[])', keys))
  FROM cases WHERE n = 15;
SELECT recheck_removed(format('SELECT id FROM arr WHERE s = ANY(%L::text[])',
                              ARRAY[a, 'v1', 'v2', 'v3', 'v4', 'v5', 'v6', 'v7', 'v8']))
  FROM text_pair;
-- the inner side of a nested loop probes again at every rescan
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM generate_series(1, 3) g,
  LATERAL (SELECT id FROM arr WHERE k = ANY('{1,2,3,4,5,6,7,8,9,2999,-5}') AND id <> -g OFFSET 0) x;
SELECT (SELECT count(*) FROM generate_series(1, 3) g,
        LATERAL (SELECT id FROM arr WHERE k = ANY('{1,2,3,4,5,6,7,8,9,2999,-5}') AND id <> -g OFFSET 0) x) =
       3 * (SELECT count(*) FROM arr WHERE k + 0 = ANY('{1,2,3,4,5,6,7,8,9,2999,-5}')) AS rescans_agree;
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
SET plan_cache_mode = force_generic_plan;
PREPARE p_index(int8[]) AS SELECT id FROM arr WHERE k = ANY($1);
SELECT recheck_removed(format('EXECUTE p_index(%L)', keys)) FROM cases WHERE n = 15;
SET enable_bitmapscan = on;
SET enable_indexscan = off;
PREPARE p_bitmap(int8[]) AS SELECT id FROM arr WHERE k = ANY($1);
SELECT recheck_removed(format('EXECUTE p_bitmap(%L)', keys)) FROM cases WHERE n = 15;
RESET plan_cache_mode;
SELECT recheck_removed(format('SELECT id FROM arr WHERE k = ANY(%L::int8[])', keys))
  FROM cases WHERE n = 15;
DEALLOCATE ALL;
RESET enable_indexscan;
RESET enable_bitmapscan;
RESET enable_seqscan;

-- two conditions on the column: one is probed, the executor rechecks both
SET enable_seqscan = off;
SELECT count(*) FROM arr WHERE k = ANY('{1,2,3}') AND k = ANY('{3,4}');
SELECT count(*) FROM arr WHERE k = ANY('{1,2,3}') AND k = 2;
SELECT count(*) FROM arr WHERE k = ANY('{1,2,3}') AND k = ANY('{}');
RESET enable_seqscan;
SELECT count(*) FROM arr WHERE k IN (1, 2, 3) AND k IN (3, 4);

-- what the scan's snapshot sees: rows updated (new TIDs, new keys) and
-- deleted in this transaction, then rolled back
BEGIN;
UPDATE arr SET k = k + 100000 WHERE id % 7 = 0;
DELETE FROM arr WHERE id % 11 = 0;
SELECT n, (check_keys('k', keys)).* FROM cases WHERE n IN (1, 8, 13, 14, 15, 16) ORDER BY n;
SELECT (check_keys('k', ARRAY(SELECT g + 100000 FROM generate_series(0, 3000, 7) g))).*;
ROLLBACK;
SELECT n, (check_keys('k', keys)).* FROM cases WHERE n IN (1, 13) ORDER BY n;

DROP TABLE arr, pair, text_pair, cases;
DROP FUNCTION recheck_removed(text), check_keys(text, anyarray), ids_const(text, anyarray, text),
  ids_seq(text, anyarray), ids_bitmap(text, anyarray), ids_index(text, anyarray);
