-- Backward scans: pmhash scans go forward only (amcanbackward is false), so
-- PostgreSQL puts a Materialize node under a SCROLL cursor over them.
-- FETCH LAST, PRIOR, ABSOLUTE and RELATIVE through index and bitmap scans
-- of one and of two key columns return what a seqscan's cursor returns.
CREATE EXTENSION IF NOT EXISTS pmhash;
SET jit = off;
CREATE TABLE sc (id int, k int8, m int);
INSERT INTO sc SELECT g, g % 10, g % 3 FROM generate_series(1, 1000) g;
CREATE INDEX sc_k ON sc USING pmhash (k);
CREATE INDEX sc_km ON sc USING pmhash (k, m);
-- the rows a SCROLL cursor over q returns: last, every prior one, then
-- absolute 50, relative -10, next
CREATE FUNCTION scroll_pattern(q text) RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE
	c refcursor;
	r int;
	result int[] := '{}';
BEGIN
	OPEN c SCROLL FOR EXECUTE q;
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
INSERT INTO patterns SELECT q, 'index', scroll_pattern(q)
	FROM unnest(ARRAY['SELECT id FROM sc WHERE k = 3',
					  'SELECT id FROM sc WHERE k = 3 AND m = 1']) q;
SET enable_indexscan = off;
SET enable_bitmapscan = on;
EXPLAIN (COSTS OFF) DECLARE c SCROLL CURSOR FOR SELECT id FROM sc WHERE k = 3 AND m = 1;
INSERT INTO patterns SELECT q, 'bitmap', scroll_pattern(q)
	FROM unnest(ARRAY['SELECT id FROM sc WHERE k = 3',
					  'SELECT id FROM sc WHERE k = 3 AND m = 1']) q;
RESET enable_seqscan;
SET enable_bitmapscan = off;
INSERT INTO patterns SELECT q, 'seq', scroll_pattern(q)
	FROM unnest(ARRAY['SELECT id FROM sc WHERE k = 3',
					  'SELECT id FROM sc WHERE k = 3 AND m = 1']) q;
RESET ALL;
-- every scan's pattern is the seqscan's; the patterns hold every row once
-- backwards plus three
SELECT p.query, p.scan, p.pattern = s.pattern AS same_as_seqscan, cardinality(p.pattern)
FROM patterns p JOIN patterns s ON s.query = p.query AND s.scan = 'seq'
WHERE p.scan <> 'seq' ORDER BY 1, 2;
SELECT query, cardinality(pattern) - 3 = (SELECT count(*) FROM sc WHERE k = 3
	AND (query NOT LIKE '%m = 1%' OR m = 1)) AS every_row FROM patterns WHERE scan = 'seq' ORDER BY 1;
DROP TABLE sc, patterns;
DROP FUNCTION scroll_pattern(text);
