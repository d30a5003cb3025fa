-- test/pgtap/objects.sql: the objects the pmhash extension installs: its
-- functions and their signatures, the access method, the operator classes
-- and families (compared with core's hash ones), and its GUCs.
BEGIN;
SELECT plan(28);

SELECT has_extension('pmhash', 'extension pmhash is installed');
SELECT is((SELECT extversion FROM pg_extension WHERE extname = 'pmhash'), '0.3',
	'extension version is 0.3, the control file''s default');
SELECT is((SELECT count(*) FROM pg_depend
		   WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
			 AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pmhash')),
		  73::bigint,
		  'extension owns 73 objects: access method, 4 functions, 32 families, 36 classes');

-- functions
SELECT has_function('public', 'pmhash_handler', ARRAY['internal'],
	'pmhash_handler(internal) exists');
SELECT function_returns('public', 'pmhash_handler', ARRAY['internal'], 'index_am_handler',
	'pmhash_handler returns index_am_handler');
SELECT has_function('public', 'pmhash_stats', ARRAY['regclass'],
	'pmhash_stats(regclass) exists');
SELECT function_returns('public', 'pmhash_stats', ARRAY['regclass'], 'record',
	'pmhash_stats returns a record (one row, not a set)');
SELECT is_strict('public', 'pmhash_stats', ARRAY['regclass'], 'pmhash_stats is strict');
SELECT has_function('public', 'pmhash_shards', ARRAY['regclass'],
	'pmhash_shards(regclass) exists');
SELECT function_returns('public', 'pmhash_shards', ARRAY['regclass'], 'setof record',
	'pmhash_shards returns a set of records, one per shard');
SELECT is_strict('public', 'pmhash_shards', ARRAY['regclass'], 'pmhash_shards is strict');
SELECT has_function('public', 'pmhash_verify', ARRAY['regclass'],
	'pmhash_verify(regclass) exists');
SELECT function_returns('public', 'pmhash_verify', ARRAY['regclass'], 'bigint',
	'pmhash_verify returns bigint');
SELECT is_strict('public', 'pmhash_verify', ARRAY['regclass'], 'pmhash_verify is strict');
SELECT is(pmhash_verify(NULL), NULL, 'pmhash_verify(NULL) is NULL');
SELECT is((pmhash_stats(NULL)).entries, NULL, 'pmhash_stats(NULL) is NULL');

-- access method
SELECT results_eq(
	$$SELECT amname::text COLLATE "default", amtype::text, amhandler::regproc::text
	  FROM pg_am WHERE amname = 'pmhash'$$,
	$$VALUES ('pmhash', 'i', 'pmhash_handler')$$,
	'access method pmhash exists, is an index AM (amtype i) with handler pmhash_handler');

-- operator classes: one default class per type, as in core's hash AM
SELECT is((SELECT count(*) FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
		   WHERE a.amname = 'pmhash'), 36::bigint, '36 pmhash operator classes');
SELECT is((SELECT count(*) FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
		   WHERE a.amname = 'pmhash' AND c.opcdefault), 36::bigint,
	'all 36 pmhash operator classes are default for their type');
SELECT bag_eq(
	$$SELECT c.opcname::text, c.opcintype::regtype::text, f.opfname::text, c.opcdefault
	  FROM pg_opclass c JOIN pg_opfamily f ON f.oid = c.opcfamily JOIN pg_am a ON a.oid = c.opcmethod
	  WHERE a.amname = 'pmhash'$$,
	$$SELECT c.opcname::text, c.opcintype::regtype::text, f.opfname::text, c.opcdefault
	  FROM pg_opclass c JOIN pg_opfamily f ON f.oid = c.opcfamily JOIN pg_am a ON a.oid = c.opcmethod
	  WHERE a.amname = 'hash' AND c.opcdefault$$,
	'pmhash classes (name, input type, family) are exactly core''s default hash classes');

-- operator families: names, operators and support functions as in core
SELECT set_eq(
	$$SELECT f.opfname::text FROM pg_opfamily f JOIN pg_am a ON a.oid = f.opfmethod
	  WHERE a.amname = 'pmhash'$$,
	$$SELECT f.opfname::text FROM pg_opfamily f JOIN pg_am a ON a.oid = f.opfmethod
	  WHERE a.amname = 'hash'
		AND EXISTS (SELECT FROM pg_opclass c WHERE c.opcfamily = f.oid AND c.opcdefault)$$,
	'pmhash family names are those of core''s hash families with a default class');
SELECT bag_eq(
	$$SELECT f.opfname::text, o.amopopr::regoperator::text, o.amopstrategy, o.amoppurpose::text
	  FROM pg_amop o JOIN pg_opfamily f ON f.oid = o.amopfamily JOIN pg_am a ON a.oid = f.opfmethod
	  WHERE a.amname = 'pmhash'$$,
	$$SELECT f.opfname::text, o.amopopr::regoperator::text, 3::int2, o.amoppurpose::text
	  FROM pg_amop o JOIN pg_opfamily f ON f.oid = o.amopfamily JOIN pg_am a ON a.oid = f.opfmethod
	  WHERE a.amname = 'hash'
		AND EXISTS (SELECT FROM pg_opclass c WHERE c.opcfamily = f.oid AND c.opcdefault)$$,
	'pmhash families hold the same operators as core''s, cross-type ones included, as number 3 (btree''s equality)');
SELECT bag_eq(
	$$SELECT f.opfname::text, p.amproclefttype::regtype::text, p.amprocnum, p.amproc::regprocedure::text
	  FROM pg_amproc p JOIN pg_opfamily f ON f.oid = p.amprocfamily JOIN pg_am a ON a.oid = f.opfmethod
	  WHERE a.amname = 'pmhash'$$,
	$$SELECT f.opfname::text, p.amproclefttype::regtype::text, p.amprocnum,
		coalesce(r.earlier, p.amproc::regprocedure::text)
	  FROM pg_amproc p JOIN pg_opfamily f ON f.oid = p.amprocfamily JOIN pg_am a ON a.oid = f.opfmethod
	  -- 18 gave seven of core's families hash functions of their own types,
	  -- which hash as the functions that pmhash's families (and 15 to 17) use
	  LEFT JOIN (VALUES ('hashbool(boolean)', 'hashchar("char")'),
		('hashbytea(bytea)', 'hashvarlena(internal)'), ('hashcid(cid)', 'hashint4(integer)'),
		('hashdate(date)', 'hashint4(integer)'),
		('timestamptz_hash(timestamp with time zone)', 'timestamp_hash(timestamp without time zone)'),
		('hashxid(xid)', 'hashint4(integer)'), ('hashxid8(xid8)', 'hashint8(bigint)'))
		r(core18, earlier) ON r.core18 = p.amproc::regprocedure::text
	  WHERE a.amname = 'hash' AND p.amprocnum = 1
		AND EXISTS (SELECT FROM pg_opclass c WHERE c.opcfamily = f.oid AND c.opcdefault)$$,
	'pmhash support function 1 is core''s standard hash function in every family (before 18''s seven new ones)');
SELECT is_empty(
	$$SELECT c.opcname FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
	  WHERE a.amname = 'pmhash' AND NOT amvalidate(c.oid)$$,
	'amvalidate accepts every pmhash operator class');

-- GUCs
SELECT results_eq(
	$$SELECT name, context, vartype FROM pg_settings WHERE name LIKE 'pmhash.%' ORDER BY name$$,
	$$VALUES ('pmhash.directory', 'postmaster', 'string'),
			 ('pmhash.max_indexes', 'postmaster', 'integer'),
			 ('pmhash.max_shards', 'postmaster', 'integer'),
			 ('pmhash.os_crash_shadows', 'postmaster', 'bool'),
			 ('pmhash.rebuild_pause_step', 'superuser', 'integer'),
			 ('pmhash.shard_locks', 'postmaster', 'integer'),
			 ('pmhash.split_pause_step', 'superuser', 'integer'),
			 ('pmhash.sync_interval', 'sighup', 'integer')$$,
	'the eight pmhash GUCs exist; only pmhash.sync_interval and the test-only pmhash.split_pause_step and pmhash.rebuild_pause_step (a superuser''s session) can change without a restart');
SELECT throws_ok('SET pmhash.sync_interval = 50', '55P02', NULL,
	'pmhash.sync_interval cannot be changed in a session (configuration file only)');
SELECT throws_ok('SET pmhash.max_indexes = 64', '55P02', NULL,
	'pmhash.max_indexes cannot be changed in a session');
SELECT throws_ok('SET pmhash.directory = ''/tmp''', '55P02', NULL,
	'pmhash.directory cannot be changed in a session');

SELECT * FROM finish();
ROLLBACK;
