-- Parallel builds: CREATE INDEX, CREATE INDEX CONCURRENTLY and REINDEX scan
-- the table with parallel workers when the planner grants them (here the
-- table's parallel_workers forces two), each worker spilling what it
-- collects, and the leader merges it all.  Every index is compared with a
-- sequential scan, and with the same index built without workers.  What
-- makes a parallel build fail is tested in errors.sql.
CREATE EXTENSION IF NOT EXISTS pmhash;
SET jit = off;
SET max_parallel_maintenance_workers = 2;

-- the keys (of expression expr over pb) whose rows an index scan of index
-- idx does not find exactly as a sequential scan does: every key of the
-- table, and 100 absent ones, from query absent
CREATE FUNCTION pb_wrong(expr text, idx text, absent text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE q text; plan text := ''; line text; wrong bigint;
BEGIN
  SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off;
  q := format($q$
    WITH keys AS (SELECT DISTINCT %1$s AS v FROM pb WHERE %1$s IS NOT NULL
                  UNION ALL %2$s),
         seq AS MATERIALIZED (SELECT %1$s AS v, count(*) AS n, sum(id) AS s FROM pb GROUP BY 1),
         idx AS (SELECT keys.v, count(pb.id) AS n, sum(pb.id) AS s
                 FROM keys LEFT JOIN LATERAL (SELECT id FROM pb WHERE %1$s = keys.v) pb ON true
                 GROUP BY 1)
    SELECT count(*) FROM idx LEFT JOIN seq USING (v)
    WHERE idx.n <> coalesce(seq.n, 0) OR idx.s IS DISTINCT FROM seq.s$q$, expr, absent);
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
    plan := plan || line || E'\n';
  END LOOP;
  IF position('Index Scan using ' || idx || ' ' IN plan) = 0 THEN
    RAISE EXCEPTION 'the plan does not scan %: %', idx, plan;
  END IF;
  EXECUTE q INTO wrong;
  RETURN wrong;
END $$;
CREATE TABLE pb (id int, k int8, t text) WITH (parallel_workers = 2, autovacuum_enabled = off);
INSERT INTO pb SELECT i, hashint4(i) % 50000, md5((i % 70000)::text)
FROM generate_series(1, 200000) i;
INSERT INTO pb VALUES (0, NULL, NULL);
VACUUM ANALYZE pb;
\set absent_int8 'SELECT 1000000::int8 + g FROM generate_series(1, 100) g'
\set absent_int4 'SELECT 1000000 + g FROM generate_series(1, 100) g'
\set absent_text 'SELECT ''absent'' || g FROM generate_series(1, 100) g'

-- with workers, and without: the same entries, shards and answers
CREATE INDEX pb_k ON pb USING pmhash (k);
CREATE INDEX pb_t ON pb USING pmhash (t);
CREATE INDEX pb_e ON pb USING pmhash ((k * 2));
SELECT pb_wrong('k', 'pb_k', :'absent_int8') AS wrong_k, pb_wrong('t', 'pb_t', :'absent_text') AS wrong_t,
       pb_wrong('k * 2', 'pb_e', :'absent_int8') AS wrong_e;
SELECT pmhash_verify('pb_k') AS k, pmhash_verify('pb_t') AS t, pmhash_verify('pb_e') AS e,
       (SELECT count(k) FROM pb) AS rows_with_k;
SET max_parallel_maintenance_workers = 0;
CREATE INDEX pb_k_serial ON pb USING pmhash (k);
SET max_parallel_maintenance_workers = 2;
SELECT p.shards = s.shards AND p.buckets = s.buckets AND p.entries = s.entries AS same_layout
FROM pmhash_stats('pb_k') p, pmhash_stats('pb_k_serial') s;
DROP INDEX pb_k_serial, pb_e;

-- every participant spills many runs (maintenance_work_mem 1MB: a third
-- of it each), and the merge takes them all
SET maintenance_work_mem = '1MB';
CREATE INDEX pb_k_spilled ON pb USING pmhash (k);
SELECT p.shards = s.shards AND p.buckets = s.buckets AND p.entries = s.entries AS same_layout
FROM pmhash_stats('pb_k_spilled') p, pmhash_stats('pb_k') s;
SELECT pmhash_verify('pb_k_spilled') = (SELECT count(k) FROM pb) AS verify_counts_rows;
-- the runs go to temp_tablespaces, serial and parallel (the first file
-- there makes the directory pgsql_tmp, which stays)
SET allow_in_place_tablespaces = true;
CREATE TABLESPACE pb_tmp_serial LOCATION '';
CREATE TABLESPACE pb_tmp_parallel LOCATION '';
RESET allow_in_place_tablespaces;
CREATE FUNCTION pb_tmp_made(ts name) RETURNS boolean LANGUAGE sql AS $$
  SELECT EXISTS (SELECT FROM pg_ls_dir('pg_tblspc/' || t.oid) v,
                            pg_ls_dir('pg_tblspc/' || t.oid || '/' || v) f
                 WHERE f = 'pgsql_tmp')
  FROM pg_tablespace t WHERE t.spcname = ts
$$;
SELECT pb_tmp_made('pb_tmp_serial') AS serial_before, pb_tmp_made('pb_tmp_parallel') AS parallel_before;
SET temp_tablespaces = pb_tmp_serial;
SET max_parallel_maintenance_workers = 0;
CREATE INDEX pb_k_serial ON pb USING pmhash (k);
SET temp_tablespaces = pb_tmp_parallel;
SET max_parallel_maintenance_workers = 2;
CREATE INDEX pb_k_parallel ON pb USING pmhash (k);
RESET temp_tablespaces;
SELECT pb_tmp_made('pb_tmp_serial') AS serial_after, pb_tmp_made('pb_tmp_parallel') AS parallel_after;
DROP INDEX pb_k_serial, pb_k_parallel;
DROP TABLESPACE pb_tmp_serial;
DROP TABLESPACE pb_tmp_parallel;
DROP FUNCTION pb_tmp_made(name);
RESET maintenance_work_mem;
DROP INDEX pb_k_spilled;

-- a partial index
CREATE INDEX pb_part ON pb USING pmhash (k) WHERE id % 3 = 0;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*), sum(id) FROM pb WHERE k = 17 AND id % 3 = 0;
RESET enable_seqscan;
RESET enable_bitmapscan;
SELECT count(*), sum(id) FROM pb WHERE k = 17 AND id % 3 = 0;
SELECT pmhash_verify('pb_part') = (SELECT count(k) FROM pb WHERE id % 3 = 0) AS verify_counts_rows;
DROP INDEX pb_part;

-- DML, then a parallel REINDEX, plain and concurrent
DELETE FROM pb WHERE id % 7 = 0;
UPDATE pb SET k = k + 100000 WHERE id % 11 = 0;
REINDEX INDEX pb_k;
SELECT pb_wrong('k', 'pb_k', :'absent_int8') AS wrong_k, pmhash_verify('pb_k') = (SELECT count(k) FROM pb) AS verify_counts_rows;
REINDEX INDEX CONCURRENTLY pb_t;
SELECT pb_wrong('t', 'pb_t', :'absent_text') AS wrong_t, pmhash_verify('pb_t') = (SELECT count(t) FROM pb) AS verify_counts_rows;

-- unique: rows 1 and 199,999, at the two ends of the table, share an id
UPDATE pb SET id = 1 WHERE id = 199999;
CREATE UNIQUE INDEX pb_id ON pb USING pmhash (id);
CREATE UNIQUE INDEX CONCURRENTLY pb_id ON pb USING pmhash (id);
SELECT indisvalid FROM pg_index WHERE indexrelid = 'pb_id'::regclass;
DROP INDEX pb_id;
DELETE FROM pb WHERE id = 1 AND k = (SELECT max(k) FROM pb WHERE id = 1);
-- rows this transaction deleted are indexed but not alive: their keys
-- inserted again are no duplicates
BEGIN;
DELETE FROM pb WHERE id BETWEEN 1000 AND 60000;
INSERT INTO pb SELECT g, g, NULL FROM generate_series(1000, 60000) g WHERE g % 7 <> 0;
CREATE UNIQUE INDEX pb_id ON pb USING pmhash (id);
COMMIT;
INSERT INTO pb VALUES (2, 0, NULL);
SELECT pb_wrong('id', 'pb_id', :'absent_int4') AS wrong_id, pmhash_verify('pb_id') = (SELECT count(id) FROM pb) AS verify_counts_rows;
DROP INDEX pb_id;
CREATE UNIQUE INDEX CONCURRENTLY pb_id ON pb USING pmhash (id);
SELECT indisvalid FROM pg_index WHERE indexrelid = 'pb_id'::regclass;
SELECT pb_wrong('id', 'pb_id', :'absent_int4') AS wrong_id, pmhash_verify('pb_id') = (SELECT count(id) FROM pb) AS verify_counts_rows;
INSERT INTO pb VALUES (3, 0, NULL);

DROP TABLE pb;
DROP FUNCTION pb_wrong(text, text, text);
RESET max_parallel_maintenance_workers;
