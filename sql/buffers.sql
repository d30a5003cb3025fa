-- Index scans of a pmhash index do not go through shared_buffers.  A
-- nested loop of a thousand probes for absent keys reads no heap page, so
-- the buffers it uses (EXPLAIN's shared hit and read blocks) are those of
-- the probe table's scan plus the index's: none for pmhash, at least one
-- per probe for a hash index on a copy of the table.  Present keys give the
-- sequential scan's answer through both.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pmhash;
RESET client_min_messages;
SET jit = off;
CREATE TABLE buffers_pm (id int, k int8);
INSERT INTO buffers_pm SELECT i, i % 5000 FROM generate_series(1, 20000) i;
CREATE TABLE buffers_hash AS SELECT * FROM buffers_pm;
CREATE INDEX buffers_pm_k ON buffers_pm USING pmhash (k);
CREATE INDEX buffers_hash_k ON buffers_hash USING hash (k);
CREATE TABLE buffers_present AS SELECT (g * 7919) % 5000 AS k FROM generate_series(1, 1000) g;
CREATE TABLE buffers_absent AS SELECT 5000 + g AS k FROM generate_series(1, 1000) g;
ANALYZE buffers_pm, buffers_hash, buffers_present, buffers_absent;

-- the shared buffers a query's execution used (hits and reads)
CREATE FUNCTION buffers_used(query text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE plan json;
BEGIN
  EXECUTE 'EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ' || query INTO plan;
  RETURN (plan -> 0 -> 'Plan' ->> 'Shared Hit Blocks')::bigint +
         (plan -> 0 -> 'Plan' ->> 'Shared Read Blocks')::bigint;
END $$;
-- EXPLAIN (COSTS OFF) of a query, without 18's "Disabled: true" lines
CREATE FUNCTION buffers_plan(query text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
    CONTINUE WHEN line ~ '^\s*Disabled: true$';
    RETURN NEXT line;
  END LOOP;
END $$;

-- the answers to compare with: sequential scans
SET enable_indexscan = off;
SET enable_bitmapscan = off;
CREATE TABLE buffers_expect AS
  SELECT count(*) AS n, sum(b.id) AS s FROM buffers_present p JOIN buffers_pm b ON b.k = p.k;
RESET enable_indexscan;

-- nested loops of index probes
SET enable_seqscan = off;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_memoize = off;
SELECT buffers_plan('SELECT count(*) FROM buffers_absent p JOIN buffers_pm b ON b.k = p.k');
SELECT buffers_plan('SELECT count(*) FROM buffers_absent p JOIN buffers_hash b ON b.k = p.k');

SELECT n > 1000 AS rows_found FROM buffers_expect;
SELECT am, g.n = e.n AND g.s = e.s AS same_as_seqscan
FROM (SELECT 'pmhash' AS am, count(*) AS n, sum(b.id) AS s
      FROM buffers_present p JOIN buffers_pm b ON b.k = p.k
      UNION ALL
      SELECT 'hash', count(*), sum(b.id)
      FROM buffers_present p JOIN buffers_hash b ON b.k = p.k) g, buffers_expect e
ORDER BY am;

-- open both indexes first; then count the buffers of the absent-key probes
SELECT count(*) FROM buffers_absent p JOIN buffers_pm b ON b.k = p.k;
SELECT count(*) FROM buffers_absent p JOIN buffers_hash b ON b.k = p.k;
SELECT buffers_used('SELECT count(*) FROM buffers_absent') AS probe_scan \gset
SELECT :probe_scan > 0 AS probe_scan_counted,
       buffers_used('SELECT count(*) FROM buffers_absent p JOIN buffers_pm b ON b.k = p.k')
         - :probe_scan AS pmhash_index_buffers,
       buffers_used('SELECT count(*) FROM buffers_absent p JOIN buffers_hash b ON b.k = p.k')
         - :probe_scan >= 1000 AS hash_one_per_probe_or_more;

DROP TABLE buffers_pm, buffers_hash, buffers_present, buffers_absent, buffers_expect;
DROP FUNCTION buffers_used(text), buffers_plan(text);
