-- Errors of pmhash: what CREATE INDEX and ALTER INDEX refuse, what the
-- planner will not use a pmhash index for, pmhash_stats and pmhash_verify
-- on the wrong relation or by the wrong role, and run-time changes of the
-- pmhash parameters.  No refused statement may leave a file behind, and
-- pmhash_verify passes on healthy indexes of every shape.
CREATE EXTENSION IF NOT EXISTS pmhash;

-- SQLSTATE and message of the error a statement raises, or 'ok'
CREATE FUNCTION er_error(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE stmt;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  -- 18 quotes a parameter's name in this message; print it as 15 to 17 do
  RETURN SQLSTATE || ': ' || replace(SQLERRM, '"temp_file_limit"', 'temp_file_limit');
END $$;
-- EXPLAIN (COSTS OFF) of a query, without 18's "Disabled: true" lines
CREATE FUNCTION er_plan(query text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
    CONTINUE WHEN line ~ '^\s*Disabled: true$';
    RETURN NEXT line;
  END LOOP;
END $$;
-- whether this database's .pmh files are exactly one per pmhash index
CREATE FUNCTION er_files_match() RETURNS boolean LANGUAGE sql AS $$
  SELECT (SELECT count(*) FROM pg_ls_dir(current_setting('pmhash.directory'), true, false) f
          WHERE f ~ ('^(t[0-9]+_)?' || d.oid || '_[0-9]+\.pmh$'))
       = (SELECT count(*) FROM pg_class c JOIN pg_am a ON a.oid = c.relam
          WHERE a.amname = 'pmhash' AND c.relkind = 'i')
  FROM pg_database d WHERE d.datname = current_database()
$$;

CREATE TABLE er_t (id int, k int, t text, p point);
INSERT INTO er_t SELECT i, i % 10, 'x' || (i % 25), point(i, i) FROM generate_series(1, 1000) i;
INSERT INTO er_t VALUES (0, NULL, NULL, NULL);
CREATE INDEX er_t_k ON er_t USING pmhash (k);

--
-- CREATE INDEX: unsupported index kinds and types, a unique index over duplicates
--
CREATE UNIQUE INDEX er_bad ON er_t USING pmhash (k);
CREATE INDEX er_bad ON er_t USING pmhash (k) INCLUDE (id);
CREATE INDEX er_bad ON er_t USING pmhash (k DESC);
CREATE INDEX er_bad ON er_t USING pmhash (k NULLS FIRST);
CREATE INDEX er_bad ON er_t USING pmhash (p);
CREATE INDEX er_bad ON er_t USING pmhash (k text_ops);
ALTER TABLE er_t ADD CONSTRAINT er_bad UNIQUE USING INDEX er_t_k;
SELECT er_error($$CREATE UNIQUE INDEX er_bad ON er_t USING pmhash (k)$$) AS unique_index,
       er_error($$CREATE INDEX er_bad ON er_t USING pmhash (p)$$) AS no_opclass;
SELECT er_files_match();

--
-- Reloptions: shards must be a power of two between 1 and 65536, or 0;
-- fillfactor between 10 and 100
--
CREATE INDEX er_bad ON er_t USING pmhash (k) WITH (shards = 3);
CREATE INDEX er_bad ON er_t USING pmhash (k) WITH (shards = -1);
CREATE INDEX er_bad ON er_t USING pmhash (k) WITH (shards = 131072);
CREATE INDEX er_bad ON er_t USING pmhash (k) WITH (shards = 'many');
CREATE INDEX er_bad ON er_t USING pmhash (k) WITH (buckets = 16);
CREATE INDEX er_bad ON er_t USING pmhash (k) WITH (fillfactor = 9);
CREATE INDEX er_bad ON er_t USING pmhash (k) WITH (fillfactor = 101);
SELECT er_error($$CREATE INDEX er_bad ON er_t USING pmhash (k) WITH (shards = 3)$$) AS not_power_of_two,
       er_error($$CREATE INDEX er_bad ON er_t USING pmhash (k) WITH (shards = 131072)$$) AS too_many;
-- ALTER INDEX checks the same way and leaves the index as it was
ALTER INDEX er_t_k SET (shards = 48);
ALTER INDEX er_t_k SET (colour = 'blue');
SELECT reloptions FROM pg_class WHERE oid = 'er_t_k'::regclass;
SELECT er_files_match();
-- the bounds and 0 (automatic) are accepted
CREATE INDEX er_s1 ON er_t USING pmhash (k) WITH (shards = 1);
CREATE INDEX er_s65536 ON er_t USING pmhash (k) WITH (shards = 65536);
CREATE INDEX er_s0 ON er_t USING pmhash (k) WITH (shards = 0);
SELECT s.shards, s.entries FROM unnest('{er_s1,er_s65536,er_s0}'::regclass[]) WITH ORDINALITY AS i(idx, n),
  LATERAL pmhash_stats(i.idx) s ORDER BY i.n;
DROP INDEX er_s1, er_s65536, er_s0;
-- a build fills that share of the bucket slots, at most 88%; 75% by default
CREATE TABLE er_ff AS SELECT g AS k FROM generate_series(1, 50000) g;
CREATE INDEX er_ff10 ON er_ff USING pmhash (k) WITH (fillfactor = 10, shards = 16);
CREATE INDEX er_ff50 ON er_ff USING pmhash (k) WITH (fillfactor = 50, shards = 16);
CREATE INDEX er_ff100 ON er_ff USING pmhash (k) WITH (fillfactor = 100, shards = 16);
CREATE INDEX er_ffdefault ON er_ff USING pmhash (k) WITH (shards = 16);
-- (a shard's buckets are whole, so the fill lands just below the target;
-- 16 shards of this table are large enough for that to stay within 0.015)
SELECT i.idx, s.fill <= i.target AND s.fill > i.target - 0.015 AS fill_near_target, s.entries
  FROM unnest('{er_ff10,er_ff50,er_ff100,er_ffdefault}'::regclass[], '{0.10,0.50,0.88,0.75}'::float8[])
       WITH ORDINALITY AS i(idx, target, n),
  LATERAL pmhash_stats(i.idx) s ORDER BY i.n;
SELECT count(*) FROM er_ff WHERE k IN (1, 25000, 50000, 50001);
DROP TABLE er_ff;

--
-- Exclusion constraints: pmhash can enforce "k WITH =" through rechecks
--
ALTER TABLE er_t ADD CONSTRAINT er_excl EXCLUDE USING pmhash (k WITH =);
SELECT er_error($$ALTER TABLE er_t ADD CONSTRAINT er_excl EXCLUDE USING pmhash (k WITH =)$$) AS duplicates;
SELECT er_files_match();
CREATE TABLE er_x (id int, k int);
INSERT INTO er_x SELECT i, i FROM generate_series(1, 500) i;
ALTER TABLE er_x ADD CONSTRAINT er_x_excl EXCLUDE USING pmhash (k WITH =);
INSERT INTO er_x VALUES (501, 250);
SELECT er_error($$INSERT INTO er_x VALUES (502, 17)$$) AS conflict,
       er_error($$INSERT INTO er_x VALUES (503, 1000), (504, NULL), (505, NULL)$$) AS no_conflict;
SELECT count(*), count(DISTINCT k), pmhash_verify('er_x_excl') FROM er_x;
DROP TABLE er_x;

--
-- What the planner does not use a pmhash index for
--
SET enable_seqscan = off;
-- ordering, ranges and IS NULL: no pmhash scan
SELECT er_plan('SELECT * FROM er_t ORDER BY k');
SELECT er_plan('SELECT * FROM er_t WHERE k > 3');
SELECT er_plan('SELECT * FROM er_t WHERE k IS NULL');
-- "= ANY" reaches the index whole (amsearcharray): an index scan when bitmap scans are off
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM er_t WHERE k = ANY ('{1,2}');
RESET enable_bitmapscan;
SELECT count(*) FROM er_t WHERE k = ANY ('{1,2,NULL,11}');
RESET enable_seqscan;
SELECT count(*) FROM er_t WHERE k = ANY ('{1,2,NULL,11}');

--
-- pmhash_stats and pmhash_verify on relations that are not pmhash indexes
--
CREATE INDEX er_t_btree ON er_t USING btree (k);
CREATE TABLE er_parted (id int, k int) PARTITION BY LIST (id);
CREATE INDEX er_parted_k ON er_parted USING pmhash (k);
SELECT pmhash_stats('er_t_btree');
SELECT pmhash_verify('er_t');
SELECT r AS relation, er_error(format('SELECT pmhash_stats(%L)', r)) AS stats,
       er_error(format('SELECT pmhash_verify(%L)', r)) AS verify
FROM unnest('{er_t_btree,er_t,er_parted,er_parted_k,pg_class}'::text[]) r;
SELECT pmhash_verify(NULL), pmhash_stats(NULL);
SELECT pmhash_verify('er_no_such_index');
SELECT er_error('SELECT pmhash_stats(0)') AS stats_of_oid_0,
       er_error('SELECT pmhash_verify(0)') AS verify_of_oid_0;
-- an index whose CREATE INDEX CONCURRENTLY failed before it was built
CREATE TABLE er_cic (k int);
INSERT INTO er_cic VALUES (0);
CREATE INDEX CONCURRENTLY er_cic_k ON er_cic USING pmhash ((1 / k));
SELECT er_error($$SELECT pmhash_stats('er_cic_k')$$) AS stats,
       er_error($$SELECT pmhash_verify('er_cic_k')$$) AS verify;
REINDEX INDEX er_cic_k;
DELETE FROM er_cic;
REINDEX INDEX er_cic_k;
SELECT entries, pmhash_verify('er_cic_k') FROM pmhash_stats('er_cic_k');
DROP TABLE er_cic;
DROP TABLE er_parted;
DROP INDEX er_t_btree;

--
-- Privileges: only the owner (and superusers) may inspect an index
--
CREATE ROLE regress_pmhash_er_owner;
CREATE ROLE regress_pmhash_er_other;
CREATE TABLE er_priv (id int, k int, t text);
INSERT INTO er_priv SELECT i, i % 10, 'y' || i FROM generate_series(1, 200) i;
CREATE INDEX er_priv_k ON er_priv USING pmhash (k);
ALTER TABLE er_priv OWNER TO regress_pmhash_er_owner;
GRANT CREATE ON SCHEMA public TO regress_pmhash_er_owner;
GRANT SELECT ON er_priv TO regress_pmhash_er_other;
-- another role may use the index, but not inspect it
SET ROLE regress_pmhash_er_other;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM er_priv WHERE k = 3;
SELECT count(*) FROM er_priv WHERE k = 3;
RESET enable_seqscan;
SELECT pmhash_stats('er_priv_k');
SELECT pmhash_verify('er_priv_k');
SELECT er_error($$SELECT pmhash_stats('er_priv_k')$$) AS stats,
       er_error($$SELECT pmhash_verify('er_priv_k')$$) AS verify;
RESET ROLE;
-- the owner may, and may create and drop pmhash indexes
SET ROLE regress_pmhash_er_owner;
SELECT entries, shards > 0 AS has_shards FROM pmhash_stats('er_priv_k');
SELECT pmhash_verify('er_priv_k');
CREATE INDEX er_priv_t ON er_priv USING pmhash (t);
SELECT pmhash_verify('er_priv_t');
SELECT count(*) FROM er_priv WHERE t = 'y7';
DROP INDEX er_priv_t;
RESET ROLE;
-- the superuser may inspect any index
SELECT pmhash_verify('er_priv_k');
SELECT er_files_match();
DROP TABLE er_priv;
REVOKE CREATE ON SCHEMA public FROM regress_pmhash_er_owner;
DROP ROLE regress_pmhash_er_owner, regress_pmhash_er_other;

--
-- A build larger than maintenance_work_mem spills its batches to temporary
-- files: over temp_file_limit it fails with PostgreSQL's error and leaves no
-- file; within it, plain and unique builds hold every entry
--
CREATE TABLE er_spill (k int8) WITH (autovacuum_enabled = off);
INSERT INTO er_spill SELECT i FROM generate_series(1, 200000) i;
SET maintenance_work_mem = '1MB';
SET temp_file_limit = '100kB';
SELECT er_error($$CREATE INDEX er_spill_k ON er_spill USING pmhash (k)$$) AS plain_over_limit,
       er_error($$CREATE UNIQUE INDEX er_spill_k ON er_spill USING pmhash (k)$$) AS unique_over_limit;
SELECT er_files_match();
RESET temp_file_limit;
CREATE INDEX er_spill_k ON er_spill USING pmhash (k);
CREATE UNIQUE INDEX er_spill_u ON er_spill USING pmhash (k);
RESET maintenance_work_mem;
SELECT pmhash_verify('er_spill_k') AS plain_entries, pmhash_verify('er_spill_u') AS unique_entries;
SELECT er_files_match();
DROP TABLE er_spill;

--
-- A parallel build: an error of a worker fails it and leaves no file, and
-- so does temp_file_limit, whichever participant spills past it
--
CREATE FUNCTION er_fail_in_worker(k int8) RETURNS int8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  IF pg_backend_pid() <> current_setting('er.leader')::int THEN
    RAISE EXCEPTION 'er_fail_in_worker called in a parallel worker';
  END IF;
  RETURN k;
END $$;
CREATE TABLE er_parallel (k int8) WITH (parallel_workers = 2, autovacuum_enabled = off);
INSERT INTO er_parallel SELECT i FROM generate_series(1, 200000) i;
SELECT set_config('er.leader', pg_backend_pid()::text, false) IS NOT NULL AS leader_set;
SET max_parallel_maintenance_workers = 2;
SELECT er_error($$CREATE INDEX er_parallel_f ON er_parallel USING pmhash (er_fail_in_worker(k))$$)
       AS with_workers;
SELECT er_files_match();
SET maintenance_work_mem = '1MB';
SET temp_file_limit = '100kB';
SELECT er_error($$CREATE INDEX er_parallel_k ON er_parallel USING pmhash (k)$$) AS over_limit;
SELECT er_files_match();
RESET temp_file_limit;
RESET maintenance_work_mem;
SET max_parallel_maintenance_workers = 0;
SELECT er_error($$CREATE INDEX er_parallel_f ON er_parallel USING pmhash (er_fail_in_worker(k))$$)
       AS without_workers;
RESET max_parallel_maintenance_workers;
SELECT pmhash_verify('er_parallel_f') AS entries;
DROP TABLE er_parallel;
DROP FUNCTION er_fail_in_worker(int8);
SELECT er_files_match();

--
-- Parameters are fixed at server start; the pmhash prefix is reserved
--
SET pmhash.directory = '/tmp';
SELECT set_config('pmhash.directory', 'elsewhere', false);
SELECT er_error($$SET pmhash.directory = 'elsewhere'$$) AS directory,
       er_error($$SET LOCAL pmhash.shard_locks = 16$$) AS shard_locks;
SET pmhash.max_indexes = 8;
SET pmhash.no_such_parameter = 1;
SELECT name, context FROM pg_settings WHERE name LIKE 'pmhash.%' ORDER BY name;

--
-- pmhash_verify passes on healthy indexes of every shape
--
CREATE TABLE er_shapes (id int, k int, t text, f float8) WITH (autovacuum_enabled = off);
INSERT INTO er_shapes SELECT i, CASE WHEN i % 7 = 0 THEN NULL ELSE i % 300 END,
  repeat('z', i % 40), i / 3.0 FROM generate_series(1, 3000) i;
CREATE TABLE er_empty (k int);
CREATE TABLE er_nulls (k int);
INSERT INTO er_nulls SELECT NULL FROM generate_series(1, 100);
CREATE TEMP TABLE er_temp (k int);
INSERT INTO er_temp SELECT i % 50 FROM generate_series(1, 1000) i;
CREATE UNLOGGED TABLE er_unlogged (k int);
INSERT INTO er_unlogged SELECT i % 50 FROM generate_series(1, 1000) i;
CREATE INDEX er_shapes_k ON er_shapes USING pmhash (k);
CREATE INDEX er_shapes_t ON er_shapes USING pmhash (t);
CREATE INDEX er_shapes_f ON er_shapes USING pmhash (f);
CREATE INDEX er_shapes_expr ON er_shapes USING pmhash ((k * 2 + 1));
CREATE INDEX er_shapes_partial ON er_shapes USING pmhash (k) WHERE id % 2 = 0;
CREATE INDEX er_shapes_one ON er_shapes USING pmhash (t) WITH (shards = 1);
CREATE INDEX er_empty_k ON er_empty USING pmhash (k);
CREATE INDEX er_nulls_k ON er_nulls USING pmhash (k);
CREATE INDEX er_temp_k ON er_temp USING pmhash (k);
CREATE INDEX er_unlogged_k ON er_unlogged USING pmhash (k);
-- a few changes after the build
DELETE FROM er_shapes WHERE id % 5 = 0;
UPDATE er_shapes SET k = k + 1, t = t || 'u' WHERE id % 11 = 0;
INSERT INTO er_empty VALUES (1), (NULL), (1);
VACUUM er_shapes;
SELECT v.idx, pmhash_verify(v.idx) = v.expected AS verified
FROM (VALUES ('er_t_k'::regclass, (SELECT count(k) FROM er_t)),
             ('er_shapes_k', (SELECT count(k) FROM er_shapes)),
             ('er_shapes_t', (SELECT count(t) FROM er_shapes)),
             ('er_shapes_f', (SELECT count(f) FROM er_shapes)),
             ('er_shapes_expr', (SELECT count(k) FROM er_shapes)),
             ('er_shapes_partial', (SELECT count(k) FROM er_shapes WHERE id % 2 = 0)),
             ('er_shapes_one', (SELECT count(t) FROM er_shapes)),
             ('er_empty_k', 2),
             ('er_nulls_k', 0),
             ('er_unlogged_k', 1000)) AS v(idx, expected)
ORDER BY 1;
SELECT pmhash_verify('er_temp_k') AS temp_verify;
SELECT er_files_match();

DROP TABLE er_t, er_shapes, er_empty, er_nulls, er_temp, er_unlogged;
SELECT er_files_match();
DROP FUNCTION er_error(text);
DROP FUNCTION er_plan(text);
DROP FUNCTION er_files_match();
