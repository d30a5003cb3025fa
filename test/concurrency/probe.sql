-- pgbench, concurrency suite: probe a key (heavy 10%, absent ~9%) by index scan and by bitmap scan on both indexes
\set h random(0, 9)
\set k random(1, 220000)
\set k case when :h = 0 then 0 else :k end
BEGIN;
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
SELECT count(*), sum(id) FROM conc_rows WHERE k = :k;
SELECT count(*), sum(id) FROM conc_rows WHERE t = conc_t(:k);
SET LOCAL enable_indexscan = off;
SET LOCAL enable_bitmapscan = on;
SELECT count(*), sum(id) FROM conc_rows WHERE k = :k;
SELECT count(*), sum(id) FROM conc_rows WHERE t = conc_t(:k);
COMMIT;
