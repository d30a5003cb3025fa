-- Backward scans: pmhash index scans go backward (amcanbackward), as hash's
-- do, so a cursor over one moves backward without SCROLL and without a
-- Materialize node; bitmap scans cannot, and PostgreSQL materializes a
-- SCROLL cursor over them.  FETCH LAST, PRIOR, ABSOLUTE and RELATIVE
-- through index and bitmap scans of one and of two key columns return
-- what a seqscan's cursor returns.
CREATE EXTENSION IF NOT EXISTS pmhash;
SET jit = off;
CREATE TABLE sc (id int, k int8, m int);
INSERT INTO sc SELECT g, g % 10, g % 3 FROM generate_series(1, 1000) g;
CREATE INDEX sc_k ON sc USING pmhash (k);
CREATE INDEX sc_km ON sc USING pmhash (k, m);
-- the rows a cursor over q (SCROLL if asked) returns: last, every prior
-- one, then absolute 20, relative -10, next
CREATE FUNCTION scroll_pattern(q text, scroll bool) RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE
	c refcursor;
	r int;
	result int[] := '{}';
BEGIN
	IF scroll THEN
		OPEN c SCROLL FOR EXECUTE q;
	ELSE
		OPEN c FOR EXECUTE q;
	END IF;
	FETCH LAST FROM c INTO r;
	result := result || r;
	LOOP
		FETCH PRIOR FROM c INTO r;
		EXIT WHEN NOT FOUND;
		result := result || r;
	END LOOP;
	FETCH ABSOLUTE 20 FROM c INTO r;
	result := result || r;
	FETCH RELATIVE -10 FROM c INTO r;
	result := result || r;
	FETCH NEXT FROM c INTO r;
	result := result || r;
	CLOSE c;
	RETURN result;
END
$$;
CREATE TABLE patterns (query text, scan text, pattern int[]);
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) DECLARE c SCROLL CURSOR FOR SELECT id FROM sc WHERE k = 3;
EXPLAIN (COSTS OFF) DECLARE c SCROLL CURSOR FOR SELECT id FROM sc WHERE k = 3 AND m = 1;
INSERT INTO patterns SELECT q, 'index', scroll_pattern(q, true)
	FROM unnest(ARRAY['SELECT id FROM sc WHERE k = 3',
					  'SELECT id FROM sc WHERE k = 3 AND m = 1']) q;
INSERT INTO patterns SELECT q, 'index, no SCROLL', scroll_pattern(q, false)
	FROM unnest(ARRAY['SELECT id FROM sc WHERE k = 3',
					  'SELECT id FROM sc WHERE k = 3 AND m = 1',
					  'SELECT id FROM sc WHERE k = ANY (ARRAY[3, 4, 99])']) q;
-- as in PostgreSQL's hash_index test: a cursor without SCROLL moves to the
-- end, back past the start, and forward again
BEGIN;
DECLARE c CURSOR FOR SELECT id FROM sc WHERE k = 3;
MOVE FORWARD ALL FROM c;
MOVE BACKWARD 10000 FROM c;
FETCH 2 FROM c;
FETCH BACKWARD 1 FROM c;
MOVE BACKWARD ALL FROM c;
FETCH BACKWARD 1 FROM c;
FETCH 1 FROM c;
CLOSE c;
COMMIT;
SET enable_indexscan = off;
SET enable_bitmapscan = on;
EXPLAIN (COSTS OFF) DECLARE c SCROLL CURSOR FOR SELECT id FROM sc WHERE k = 3 AND m = 1;
INSERT INTO patterns SELECT q, 'bitmap', scroll_pattern(q, true)
	FROM unnest(ARRAY['SELECT id FROM sc WHERE k = 3',
					  'SELECT id FROM sc WHERE k = 3 AND m = 1']) q;
-- a bitmap scan cannot go backward: without SCROLL, as with hash
SELECT scroll_pattern('SELECT id FROM sc WHERE k = 3', false);
RESET enable_seqscan;
SET enable_bitmapscan = off;
INSERT INTO patterns SELECT q, 'seq', scroll_pattern(q, true)
	FROM unnest(ARRAY['SELECT id FROM sc WHERE k = 3',
					  'SELECT id FROM sc WHERE k = 3 AND m = 1',
					  'SELECT id FROM sc WHERE k = ANY (ARRAY[3, 4, 99])']) q;
RESET ALL;
-- every scan's pattern is the seqscan's; the patterns hold every row once
-- backwards plus three
SELECT p.query, p.scan, p.pattern = s.pattern AS same_as_seqscan, cardinality(p.pattern)
FROM patterns p JOIN patterns s ON s.query = p.query AND s.scan = 'seq'
WHERE p.scan <> 'seq' ORDER BY 1, 2;
CREATE FUNCTION count_rows(q text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	n bigint;
BEGIN
	EXECUTE 'SELECT count(*) FROM (' || q || ') s' INTO n;
	RETURN n;
END
$$;
SELECT query, cardinality(pattern) - 3 = count_rows(query) AS every_row
FROM patterns WHERE scan = 'seq' ORDER BY 1;
DROP TABLE sc, patterns;
DROP FUNCTION scroll_pattern(text, bool), count_rows(text);
