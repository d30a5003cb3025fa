-- Lifecycle of pmhash index files: every DDL path that creates, replaces or
-- drops an index (transactional or not) leaves exactly the files it should,
-- and the index answers like a sequential scan afterwards.  File names are
-- never printed, only whether the file of a relfilenode exists.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pmhash;
RESET client_min_messages;

-- .pmh files of a database (default: this one) in pmhash.directory
CREATE FUNCTION lc_files(db oid DEFAULT NULL) RETURNS SETOF text LANGUAGE sql AS $$
  SELECT f FROM pg_ls_dir(current_setting('pmhash.directory'), true, false) f
  WHERE f ~ ('^(t[0-9]+_)?' ||
             coalesce(db, (SELECT oid FROM pg_database WHERE datname = current_database())) ||
             '_[0-9]+\.pmh$')
$$;
CREATE FUNCTION lc_nfiles(db oid DEFAULT NULL) RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM lc_files(db)
$$;
-- the file of a relfilenode (named <database>_<relfilenode>.pmh): 'file',
-- 'temp file' (t<backend>_ prefix) or 'none'
CREATE FUNCTION lc_node_file(node oid) RETURNS text LANGUAGE sql AS $$
  SELECT CASE
    WHEN bool_or(f ~ ('^' || d.oid || '_' || node || '\.pmh$')) THEN 'file'
    WHEN bool_or(f ~ ('^t[0-9]+_' || d.oid || '_' || node || '\.pmh$')) THEN 'temp file'
    ELSE 'none' END
  FROM pg_database d LEFT JOIN lc_files() f ON true
  WHERE d.datname = current_database()
$$;
CREATE FUNCTION lc_file(idx regclass) RETURNS text LANGUAGE sql AS $$
  SELECT lc_node_file(pg_relation_filenode(idx))
$$;
-- EXPLAIN (COSTS OFF) of a query, without 18's "Disabled: true" lines
CREATE FUNCTION lc_plan(query text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
    CONTINUE WHEN line ~ '^\s*Disabled: true$';
    RETURN NEXT line;
  END LOOP;
END $$;

-- For each probe value: a plain index scan and a bitmap scan, whose plans
-- must use an index matching idx (a regular expression), return the same
-- ids as a sequential scan.  Returns the number of rows found; raises an
-- error on a disagreement or when the index is not used.
CREATE FUNCTION lc_check(rel regclass, expr text, idx text, probes text[],
                         pred text DEFAULT 'true') RETURNS bigint LANGUAGE plpgsql
SET enable_seqscan = on SET enable_indexscan = on SET enable_bitmapscan = on AS $$
DECLARE
  v text; q text; scan text; line text; plan text; ids int[]; ref int[];
  total bigint := 0;
BEGIN
  FOREACH v IN ARRAY probes LOOP
    q := format('SELECT array_agg(id ORDER BY id) FROM %s WHERE %s = %L AND %s', rel, expr, v, pred);
    PERFORM set_config('enable_indexscan', 'off', true);
    PERFORM set_config('enable_bitmapscan', 'off', true);
    EXECUTE q INTO ref;
    PERFORM set_config('enable_seqscan', 'off', true);
    FOREACH scan IN ARRAY ARRAY['Index Scan using ', 'Bitmap Index Scan on '] LOOP
      PERFORM set_config('enable_indexscan', (scan LIKE 'Index%')::text, true);
      PERFORM set_config('enable_bitmapscan', (scan LIKE 'Bitmap%')::text, true);
      plan := '';
      FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
        plan := plan || line || E'\n';
      END LOOP;
      IF plan !~ (scan || idx || '\M') THEN
        RAISE EXCEPTION 'no "%" % for %: %', scan, idx, v, plan;
      END IF;
      EXECUTE q INTO ids;
      IF ids IS DISTINCT FROM ref THEN
        RAISE EXCEPTION '"%" % disagrees with a seqscan for %: % / %', scan, idx, v, ids, ref;
      END IF;
    END LOOP;
    PERFORM set_config('enable_seqscan', 'on', true);
    total := total + coalesce(cardinality(ref), 0);
  END LOOP;
  RETURN total;
END $$;
-- wait up to max_wait seconds for the file of a relfilenode to go away
CREATE FUNCTION lc_wait_gone(node oid, max_wait int) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. max_wait * 10 LOOP
    EXIT WHEN lc_node_file(node) = 'none';
    PERFORM pg_sleep(0.1);
  END LOOP;
  RETURN lc_node_file(node);
END $$;
SELECT current_database() AS regress_db \gset

CREATE TABLE lc_t (id int, k int, t text);
INSERT INTO lc_t SELECT i, i % 97, 'Val' || (i % 50) FROM generate_series(1, 5000) i;
INSERT INTO lc_t VALUES (0, NULL, NULL);

--
-- CREATE INDEX and DROP INDEX
--
SELECT lc_nfiles() AS files0 \gset
CREATE INDEX lc_t_k ON lc_t USING pmhash (k);
SELECT lc_nfiles() - :files0 AS new_files, lc_file('lc_t_k');
SELECT lc_check('lc_t', 'k', 'lc_t_k', '{0,1,42,96,97,-1}');
SELECT pmhash_verify('lc_t_k');
-- a committed DROP INDEX removes the file
SELECT pg_relation_filenode('lc_t_k') AS node \gset
DROP INDEX lc_t_k;
SELECT lc_nfiles() - :files0 AS new_files, lc_node_file(:node);
-- DROP INDEX rolled back: the file stays and the index still works
CREATE INDEX lc_t_k ON lc_t USING pmhash (k);
BEGIN;
DROP INDEX lc_t_k;
ROLLBACK;
SELECT lc_nfiles() - :files0 AS new_files, lc_file('lc_t_k');
SELECT lc_check('lc_t', 'k', 'lc_t_k', '{0,5,96}');
-- CREATE INDEX rolled back: no file left
BEGIN;
CREATE INDEX lc_t_k2 ON lc_t USING pmhash (k);
SELECT pg_relation_filenode('lc_t_k2') AS node \gset
SELECT lc_node_file(:node) AS inside_transaction;
ROLLBACK;
SELECT lc_nfiles() - :files0 AS new_files, lc_node_file(:node);
-- CREATE INDEX in a savepoint rolled back: its file goes at once; an index
-- created after it in the same transaction survives the commit
BEGIN;
SAVEPOINT s1;
CREATE INDEX lc_t_k2 ON lc_t USING pmhash (k);
SELECT pg_relation_filenode('lc_t_k2') AS node \gset
ROLLBACK TO SAVEPOINT s1;
SELECT lc_node_file(:node) AS after_rollback_to;
CREATE INDEX lc_t_t ON lc_t USING pmhash (t);
COMMIT;
SELECT lc_nfiles() - :files0 AS new_files, lc_node_file(:node), lc_file('lc_t_t');
SELECT lc_check('lc_t', 't', 'lc_t_t', '{Val0,Val49,val1,""}');
-- a released savepoint's index follows its top transaction: kept on
-- commit, removed on rollback
BEGIN;
SAVEPOINT s1;
CREATE INDEX lc_t_k2 ON lc_t USING pmhash (k);
RELEASE SAVEPOINT s1;
SAVEPOINT s2;
CREATE INDEX lc_t_k3 ON lc_t USING pmhash (k);
SELECT pg_relation_filenode('lc_t_k3') AS node \gset
RELEASE SAVEPOINT s2;
ROLLBACK;
SELECT lc_nfiles() - :files0 AS new_files, lc_node_file(:node);
BEGIN;
SAVEPOINT s1;
CREATE INDEX lc_t_k2 ON lc_t USING pmhash (k);
RELEASE SAVEPOINT s1;
COMMIT;
SELECT lc_nfiles() - :files0 AS new_files, lc_file('lc_t_k2');
SELECT pmhash_verify('lc_t_k2') = (SELECT count(k) FROM lc_t) AS verify_counts_rows;
DROP INDEX lc_t_k2;
-- a build that fails after its file was created leaves no file
CREATE TABLE lc_fail (id int, k int);
INSERT INTO lc_fail SELECT i, i FROM generate_series(1, 60000) i;
SET maintenance_work_mem = '1MB';
CREATE INDEX lc_fail_k ON lc_fail USING pmhash ((k / (id - 60000)));
RESET maintenance_work_mem;
SELECT lc_nfiles() - :files0 AS new_files;
DROP TABLE lc_fail;
-- DROP TABLE with two pmhash indexes removes both files
CREATE TABLE lc_two (id int, k int, t text);
INSERT INTO lc_two SELECT i, i % 10, 'x' || i FROM generate_series(1, 1000) i;
CREATE INDEX lc_two_k ON lc_two USING pmhash (k);
CREATE INDEX lc_two_t ON lc_two USING pmhash (t);
SELECT pg_relation_filenode('lc_two_k') AS node1, pg_relation_filenode('lc_two_t') AS node2 \gset
SELECT lc_nfiles() - :files0 AS new_files, lc_node_file(:node1), lc_node_file(:node2);
DROP TABLE lc_two;
SELECT lc_nfiles() - :files0 AS new_files, lc_node_file(:node1), lc_node_file(:node2);

--
-- TRUNCATE: a new file replaces the old one
--
SELECT lc_nfiles() AS files0 \gset
SELECT pg_relation_filenode('lc_t_k') AS node \gset
-- rolled back: the old file and the entries stay
BEGIN;
TRUNCATE lc_t;
SELECT lc_nfiles() - :files0 AS new_files, lc_file('lc_t_k') AS new_file, lc_node_file(:node) AS old_file;
ROLLBACK;
SELECT lc_nfiles() - :files0 AS new_files, lc_node_file(:node) AS old_file;
SELECT lc_check('lc_t', 'k', 'lc_t_k', '{3,96}');
-- committed
TRUNCATE lc_t;
SELECT lc_nfiles() - :files0 AS new_files, lc_file('lc_t_k') AS new_file, lc_node_file(:node) AS old_file;
SELECT entries, pmhash_verify('lc_t_k') AS verified FROM pmhash_stats('lc_t_k');
SELECT lc_check('lc_t', 'k', 'lc_t_k', '{1,2}');
INSERT INTO lc_t SELECT i, i % 89, 'Val' || (i % 40) FROM generate_series(1, 1500) i;
SELECT lc_check('lc_t', 'k', 'lc_t_k', '{0,1,88,89}');
SELECT lc_check('lc_t', 't', 'lc_t_t', '{Val0,Val39,Val40}');
SELECT pmhash_verify('lc_t_k') = (SELECT count(k) FROM lc_t) AS verify_counts_rows;
-- TRUNCATE of a table created in the same transaction (storage truncated
-- in place, the index rebuilt under the same relfilenode)
BEGIN;
CREATE TABLE lc_new (id int, k int);
INSERT INTO lc_new SELECT i, i % 7 FROM generate_series(1, 1000) i;
CREATE INDEX lc_new_k ON lc_new USING pmhash (k);
TRUNCATE lc_new;
INSERT INTO lc_new SELECT i, i % 11 FROM generate_series(1, 500) i;
COMMIT;
SELECT lc_nfiles() - :files0 AS new_files, lc_file('lc_new_k');
SELECT lc_check('lc_new', 'k', 'lc_new_k', '{0,6,7,10,11}');
SELECT pmhash_verify('lc_new_k');
DROP TABLE lc_new;
SELECT lc_nfiles() - :files0 AS new_files;

--
-- REINDEX, VACUUM FULL and CLUSTER build a new file and remove the old
--
-- the old relfilenode's file is gone, the new one's exists, the file count
-- is unchanged and the index agrees with a seqscan
CREATE FUNCTION lc_rebuilt(idx regclass, old_node oid, old_files bigint) RETURNS text
LANGUAGE sql AS $$
  SELECT format('changed: %s, old: %s, new: %s, files: %s, verified: %s',
                pg_relation_filenode(idx) <> old_node, lc_node_file(old_node), lc_file(idx),
                lc_nfiles() - old_files,
                pmhash_verify(idx) = (SELECT count(k) FROM lc_t))
$$;
SELECT pg_relation_filenode('lc_t_k') AS node \gset
REINDEX INDEX lc_t_k;
SELECT lc_rebuilt('lc_t_k', :node, :files0);
SELECT pg_relation_filenode('lc_t_k') AS node \gset
REINDEX TABLE lc_t;
SELECT lc_rebuilt('lc_t_k', :node, :files0);
SELECT pg_relation_filenode('lc_t_k') AS node \gset
VACUUM FULL lc_t;
SELECT lc_rebuilt('lc_t_k', :node, :files0);
SELECT lc_check('lc_t', 'k', 'lc_t_k', '{0,1,88}');
-- CLUSTER on a btree index of the table rebuilds the pmhash index
CREATE INDEX lc_t_id ON lc_t USING btree (id);
SELECT pg_relation_filenode('lc_t_k') AS node \gset
CLUSTER lc_t USING lc_t_id;
SELECT lc_rebuilt('lc_t_k', :node, :files0);
SELECT lc_check('lc_t', 'k', 'lc_t_k', '{0,1,88}');
-- CLUSTER on the pmhash index fails and changes nothing
SELECT pg_relation_filenode('lc_t_k') AS node \gset
CLUSTER lc_t USING lc_t_k;
SELECT pg_relation_filenode('lc_t_k') = :node AS same_node, lc_nfiles() - :files0 AS new_files;
DROP INDEX lc_t_id;
-- REINDEX CONCURRENTLY swaps in a new file and removes the old one
SELECT pg_relation_filenode('lc_t_k') AS node \gset
REINDEX INDEX CONCURRENTLY lc_t_k;
SELECT lc_rebuilt('lc_t_k', :node, :files0);
SELECT lc_check('lc_t', 'k', 'lc_t_k', '{0,1,88}');
-- CREATE INDEX CONCURRENTLY, then DROP INDEX CONCURRENTLY
CREATE INDEX CONCURRENTLY lc_t_k_cc ON lc_t USING pmhash (k);
SELECT lc_nfiles() - :files0 AS new_files, lc_file('lc_t_k_cc'),
       (SELECT indisvalid FROM pg_index WHERE indexrelid = 'lc_t_k_cc'::regclass);
SELECT lc_check('lc_t', 'k', 'lc_t_k_cc', '{0,1,88}');
SELECT pmhash_verify('lc_t_k_cc') = (SELECT count(k) FROM lc_t) AS verify_counts_rows;
SELECT pg_relation_filenode('lc_t_k_cc') AS node \gset
DROP INDEX CONCURRENTLY lc_t_k_cc;
SELECT lc_nfiles() - :files0 AS new_files, lc_node_file(:node);
-- the shards reloption takes effect at the next build
SELECT shards FROM pmhash_stats('lc_t_k');
ALTER INDEX lc_t_k SET (shards = 64);
SELECT shards AS before_reindex FROM pmhash_stats('lc_t_k');
REINDEX INDEX lc_t_k;
SELECT shards AS after_reindex FROM pmhash_stats('lc_t_k');
SELECT lc_check('lc_t', 'k', 'lc_t_k', '{0,1,88}');
ALTER INDEX lc_t_k RESET (shards);
REINDEX INDEX lc_t_k;
SELECT shards AS after_reset FROM pmhash_stats('lc_t_k');
SELECT lc_nfiles() - :files0 AS new_files;

--
-- Index shapes: partial, expression, partitioned, temporary, unlogged
--
-- partial index: used only when the query implies its predicate
DROP INDEX lc_t_k;
CREATE INDEX lc_t_part ON lc_t USING pmhash (k) WHERE id > 700;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM lc_t WHERE k = 5 AND id > 1000;
SELECT lc_plan('SELECT * FROM lc_t WHERE k = 5 AND id > 500');
RESET enable_seqscan;
SELECT lc_check('lc_t', 'k', 'lc_t_part', '{0,5,88,89}', 'id > 700');
SELECT pmhash_verify('lc_t_part') = (SELECT count(k) FROM lc_t WHERE id > 700) AS verify_counts_rows;
-- expression index
CREATE INDEX lc_t_lower ON lc_t USING pmhash (lower(t));
SELECT lc_check('lc_t', 'lower(t)', 'lc_t_lower', '{val0,val39,Val1,val40}');
SELECT pmhash_verify('lc_t_lower') = (SELECT count(t) FROM lc_t) AS verify_counts_rows;
SELECT lc_nfiles() - :files0 AS new_files;
-- partitioned table: one file per partition, none for the parent index
CREATE TABLE lc_p (id int, k int) PARTITION BY RANGE (id);
CREATE TABLE lc_p1 PARTITION OF lc_p FOR VALUES FROM (0) TO (1000);
CREATE TABLE lc_p2 PARTITION OF lc_p FOR VALUES FROM (1000) TO (2000);
CREATE TABLE lc_p3 PARTITION OF lc_p FOR VALUES FROM (2000) TO (3000);
INSERT INTO lc_p SELECT i, i % 37 FROM generate_series(0, 2999) i;
SELECT lc_nfiles() AS files0 \gset
CREATE INDEX lc_p_k ON lc_p USING pmhash (k);
SELECT lc_nfiles() - :files0 AS new_files;
SELECT c.relname, i.indexrelid::regclass AS index, lc_file(i.indexrelid),
       pmhash_verify(i.indexrelid) = (SELECT count(*) FROM lc_p WHERE tableoid = c.oid) AS verified
FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid
JOIN pg_index i ON i.indrelid = c.oid
WHERE h.inhparent = 'lc_p'::regclass ORDER BY 1;
SET enable_seqscan = off; SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM lc_p WHERE k = 3;
RESET enable_seqscan; RESET enable_bitmapscan;
SELECT lc_check('lc_p', 'k', 'lc_p[0-9]_k_idx', '{0,3,36,37}');
-- a detached partition keeps its index and file; attaching a table
-- without one builds one
ALTER TABLE lc_p DETACH PARTITION lc_p3;
SELECT lc_nfiles() - :files0 AS new_files, lc_file('lc_p3_k_idx');
SELECT lc_check('lc_p3', 'k', 'lc_p3_k_idx', '{0,3}');
CREATE TABLE lc_p4 (id int, k int);
INSERT INTO lc_p4 SELECT i, i % 37 FROM generate_series(3000, 3999) i;
ALTER TABLE lc_p ATTACH PARTITION lc_p4 FOR VALUES FROM (3000) TO (4000);
ALTER TABLE lc_p ATTACH PARTITION lc_p3 FOR VALUES FROM (2000) TO (3000);
SELECT lc_nfiles() - :files0 AS new_files, lc_file('lc_p4_k_idx'),
       pmhash_verify('lc_p4_k_idx');
SELECT lc_check('lc_p', 'k', 'lc_p[0-9]_k_idx', '{0,3,36,37}');
SELECT count(*) FROM pg_inherits WHERE inhparent = 'lc_p_k'::regclass;
DROP TABLE lc_p;
SELECT lc_nfiles() - :files0 AS new_files;
-- temporary table: a t-prefixed file, removed when the table is dropped,
-- truncated or dropped at commit
CREATE TEMP TABLE lc_temp (id int, k int);
INSERT INTO lc_temp SELECT i, i % 13 FROM generate_series(1, 2000) i;
CREATE INDEX lc_temp_k ON lc_temp USING pmhash (k);
SELECT lc_nfiles() - :files0 AS new_files, lc_file('lc_temp_k');
SELECT lc_check('lc_temp', 'k', 'lc_temp_k', '{0,12,13}');
SELECT pmhash_verify('lc_temp_k');
SELECT pg_relation_filenode('lc_temp_k') AS node \gset
TRUNCATE lc_temp;
SELECT lc_nfiles() - :files0 AS new_files, lc_node_file(:node) AS old_file, lc_file('lc_temp_k');
INSERT INTO lc_temp SELECT i, i % 5 FROM generate_series(1, 300) i;
SELECT lc_check('lc_temp', 'k', 'lc_temp_k', '{0,4,5}');
SELECT pg_relation_filenode('lc_temp_k') AS node \gset
DROP TABLE lc_temp;
SELECT lc_nfiles() - :files0 AS new_files, lc_node_file(:node);
BEGIN;
CREATE TEMP TABLE lc_temp2 (id int, k int) ON COMMIT DROP;
INSERT INTO lc_temp2 SELECT i, i FROM generate_series(1, 100) i;
CREATE INDEX lc_temp2_k ON lc_temp2 USING pmhash (k);
SELECT pg_relation_filenode('lc_temp2_k') AS node \gset
SELECT lc_node_file(:node) AS inside_transaction;
COMMIT;
SELECT lc_nfiles() - :files0 AS new_files, lc_node_file(:node);
-- ON COMMIT DELETE ROWS empties the index in place at every commit
CREATE TEMP TABLE lc_temp5 (id int, k int) ON COMMIT DELETE ROWS;
CREATE INDEX lc_temp5_k ON lc_temp5 USING pmhash (k);
BEGIN;
INSERT INTO lc_temp5 SELECT i, i % 10 FROM generate_series(1, 1000) i;
SELECT lc_check('lc_temp5', 'k', 'lc_temp5_k', '{0,3,10}');
COMMIT;
SELECT lc_file('lc_temp5_k'), pmhash_verify('lc_temp5_k');
BEGIN;
INSERT INTO lc_temp5 SELECT i, i % 7 FROM generate_series(1, 700) i;
SELECT lc_check('lc_temp5', 'k', 'lc_temp5_k', '{0,3,7}');
COMMIT;
DROP TABLE lc_temp5;
SELECT lc_nfiles() - :files0 AS new_files;
-- a temporary index left at the end of the session is removed with it
CREATE TEMP TABLE lc_temp3 (id int, k int);
CREATE INDEX lc_temp3_k ON lc_temp3 USING pmhash (k);
SELECT pg_relation_filenode('lc_temp3_k') AS node \gset
SELECT lc_node_file(:node) AS before_disconnect;
\c
SELECT lc_wait_gone(:node, 30) AS after_disconnect;
-- unlogged table
CREATE UNLOGGED TABLE lc_unl (id int, k int);
INSERT INTO lc_unl SELECT i, i % 17 FROM generate_series(1, 2000) i;
CREATE INDEX lc_unl_k ON lc_unl USING pmhash (k);
SELECT lc_nfiles() - :files0 AS new_files, lc_file('lc_unl_k');
SELECT lc_check('lc_unl', 'k', 'lc_unl_k', '{0,16,17}');
INSERT INTO lc_unl SELECT i, i % 19 FROM generate_series(2001, 2300) i;
SELECT lc_check('lc_unl', 'k', 'lc_unl_k', '{0,18,19}');
SELECT pmhash_verify('lc_unl_k') = (SELECT count(k) FROM lc_unl) AS verify_counts_rows;

--
-- VACUUM and statistics
--
CREATE TABLE lc_v (id int, k int) WITH (autovacuum_enabled = off);
INSERT INTO lc_v SELECT i, i % 100 FROM generate_series(1, 10000) i;
CREATE INDEX lc_v_k ON lc_v USING pmhash (k);
-- index scans move the pg_stat_user_indexes counters
SET enable_seqscan = off; SET enable_bitmapscan = off;
SELECT count(*) FROM lc_v WHERE k = 1;
SELECT count(*) FROM lc_v WHERE k = 2;
SET enable_indexscan = off; SET enable_bitmapscan = on;
SELECT count(*) FROM lc_v WHERE k = 3;
RESET enable_seqscan; RESET enable_bitmapscan; RESET enable_indexscan;
SELECT pg_stat_force_next_flush();
SELECT idx_scan, idx_tup_read >= 300 AS tup_read FROM pg_stat_user_indexes
WHERE indexrelid = 'lc_v_k'::regclass;
-- after a mass DELETE, VACUUM removes the entries and frees file space
SELECT entries, free_bytes AS free0, segments AS segments0 FROM pmhash_stats('lc_v_k') \gset
DELETE FROM lc_v WHERE k >= 10;
VACUUM lc_v;
SELECT entries, free_bytes > :free0 AS more_free, segments <= :segments0 AS fewer_segments
FROM pmhash_stats('lc_v_k');
SELECT pmhash_verify('lc_v_k');
SELECT lc_check('lc_v', 'k', 'lc_v_k', '{1,9,10,99}');
-- deleting every row leaves an empty index that still works
DELETE FROM lc_v;
VACUUM lc_v;
SELECT entries, segments FROM pmhash_stats('lc_v_k');
INSERT INTO lc_v SELECT i, i % 3 FROM generate_series(1, 30) i;
SELECT lc_check('lc_v', 'k', 'lc_v_k', '{0,1,2,3}');
SELECT pmhash_verify('lc_v_k');
DROP TABLE lc_v;

--
-- DROP DATABASE leaves no file of that database
--
SET client_min_messages = warning;
DROP DATABASE IF EXISTS pmhash_lifecycle_db;
RESET client_min_messages;
CREATE DATABASE pmhash_lifecycle_db;
SELECT oid AS db_oid FROM pg_database WHERE datname = 'pmhash_lifecycle_db' \gset
\c pmhash_lifecycle_db
CREATE EXTENSION pmhash;
CREATE TABLE lc_db (id int, k int);
INSERT INTO lc_db SELECT i, i % 10 FROM generate_series(1, 1000) i;
CREATE INDEX lc_db_k ON lc_db USING pmhash (k);
CREATE INDEX lc_db_id ON lc_db USING pmhash (id);
SELECT count(*) FROM lc_db WHERE k = 3;
\c :regress_db
SELECT lc_nfiles(:db_oid) AS files_of_db;
DROP DATABASE pmhash_lifecycle_db;
SELECT lc_nfiles(:db_oid) AS files_of_db;

--
-- DROP EXTENSION
--
-- refused while pmhash indexes exist
\set VERBOSITY terse
DROP EXTENSION pmhash;
\set VERBOSITY default
-- CASCADE drops every pmhash index (permanent, temporary, unlogged,
-- partial, expression) and leaves no file
CREATE TEMP TABLE lc_temp4 (id int, k int);
CREATE INDEX lc_temp4_k ON lc_temp4 USING pmhash (k);
SELECT count(*) > 0 AS has_files FROM lc_files();
SET client_min_messages = warning;
DROP EXTENSION pmhash CASCADE;
RESET client_min_messages;
SELECT lc_nfiles() AS files_left;
SELECT count(*) AS pmhash_indexes_left FROM pg_class WHERE relkind IN ('i', 'I')
  AND relname IN ('lc_t_part', 'lc_t_lower', 'lc_t_t', 'lc_unl_k', 'lc_2pc_k', 'lc_temp4_k');
SELECT count(*) AS tables_left FROM pg_class
  WHERE relname IN ('lc_t', 'lc_unl', 'lc_2pc', 'lc_temp4');
-- and the extension can be created again
CREATE EXTENSION pmhash;
CREATE INDEX lc_t_k ON lc_t USING pmhash (k);
SELECT lc_nfiles() AS files, lc_file('lc_t_k');
SELECT lc_check('lc_t', 'k', 'lc_t_k', '{0,1,88}');

-- clean up
DROP TABLE lc_t, lc_unl, lc_2pc, lc_temp4;
SELECT lc_nfiles() AS files_left;
DROP FUNCTION lc_rebuilt(regclass, oid, bigint);
DROP FUNCTION lc_wait_gone(oid, int);
DROP FUNCTION lc_check(regclass, text, text, text[], text);
DROP FUNCTION lc_file(regclass);
DROP FUNCTION lc_node_file(oid);
DROP FUNCTION lc_nfiles(oid);
DROP FUNCTION lc_files(oid);
DROP FUNCTION lc_plan(text);
