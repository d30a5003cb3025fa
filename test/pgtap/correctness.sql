-- test/pgtap/correctness.sql: a pmhash index returns exactly what a
-- sequential scan returns: a few hundred int8 and text keys probed through
-- an index scan, a bitmap scan and a seqscan, with a heavily duplicated key,
-- NULL keys and probes, missing keys, = ANY, after DELETE/UPDATE/INSERT and
-- a rolled-back subtransaction, and with a case-insensitive collation.
BEGIN;
SELECT plan(20);

CREATE TABLE cr (id int, k int8, s text);
INSERT INTO cr
SELECT i,
	   CASE WHEN i % 13 = 0 THEN NULL WHEN i % 3 = 0 THEN 42 ELSE i % 400 END,
	   CASE WHEN i % 17 = 0 THEN NULL WHEN i % 4 = 0 THEN 'dup' ELSE 'key' || (i % 250) END
FROM generate_series(1, 4000) i;
CREATE INDEX cr_k ON cr USING pmhash (k);
CREATE INDEX cr_s ON cr USING pmhash (s);
ANALYZE cr;

\ir helpers.psql

-- Enable exactly one way of reading a table: 'index', 'bitmap' or 'seq';
-- NULL enables them all again (transaction-local settings).
CREATE FUNCTION pg_temp.only_scan(method text) RETURNS void LANGUAGE sql AS $$
	SELECT set_config('enable_indexscan', (method IS NULL OR method = 'index')::text, true),
		   set_config('enable_bitmapscan', (method IS NULL OR method = 'bitmap')::text, true),
		   set_config('enable_seqscan', (method IS NULL OR method = 'seq')::text, true)
$$;

-- A cursor over q, planned with only the given scan method enabled.
CREATE FUNCTION pg_temp.via(method text, q text) RETURNS refcursor LANGUAGE plpgsql AS $$
DECLARE
	c refcursor;
BEGIN
	PERFORM pg_temp.only_scan(method);
	OPEN c FOR EXECUTE q;
	PERFORM pg_temp.only_scan(NULL);
	RETURN c;
END $$;

-- The index scan nodes of q's plan with only one method enabled, as text.
CREATE FUNCTION pg_temp.plan_via(method text, q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	r text;
BEGIN
	PERFORM pg_temp.only_scan(method);
	SELECT coalesce(string_agg(node || ' ' || index, ', ' ORDER BY node, index), '')
		INTO r FROM pg_temp.scans(q) WHERE index IS NOT NULL;
	PERFORM pg_temp.only_scan(NULL);
	RETURN r;
END $$;

-- the probes: every key, missing keys and a NULL probe, joined to cr
\set probe_k 'SELECT p.v, cr.id FROM (SELECT v FROM generate_series(-5, 405) v UNION ALL SELECT NULL) p(v) JOIN cr ON cr.k = p.v ORDER BY 1, 2'
\set probe_s 'SELECT p.v, cr.id FROM (SELECT ''key'' || g FROM generate_series(-3, 260) g UNION ALL VALUES (''dup''), (NULL)) p(v) JOIN cr ON cr.s = p.v ORDER BY 1, 2'
\set probe_any 'SELECT id FROM cr WHERE k = ANY(ARRAY[42, 7, 399, 1000, NULL]::int8[]) ORDER BY id'

SELECT ok((SELECT count(*) FROM cr WHERE k = 42) > 1000 AND (SELECT count(*) FROM cr WHERE k IS NULL) > 200
		  AND (SELECT count(DISTINCT k) FROM cr) = 400,
	'the data has 400 int8 keys, one of them on over 1000 rows, and NULLs');
SELECT is(pg_temp.plan_via('index', :'probe_k'), 'Index Scan cr_k', 'int8 probes: the index plan uses an Index Scan of cr_k');
SELECT is(pg_temp.plan_via('bitmap', :'probe_k'), 'Bitmap Index Scan cr_k', 'int8 probes: the bitmap plan uses a Bitmap Index Scan of cr_k');
SELECT is(pg_temp.plan_via('seq', :'probe_k'), '', 'int8 probes: the seqscan plan uses no index');
SELECT is(pg_temp.plan_via('index', :'probe_s'), 'Index Scan cr_s', 'text probes: the index plan uses an Index Scan of cr_s');
SELECT is(pg_temp.plan_via('bitmap', :'probe_any'), 'Bitmap Index Scan cr_k', '= ANY: the bitmap plan uses a Bitmap Index Scan of cr_k');

SELECT results_eq(pg_temp.via('index', :'probe_k'), pg_temp.via('seq', :'probe_k'),
	'int8 keys: index scan = seqscan');
SELECT results_eq(pg_temp.via('bitmap', :'probe_k'), pg_temp.via('seq', :'probe_k'),
	'int8 keys: bitmap scan = seqscan');
SELECT results_eq(pg_temp.via('index', :'probe_s'), pg_temp.via('seq', :'probe_s'),
	'text keys: index scan = seqscan');
SELECT results_eq(pg_temp.via('bitmap', :'probe_s'), pg_temp.via('seq', :'probe_s'),
	'text keys: bitmap scan = seqscan');
SELECT results_eq(pg_temp.via('bitmap', :'probe_any'), pg_temp.via('seq', :'probe_any'),
	'= ANY(array with a NULL): bitmap scan = seqscan');

-- DML, then the same comparisons
DELETE FROM cr WHERE id % 7 = 0;
UPDATE cr SET k = NULL WHERE id % 11 = 0;
UPDATE cr SET k = 42 WHERE k = 7;
UPDATE cr SET k = id % 400, s = 'key' || (id % 300) WHERE k IS NULL AND id % 2 = 0;
INSERT INTO cr SELECT i, 42, 'dup' FROM generate_series(4001, 4600) i;
SAVEPOINT before_abort;
INSERT INTO cr SELECT i, i % 400, 'key' || (i % 250) FROM generate_series(5001, 6000) i;
DELETE FROM cr WHERE k = 100;
ROLLBACK TO SAVEPOINT before_abort;
SELECT results_eq(pg_temp.via('index', :'probe_k'), pg_temp.via('seq', :'probe_k'),
	'after DML and a rolled-back subtransaction, int8 keys: index scan = seqscan');
SELECT results_eq(pg_temp.via('bitmap', :'probe_k'), pg_temp.via('seq', :'probe_k'),
	'after DML and a rolled-back subtransaction, int8 keys: bitmap scan = seqscan');
SELECT results_eq(pg_temp.via('index', :'probe_s'), pg_temp.via('seq', :'probe_s'),
	'after DML and a rolled-back subtransaction, text keys: index scan = seqscan');
SELECT results_eq(pg_temp.via('bitmap', :'probe_any'), pg_temp.via('seq', :'probe_any'),
	'after DML and a rolled-back subtransaction, = ANY: bitmap scan = seqscan');
SELECT is(pmhash_verify('cr_k') >= (SELECT count(k) FROM cr), true,
	'pmhash_verify passes and counts at least the live non-null keys');

-- a nondeterministic collation: equal strings must hash alike (ICU's; a
-- build without ICU, such as the PostgreSQL 18 wheel, skips these four)
DO $$
BEGIN
	CREATE COLLATION cr_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
EXCEPTION WHEN feature_not_supported THEN
	RAISE NOTICE 'no ICU: %', SQLERRM;
END
$$;
SELECT EXISTS (SELECT FROM pg_collation WHERE collname = 'cr_ci') AS has_icu \gset
\if :has_icu
CREATE TABLE cr_text (id int, s text COLLATE cr_ci);
INSERT INTO cr_text
SELECT i, CASE i % 3 WHEN 0 THEN 'Key' WHEN 1 THEN 'KEY' ELSE 'key' END || (i % 150)
FROM generate_series(1, 1500) i;
CREATE INDEX cr_text_s ON cr_text USING pmhash (s);
\set probe_ci 'SELECT p.v, t.id FROM (SELECT ''kEy'' || g FROM generate_series(-2, 155) g) p(v) JOIN cr_text t ON t.s = p.v ORDER BY 1, 2'
SELECT is(pg_temp.plan_via('index', :'probe_ci'), 'Index Scan cr_text_s',
	'case-insensitive probes: the index plan uses an Index Scan of cr_text_s');
SELECT is((SELECT count(*) FROM cr_text WHERE s = 'kEy7'), 10::bigint,
	'a case-insensitive lookup finds all spellings of the key');
SELECT results_eq(pg_temp.via('index', :'probe_ci'), pg_temp.via('seq', :'probe_ci'),
	'case-insensitive text keys: index scan = seqscan');
SELECT results_eq(pg_temp.via('bitmap', :'probe_ci'), pg_temp.via('seq', :'probe_ci'),
	'case-insensitive text keys: bitmap scan = seqscan');
\else
SELECT skip('this PostgreSQL is built without ICU: no nondeterministic collation', 4);
\endif

SELECT * FROM finish();
ROLLBACK;
