--
-- ALTER EXTENSION pmhash UPDATE from 0.1, in a database whose pmhash
-- indexes (unique ones and one on a user's operator class) are in use:
-- before the update (this library on version 0.1's catalog) and after it,
-- probes by index and bitmap scans agree with a seqscan, prepared
-- statements keep working, upserts use the pmhash arbiter and duplicates
-- are refused.  0.2 renumbers equality from 1 to 3 (btree's number); 0.3
-- adds pmhash_shards.
--
\set regress_db :DBNAME
CREATE DATABASE pmhash_upgrade;
\c pmhash_upgrade
SET jit = off;
CREATE EXTENSION pmhash VERSION '0.1';
SELECT extversion FROM pg_extension WHERE extname = 'pmhash';

-- operator numbers of the extension's families and of a user's
CREATE VIEW up_numbers AS
  SELECT EXISTS (SELECT FROM pg_depend d
                 WHERE d.classid = 'pg_opfamily'::regclass AND d.objid = o.amopfamily
                   AND d.deptype = 'e') AS extension_member,
         o.amopstrategy, count(*)
  FROM pg_amop o JOIN pg_am a ON a.oid = o.amopmethod
  WHERE a.amname = 'pmhash'
  GROUP BY 1, 2 ORDER BY 1, 2;
CREATE OPERATOR CLASS up_user_ops FOR TYPE int4 USING pmhash AS
  OPERATOR 1 = (int4, int4), FUNCTION 1 hashint4(int4);
SELECT * FROM up_numbers;

CREATE TABLE up_t (k int8 NOT NULL, s text NOT NULL, n int4, v int NOT NULL DEFAULT 0);
INSERT INTO up_t SELECT g, md5(g::text), g % 997 FROM generate_series(1, 20000) g;
CREATE UNIQUE INDEX up_k ON up_t USING pmhash (k);
CREATE UNIQUE INDEX up_s ON up_t USING pmhash (s);
CREATE INDEX up_n ON up_t USING pmhash (n up_user_ops);

-- Keys (present, absent, cross-type) whose counts by index scan, by bitmap
-- scan and by seqscan differ, and whether the first two used the index.
CREATE FUNCTION up_mismatches(OUT mismatches int, OUT plans_use_index bool)
LANGUAGE plpgsql AS $$
DECLARE
  quals text[] := ARRAY['k = 17', 'k = 20001', 'k = 4242::int4', 'k = 7::int2',
                        's = md5(''99'')', 's = ''absent''', 's = md5(''5'')::name',
                        'n = 5', 'n = 996', 'n = 2000'];
  q text;
  line text;
  plan text;
  c_index bigint;
  c_bitmap bigint;
  c_seq bigint;
BEGIN
  mismatches := 0;
  plans_use_index := true;
  FOREACH q IN ARRAY quals LOOP
    SET LOCAL enable_seqscan = off;
    SET LOCAL enable_bitmapscan = off;
    plan := '';
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) SELECT count(*) FROM up_t WHERE ' || q LOOP
      plan := plan || line;
    END LOOP;
    plans_use_index := plans_use_index AND plan LIKE '%Index Scan%';
    EXECUTE 'SELECT count(*) FROM up_t WHERE ' || q INTO c_index;
    SET LOCAL enable_indexscan = off;
    SET LOCAL enable_bitmapscan = on;
    EXECUTE 'SELECT count(*) FROM up_t WHERE ' || q INTO c_bitmap;
    SET LOCAL enable_bitmapscan = off;
    SET LOCAL enable_seqscan = on;
    EXECUTE 'SELECT count(*) FROM up_t WHERE ' || q INTO c_seq;
    RESET enable_seqscan;
    RESET enable_indexscan;
    RESET enable_bitmapscan;
    IF c_index <> c_seq OR c_bitmap <> c_seq THEN
      mismatches := mismatches + 1;
      RAISE NOTICE '%: index %, bitmap %, seqscan %', q, c_index, c_bitmap, c_seq;
    END IF;
  END LOOP;
END $$;

-- the library on version 0.1's catalog
SET enable_seqscan = off;
PREPARE up_probe(int4) AS SELECT k, s FROM up_t WHERE k = $1;
EXECUTE up_probe(12);
SELECT * FROM up_mismatches();
INSERT INTO up_t (k, s) VALUES (20001, 'new') ON CONFLICT (k) DO UPDATE SET v = up_t.v + 1;
INSERT INTO up_t (k, s) VALUES (12, 'twelve') ON CONFLICT (k) DO UPDATE SET v = up_t.v + 1;
INSERT INTO up_t (k, s) VALUES (20002, md5('3')) ON CONFLICT (s) DO NOTHING;
INSERT INTO up_t (k, s) VALUES (13, 'thirteen');
SELECT k, s, v FROM up_t WHERE k IN (12, 20001, 20002) ORDER BY k;

ALTER EXTENSION pmhash UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'pmhash';
-- 0.3 adds pmhash_shards: a row per shard
SELECT count(*) = (SELECT shards FROM pmhash_stats('up_k')) AS a_row_per_shard
FROM pmhash_shards('up_k');
-- the extension's families now say 3; the user's keeps 1
SELECT * FROM up_numbers;
SELECT c.opcname, amvalidate(c.oid)
FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
WHERE a.amname = 'pmhash' AND NOT amvalidate(c.oid);

-- the same, on version 0.2's catalog, in the same session
EXECUTE up_probe(12);
SELECT * FROM up_mismatches();
INSERT INTO up_t (k, s) VALUES (20001, 'newer') ON CONFLICT (k) DO UPDATE SET v = up_t.v + 1;
INSERT INTO up_t (k, s) VALUES (20003, md5('4')) ON CONFLICT (s) DO UPDATE SET v = up_t.v + 10;
INSERT INTO up_t (k, s) VALUES (14, 'fourteen');
INSERT INTO up_t (k, s) VALUES (30000, 'thirty thousand');
SELECT k, s, v FROM up_t WHERE k IN (4, 20001, 20003, 30000) ORDER BY k;
-- and in a new session
\c pmhash_upgrade
SET enable_seqscan = off;
SELECT * FROM up_mismatches();
-- (INDEX_CLEANUP ON: VACUUM skips the indexes for a few dead rows; FREEZE:
-- it waits for a page another process has pinned rather than leave it)
VACUUM (FREEZE, INDEX_CLEANUP ON) up_t;
SELECT pmhash_verify('up_k') = (SELECT count(*) FROM up_t) AS k_sound,
       pmhash_verify('up_s') = (SELECT count(*) FROM up_t) AS s_sound;

\c :regress_db
DROP DATABASE pmhash_upgrade;
