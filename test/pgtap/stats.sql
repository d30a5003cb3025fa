-- test/pgtap/stats.sql: pmhash_stats, pmhash_shards and pmhash_verify on
-- indexes with automatic and explicit shard counts, an empty one and an
-- all-NULL one: result columns, entry counts, shard counts, bounds of the
-- figures, the per-shard rows against the totals, the file path, and the
-- "shards" reloption's validation.
BEGIN;
SELECT plan(30);

CREATE TABLE st (id int, k int8);
INSERT INTO st
SELECT i, CASE WHEN i % 11 = 0 THEN NULL WHEN i % 3 = 0 THEN 42 ELSE i % 700 END
FROM generate_series(1, 3000) i;
CREATE TABLE st_empty (k int8);
CREATE TABLE st_nulls (k text);
INSERT INTO st_nulls SELECT NULL FROM generate_series(1, 100);

CREATE INDEX st_auto ON st USING pmhash (k);
CREATE INDEX st_one ON st USING pmhash (k) WITH (shards = 1);
CREATE INDEX st_eight ON st USING pmhash (k) WITH (shards = 8);
CREATE INDEX st_many ON st USING pmhash (k) WITH (shards = 1024);
CREATE INDEX st_zero ON st USING pmhash (k) WITH (shards = 0);
CREATE INDEX st_empty_k ON st_empty USING pmhash (k);
CREATE INDEX st_nulls_k ON st_nulls USING pmhash (k);

-- what each index should report: its non-null keys and the shards asked for
CREATE TEMP TABLE st_expect (idx regclass, nonnull bigint, shards int);
INSERT INTO st_expect VALUES
	('st_auto', (SELECT count(k) FROM st), NULL),
	('st_one', (SELECT count(k) FROM st), 1),
	('st_eight', (SELECT count(k) FROM st), 8),
	('st_many', (SELECT count(k) FROM st), 1024),
	('st_zero', (SELECT count(k) FROM st), NULL),
	('st_empty_k', 0, NULL),
	('st_nulls_k', 0, NULL);
CREATE TEMP VIEW st_stats AS
	SELECT e.idx::text AS idx, e.nonnull, e.shards AS asked, s.*
	FROM st_expect e, LATERAL pmhash_stats(e.idx) s;

-- the output columns of function f, in order: name and type
CREATE FUNCTION pg_temp.out_columns(f regprocedure, OUT name text, OUT type text)
RETURNS SETOF record LANGUAGE sql AS $$
	SELECT n COLLATE "default", t::regtype::text
	FROM pg_proc p,
		 unnest(p.proargnames, p.proallargtypes::oid[], p.proargmodes::text[])
			 WITH ORDINALITY AS a(n, t, m, i)
	WHERE p.oid = f AND m = 'o'
	ORDER BY i
$$;

-- result shape
SELECT results_eq(
	$$SELECT * FROM pg_temp.out_columns('pmhash_stats(regclass)')$$,
	$$VALUES ('path', 'text'), ('is_pmem', 'boolean'), ('file_bytes', 'bigint'),
			 ('entries', 'bigint'), ('shards', 'integer'), ('segments', 'bigint'),
			 ('buckets', 'bigint'), ('posting_blocks', 'bigint'), ('chains', 'bigint'),
			 ('fill', 'double precision'), ('avg_probe', 'double precision'),
			 ('max_probe', 'integer'), ('free_bytes', 'bigint'), ('overflow_buckets', 'bigint')$$,
	'pmhash_stats output columns have the documented names, types and order');
SELECT row_eq(
	$$SELECT pg_typeof(s.is_pmem)::text, pg_typeof(s.file_bytes)::text, pg_typeof(s.entries)::text,
			 pg_typeof(s.shards)::text, pg_typeof(s.fill)::text, pg_typeof(s.max_probe)::text,
			 s.entries, s.shards
	  FROM pmhash_stats('st_eight') s$$,
	ROW('boolean'::text, 'bigint'::text, 'bigint'::text, 'integer'::text,
		'double precision'::text, 'integer'::text, (SELECT count(k) FROM st), 8)::record,
	'a pmhash_stats row has the declared types and the expected entries and shards');
SELECT is((SELECT count(*) FROM st_stats), 7::bigint, 'pmhash_stats returns one row per index');

-- entries and verify count the non-null keys
SELECT results_eq(
	$$SELECT idx, entries FROM st_stats ORDER BY idx$$,
	$$SELECT idx, nonnull FROM st_stats ORDER BY idx$$,
	'entries equals the number of non-null keys, for every index');
SELECT results_eq(
	$$SELECT e.idx::text, pmhash_verify(e.idx) FROM st_expect e ORDER BY 1$$,
	$$SELECT idx, nonnull FROM st_stats ORDER BY idx$$,
	'pmhash_verify returns the number of non-null keys, for every index');

-- shards
SELECT is_empty(
	$$SELECT idx, shards FROM st_stats WHERE shards < 1 OR shards > 65536 OR (shards & (shards - 1)) <> 0$$,
	'shards is a power of two between 1 and 65536');
SELECT results_eq(
	$$SELECT idx, shards FROM st_stats WHERE asked IS NOT NULL ORDER BY idx$$,
	$$SELECT idx, asked FROM st_stats WHERE asked IS NOT NULL ORDER BY idx$$,
	'shards equals the reloption when one is given');
SELECT is((SELECT shards FROM st_stats WHERE idx = 'st_zero'),
		  (SELECT shards FROM st_stats WHERE idx = 'st_auto'),
		  'shards = 0 chooses the same count as no reloption');

-- bounds of the figures
SELECT is_empty($$SELECT idx, fill FROM st_stats WHERE NOT (fill BETWEEN 0 AND 1)$$,
	'fill is between 0 and 1');
SELECT is_empty($$SELECT idx, avg_probe FROM st_stats WHERE entries > 0 AND NOT (avg_probe >= 1)$$,
	'avg_probe >= 1 when the index has entries');
SELECT is_empty($$SELECT idx FROM st_stats WHERE entries > 0 AND max_probe < avg_probe$$,
	'max_probe >= avg_probe');
SELECT is_empty($$SELECT idx, free_bytes FROM st_stats WHERE free_bytes < 0 OR free_bytes > file_bytes$$,
	'free_bytes is between 0 and file_bytes');
SELECT is_empty($$SELECT idx, file_bytes FROM st_stats WHERE file_bytes < 4096$$,
	'file_bytes >= 4096');
SELECT is_empty(
	$$SELECT idx FROM st_stats
	  WHERE segments < 0 OR buckets < 0 OR posting_blocks < 0 OR chains < 0
		 OR overflow_buckets < 0 OR max_probe < 0$$,
	'no count is negative');
SELECT is_empty($$SELECT idx FROM st_stats WHERE entries > 0 AND (segments < 1 OR buckets < 1)$$,
	'an index with entries has segments and buckets');

-- pmhash_shards: one row per shard, numbered from 0, adding up to the totals
SELECT results_eq(
	$$SELECT * FROM pg_temp.out_columns('pmhash_shards(regclass)')$$,
	$$VALUES ('shard', 'integer'), ('entries', 'bigint'), ('buckets', 'bigint'),
			 ('posting_blocks', 'bigint'), ('segment_bytes', 'bigint')$$,
	'pmhash_shards output columns have the documented names, types and order');
CREATE TEMP VIEW st_shard_sums AS
	SELECT s.idx, s.shards, s.entries, s.buckets, s.posting_blocks, s.segments, h.*
	FROM st_stats s,
		 LATERAL (SELECT count(*) AS n, min(shard) AS lo, max(shard) AS hi, sum(entries) AS e,
						 sum(buckets) AS b, sum(posting_blocks) AS p,
						 count(*) FILTER (WHERE segment_bytes > 0) AS segs
				  FROM pmhash_shards(s.idx::regclass)) h;
SELECT is_empty(
	$$SELECT idx FROM st_shard_sums
	  WHERE (n, lo, hi, e, b, p, segs) IS DISTINCT FROM
			(shards::bigint, 0, shards - 1, entries::numeric, buckets::numeric,
			 posting_blocks::numeric, segments)$$,
	'pmhash_shards: a row per shard (0 .. shards - 1) whose entries, buckets, posting blocks and segments add up to pmhash_stats''');
SELECT is_empty(
	$$SELECT h.shard FROM pmhash_shards('st_eight') h
	  WHERE (h.segment_bytes = 0) <> (h.buckets = 0)
		 OR h.segment_bytes <> (1 + h.buckets + h.posting_blocks) * 256 * (h.buckets > 0)::int$$,
	'pmhash_shards: a segment''s bytes are its header, buckets and posting blocks of 256 bytes');
SELECT ok((SELECT sum(segment_bytes) FROM pmhash_shards('st_auto'))
		  <= (SELECT file_bytes - free_bytes FROM pmhash_stats('st_auto')),
	'pmhash_shards: the segments fit in the file''s used bytes');

-- the file: named after the database and relfilenode in pmhash.directory
SELECT results_eq(
	$$SELECT idx, path FROM st_stats ORDER BY idx$$,
	$$SELECT s.idx, format('%s/%s_%s.pmh', current_setting('pmhash.directory'), d.oid,
						   pg_relation_filenode(c.oid))
	  FROM st_stats s JOIN pg_class c ON c.oid = s.idx::regclass
		   JOIN pg_database d ON d.datname = current_database()
	  ORDER BY s.idx$$,
	'path is <pmhash.directory>/<database>_<relfilenode>.pmh');
SELECT is((SELECT count(DISTINCT path) FROM st_stats), 7::bigint, 'every index has its own file');

-- DML and REINDEX keep the counts right
INSERT INTO st SELECT i, 42 FROM generate_series(3001, 3500) i;
INSERT INTO st SELECT i, NULL FROM generate_series(3501, 3600) i;
SELECT results_eq(
	$$SELECT entries, pmhash_verify('st_eight') FROM pmhash_stats('st_eight')$$,
	$$SELECT count(k), count(k) FROM st$$,
	'entries and pmhash_verify follow inserted rows (NULLs not counted)');
CREATE TEMP TABLE st_before AS SELECT path FROM pmhash_stats('st_eight');
ALTER INDEX st_eight SET (shards = 2);
REINDEX INDEX st_eight;
SELECT results_eq(
	$$SELECT entries, shards, pmhash_verify('st_eight') FROM pmhash_stats('st_eight')$$,
	$$SELECT count(k), 2, count(k) FROM st$$,
	'REINDEX applies a changed shards reloption and keeps every entry');
SELECT isnt((SELECT path FROM pmhash_stats('st_eight')), (SELECT path FROM st_before),
	'REINDEX gives the index a new file');

-- the reloption's validation
SELECT throws_ok('CREATE INDEX ON st USING pmhash (k) WITH (shards = 3)', '22023',
	'value 3 out of bounds for option "shards"', 'shards = 3 (not a power of two) is rejected');
SELECT throws_ok('CREATE INDEX ON st USING pmhash (k) WITH (shards = 131072)', '22023',
	'value 131072 out of bounds for option "shards"', 'shards = 131072 is rejected');
SELECT throws_ok('CREATE INDEX ON st USING pmhash (k) WITH (shards = -1)', '22023',
	'value -1 out of bounds for option "shards"', 'shards = -1 is rejected');
SELECT throws_ok('ALTER INDEX st_one SET (shards = 6)', '22023',
	'value 6 out of bounds for option "shards"', 'ALTER INDEX SET (shards = 6) is rejected');
SELECT throws_ok('CREATE INDEX ON st USING pmhash (k) WITH (buckets = 50)', '22023',
	'unrecognized parameter "buckets"', 'unknown reloptions are rejected');
SELECT throws_ok('CREATE INDEX ON st USING pmhash (k) WITH (fillfactor = 5)', '22023',
	'value 5 out of bounds for option "fillfactor"', 'fillfactor = 5 is rejected');

SELECT * FROM finish();
ROLLBACK;
