-- CREATE INDEX and DROP INDEX in prepared transactions: the file of an index
-- whose creation is committed stays and the index works; one rolled back
-- leaves no index, and its file goes; a drop committed leaves the table
-- working, and its file goes.  Needs max_prepared_transactions above 0;
-- PostgreSQL's default is 0, where every PREPARE TRANSACTION fails:
-- expected/prepared_1.out is that output.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pmhash;
RESET client_min_messages;

-- whether pmhash.directory holds the file of a relfilenode of this database
CREATE FUNCTION pt_file(node oid) RETURNS boolean LANGUAGE sql AS $$
  SELECT EXISTS (SELECT FROM pg_ls_dir(current_setting('pmhash.directory'), true, false) f
                 JOIN pg_database d ON f = d.oid || '_' || node || '.pmh'
                 WHERE d.datname = current_database())
$$;
-- wait up to max_wait seconds until that file is gone; whether it is
CREATE FUNCTION pt_file_gone(node oid, max_wait int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. max_wait * 10 LOOP
    EXIT WHEN NOT pt_file(node);
    PERFORM pg_sleep(0.1);
  END LOOP;
  RETURN NOT pt_file(node);
END $$;
-- the rows of key 3 by index scan, and by a seqscan
CREATE FUNCTION pt_key3() RETURNS text LANGUAGE plpgsql AS $$
DECLARE by_index bigint; by_seq bigint;
BEGIN
  SET LOCAL enable_seqscan = off;
  SET LOCAL enable_bitmapscan = off;
  SELECT count(*) INTO by_index FROM pt WHERE k = 3;
  SET LOCAL enable_seqscan = on;
  SET LOCAL enable_indexscan = off;
  SELECT count(*) INTO by_seq FROM pt WHERE k = 3;
  RETURN by_index || ' by index, ' || by_seq || ' by seqscan';
END $$;

-- set below; 0 where prepared transactions are disabled and no index exists
\set node_created 0
\set node_dropped 0

CREATE TABLE pt (id int, k int);
INSERT INTO pt SELECT i, i % 10 FROM generate_series(1, 1000) i;
-- CREATE INDEX prepared, then committed: the file stays and the index works
BEGIN;
CREATE INDEX pt_k ON pt USING pmhash (k);
PREPARE TRANSACTION 'pt_create_index';
COMMIT PREPARED 'pt_create_index';
SELECT pt_file(pg_relation_filenode('pt_k')) AS has_file, pt_key3() AS key_3;
-- CREATE INDEX prepared, then rolled back: no index is left
BEGIN;
CREATE INDEX pt_id ON pt USING pmhash (id);
SELECT pg_relation_filenode('pt_id') AS node_created \gset
PREPARE TRANSACTION 'pt_create_index';
ROLLBACK PREPARED 'pt_create_index';
SELECT count(*) AS index_left FROM pg_class WHERE relname = 'pt_id';
-- DROP INDEX prepared, then committed: the index is gone, the table works
SELECT pg_relation_filenode('pt_k') AS node_dropped \gset
BEGIN;
DROP INDEX pt_k;
PREPARE TRANSACTION 'pt_drop_index';
SELECT pt_file(:node_dropped) AS file_while_prepared;
COMMIT PREPARED 'pt_drop_index';
SELECT count(*) AS index_left FROM pg_class WHERE relname = 'pt_k';
SELECT count(*) FROM pt WHERE k = 3;
CREATE INDEX pt_k ON pt USING pmhash (k);
SELECT pt_key3() AS key_3;
-- the files of the two indexes that are gone are orphans: an orphan sweep
-- removes them once their main forks are gone (at a checkpoint); DROP
-- DATABASE's commit runs one, the file cleaner one every minute
CHECKPOINT;
SET client_min_messages = warning;
DROP DATABASE IF EXISTS pmhash_prepared_sweep;
RESET client_min_messages;
CREATE DATABASE pmhash_prepared_sweep;
DROP DATABASE pmhash_prepared_sweep;
SELECT pt_file_gone(:node_created, 70) AS created_file_gone,
       pt_file_gone(:node_dropped, 70) AS dropped_file_gone;

DROP TABLE pt;
DROP FUNCTION pt_file(oid), pt_file_gone(oid, int), pt_key3();
