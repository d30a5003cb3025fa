-- test/pgtap/files.sql: the index file's life across commits, so not run in
-- one transaction (it drops what it creates): the file exists while the
-- index does, has the size pmhash_stats reports, is replaced by REINDEX,
-- removed by DROP and by the rollback of CREATE INDEX; and a temporary
-- table's pmhash index keeps working after the transaction that built it.
SELECT plan(12);
\ir helpers.psql

-- Whether a file exists (paths relative to the data directory work too).
CREATE FUNCTION pg_temp.file_exists(path text) RETURNS boolean LANGUAGE sql AS $$
	SELECT (pg_stat_file(path, true)).modification IS NOT NULL
$$;

CREATE TABLE pmhash_tap_fl (id int, k int8);
INSERT INTO pmhash_tap_fl SELECT i, i % 100 FROM generate_series(1, 1000) i;
CREATE INDEX pmhash_tap_fl_k ON pmhash_tap_fl USING pmhash (k);
SELECT path AS first_path, file_bytes FROM pmhash_stats('pmhash_tap_fl_k') \gset

SELECT ok(pg_temp.file_exists(:'first_path'), 'the file of a committed index exists');
SELECT is((pg_stat_file(:'first_path', true)).size, :'file_bytes'::bigint,
	'its size is the file_bytes pmhash_stats reports');

REINDEX INDEX pmhash_tap_fl_k;
SELECT path AS second_path FROM pmhash_stats('pmhash_tap_fl_k') \gset
SELECT ok(NOT pg_temp.file_exists(:'first_path'), 'REINDEX removes the old file');
SELECT ok(pg_temp.file_exists(:'second_path'), 'REINDEX creates the new file');

BEGIN;
CREATE INDEX pmhash_tap_fl_k2 ON pmhash_tap_fl USING pmhash (k);
SELECT path AS aborted_path FROM pmhash_stats('pmhash_tap_fl_k2') \gset
ROLLBACK;
SELECT ok(NOT pg_temp.file_exists(:'aborted_path'), 'the rollback of CREATE INDEX removes its file');

DROP TABLE pmhash_tap_fl;
SELECT ok(NOT pg_temp.file_exists(:'second_path'), 'DROP TABLE removes the file of its index');

-- a temporary table's index, built in one transaction and used in later ones
CREATE TEMP TABLE pmhash_tap_tmp (id int, k int8);
INSERT INTO pmhash_tap_tmp SELECT i, i % 100 FROM generate_series(1, 1000) i;
BEGIN;
CREATE INDEX pmhash_tap_tmp_k ON pmhash_tap_tmp USING pmhash (k);
SELECT path AS temp_path FROM pmhash_stats('pmhash_tap_tmp_k') \gset
COMMIT;
SELECT ok(pg_temp.file_exists(:'temp_path'),
	'the file of a temporary index still exists after its creating transaction commits');
SELECT is(pg_temp.outcome($$SELECT pmhash_verify('pmhash_tap_tmp_k')$$), '1000',
	'pmhash_verify works on the temporary index in a later transaction');
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT is(pg_temp.indexes_used('SELECT id FROM pmhash_tap_tmp WHERE k = 5'), 'pmhash_tap_tmp_k',
	'the temporary index is used for k = const');
SELECT is(pg_temp.outcome('SELECT count(*) FROM pmhash_tap_tmp WHERE k = 5'), '10',
	'an index scan of the temporary index in a later transaction finds the rows');
SELECT is(pg_temp.outcome('INSERT INTO pmhash_tap_tmp VALUES (1001, 5) RETURNING id'), '1001',
	'inserting into the temporary table in a later transaction works');
RESET enable_seqscan;
RESET enable_bitmapscan;
DROP TABLE pmhash_tap_tmp;
SELECT ok(NOT pg_temp.file_exists(:'temp_path'), 'DROP TABLE removes the temporary index''s file');

SELECT * FROM finish();
