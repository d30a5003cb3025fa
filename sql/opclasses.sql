-- Operator classes: the 36 default pmhash classes mirror core's default hash
-- classes and validate; for every one of them (plus cidr, text[] and
-- numrange), an index scan, a bitmap scan and a sequential scan find the same
-- rows for every value in a table with duplicates, NULLs and values that are
-- equal in different representations, and for absent values; cross-type
-- equality within a family uses the index; multi-column indexes over all of
-- the types find rows by every column; broken user classes fail amvalidate.

-- quietly: the extension may exist already, and roles outlive the database
-- if an earlier run crashed
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pmhash;
DROP ROLE IF EXISTS regress_pmhash_oc_a, regress_pmhash_oc_b;
RESET client_min_messages;
SET max_parallel_workers_per_gather = 0;
-- forced plans cost over 1e10, which would make every query compile with JIT
SET jit = off;

-- exactly 36 default classes, each the twin of a core hash class of the same
-- name and type, in a family of the same name
SELECT count(*) AS pmhash_classes,
       count(*) FILTER (WHERE p.opcdefault) AS defaults,
       count(h.oid) AS core_twins,
       count(*) FILTER (WHERE hf.opfname = pf.opfname) AS same_family,
       (SELECT count(*) FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
        WHERE a.amname = 'hash' AND c.opcdefault) AS core_defaults
FROM pg_opclass p
JOIN pg_am pa ON pa.oid = p.opcmethod AND pa.amname = 'pmhash'
JOIN pg_opfamily pf ON pf.oid = p.opcfamily
LEFT JOIN (pg_opclass h JOIN pg_am ha ON ha.oid = h.opcmethod AND ha.amname = 'hash'
           JOIN pg_opfamily hf ON hf.oid = h.opcfamily)
  ON h.opcname = p.opcname AND h.opcintype = p.opcintype AND h.opcdefault;

-- the families hold the same operators and hash functions as core's
-- families of the same name (no rows expected)
WITH members AS (
  SELECT a.amname, f.opfname, 'operator ' || o.amopopr::regoperator::text AS member
  FROM pg_amop o JOIN pg_opfamily f ON f.oid = o.amopfamily JOIN pg_am a ON a.oid = f.opfmethod
  WHERE a.amname IN ('hash', 'pmhash')
  UNION ALL
  SELECT a.amname, f.opfname, 'function ' || p.amproc::regprocedure::text
  FROM pg_amproc p JOIN pg_opfamily f ON f.oid = p.amprocfamily JOIN pg_am a ON a.oid = f.opfmethod
  WHERE a.amname IN ('hash', 'pmhash') AND p.amprocnum = 1),
pm AS (SELECT opfname, member FROM members WHERE amname = 'pmhash'),
-- 18 gave seven of core's families hash functions of their own types,
-- which hash as the functions that pmhash's families (and 15 to 17) use
renamed(core18, earlier) AS (VALUES
  ('function hashbool(boolean)', 'function hashchar("char")'),
  ('function hashbytea(bytea)', 'function hashvarlena(internal)'),
  ('function hashcid(cid)', 'function hashint4(integer)'),
  ('function hashdate(date)', 'function hashint4(integer)'),
  ('function timestamptz_hash(timestamp with time zone)',
   'function timestamp_hash(timestamp without time zone)'),
  ('function hashxid(xid)', 'function hashint4(integer)'),
  ('function hashxid8(xid8)', 'function hashint8(bigint)')),
core AS (SELECT opfname, coalesce(r.earlier, member) AS member
         FROM members LEFT JOIN renamed r ON r.core18 = member
         WHERE amname = 'hash' AND opfname IN (SELECT opfname FROM pm))
(SELECT 'only in core' AS where_, * FROM (SELECT * FROM core EXCEPT SELECT * FROM pm) d
 UNION ALL
 SELECT 'only in pmhash', * FROM (SELECT * FROM pm EXCEPT SELECT * FROM core) d)
ORDER BY 1, 2, 3;

-- every pmhash class passes amvalidate (a failure would also print INFO lines)
SELECT count(*) FILTER (WHERE amvalidate(c.oid)) AS valid, count(*) AS classes
FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod WHERE a.amname = 'pmhash';

-- Types, roles and the per-type data: gen is an expression of r (0..159)
-- giving a value of typ; absent lists literals of values not in the table.
CREATE ROLE regress_pmhash_oc_a;
CREATE ROLE regress_pmhash_oc_b;
CREATE TYPE oc_mood AS ENUM ('sad', 'ok', 'happy', 'elated', 'meh');
CREATE TYPE oc_pair AS (a int, b text, c float8);
CREATE TABLE oc_spec (ord serial, tag text, typ text, gen text, absent text[]);
INSERT INTO oc_spec (tag, typ, gen, absent) VALUES
('aclitem', 'aclitem', $$format('%s=%s/%s', (ARRAY['', 'regress_pmhash_oc_a', 'regress_pmhash_oc_b'])[1 + r % 3],
    substr('arwdDxt', 1 + r % 7, 1 + r % 4), (ARRAY['regress_pmhash_oc_a', 'regress_pmhash_oc_b'])[1 + r % 2])$$,
  '{"regress_pmhash_oc_a=arwdDxt/regress_pmhash_oc_b"}'),
('int4_array', 'int4[]', $$CASE WHEN r % 20 = 0 THEN '{}'::int4[] ELSE ARRAY[r % 6, NULLIF(r % 5, 0), r % 4] END$$,
  '{"{7}","{1,NULL}","{{1,2},{3,4}}"}'),
('text_array', 'text[]', $$ARRAY['a' || r % 9, CASE WHEN r % 4 = 0 THEN NULL ELSE 'b' END]$$,
  '{"{a,b,c}","{}"}'),
('bool', 'bool', 'r % 3 = 0', '{}'),
('bpchar', 'bpchar', $$rpad('c' || (r % 60), 3 + r % 4)$$, '{"c","c60 ",""}'),
('bytea', 'bytea', $$CASE WHEN r % 40 = 0 THEN ''::bytea ELSE decode(md5(r::text), 'hex') END$$,
  '{"\\x00","\\xdeadbeef"}'),
('char', '"char"', $$chr(33 + r % 90)$$, '{"~","}"}'),
('cid', 'cid', '(r * 3)::text', '{1,4294967295}'),
('date', 'date', $$CASE WHEN r % 50 = 0 THEN 'infinity'::date ELSE date '1999-12-25' + r * 17 END$$,
  '{-infinity,1999-12-26,2100-01-01}'),
('enum', 'oc_mood', '(enum_range(NULL::oc_mood))[1 + r % 4]', '{meh}'),
('float4', 'float4', $$CASE r % 23 WHEN 0 THEN 'NaN' WHEN 1 THEN '-0' WHEN 2 THEN '0' WHEN 3 THEN 'Infinity'
    WHEN 4 THEN '-Infinity' ELSE ((r - 80) / 8.0)::float4 END$$, '{0.1,1e30,-1e-30}'),
('float8', 'float8', $$CASE r % 23 WHEN 0 THEN 'NaN' WHEN 1 THEN '-0' WHEN 2 THEN '0' WHEN 3 THEN 'Infinity'
    WHEN 4 THEN '-Infinity' ELSE (r - 80) / 3.0::float8 END$$, '{0.1,1e300,-5e-324}'),
('int2', 'int2', '(r * 211 - 16000)::int2', '{0,32767,-32768}'),
('int4', 'int4', 'r * 104729 - 8000000', '{0,2147483647,-2147483648}'),
('int8', 'int8', '(r - 80)::int8 * 123456789012', '{1,9223372036854775807,-9223372036854775808}'),
('interval', 'interval', $$CASE r % 3 WHEN 0 THEN (r % 60) * interval '1 day' WHEN 1 THEN (r % 60) * interval '24 hours'
    ELSE (r % 60 / 30) * interval '1 mon' + (r % 60 % 30) * interval '1 day' END$$,
  '{"1 year","-1 day","00:00:01"}'),
('jsonb', 'jsonb', $$format('{"k": %s, "a": [%s, "s%s"], "n": null}', round((r % 30)::numeric / 4, 1 + r % 3), r % 4, r % 5)$$,
  '{"{}","[]","null","{\"k\": 0}"}'),
('macaddr8', 'macaddr8', $$CASE WHEN r % 2 = 0 THEN substr(md5(r::text), 1, 16)::macaddr8
    ELSE substr(md5(r::text), 1, 12)::macaddr::macaddr8 END$$, '{00:00:00:00:00:00:00:00}'),
('macaddr', 'macaddr', 'substr(md5(r::text), 1, 12)', '{00:00:00:00:00:00,ff:ff:ff:ff:ff:ff}'),
('int4multirange', 'int4multirange', $$CASE WHEN r % 30 = 0 THEN '{}'::int4multirange
    ELSE int4multirange(int4range(r % 20, r % 20 + 2), int4range(r % 20 + 2 + r % 3, r % 20 + 6)) END$$,
  '{"{[100,200)}","{[1,2),[3,4),[5,6)}"}'),
('inet', 'inet', $$CASE r % 3 WHEN 0 THEN '10.' || r % 7 || '.' || r || '.1/' || (16 + r % 17)
    WHEN 1 THEN '192.168.0.' || r ELSE '2001:db8::' || to_hex(r * 409) END$$,
  '{10.0.0.1,192.168.0.1/24,::1}'),
('cidr', 'cidr', $$'10.' || r % 13 || '.' || (r % 5) * 16 || '.0/' || (20 + r % 5)$$, '{10.0.0.0/8,::/0}'),
('numeric', 'numeric', $$CASE r % 23 WHEN 0 THEN 'NaN'::numeric WHEN 1 THEN 'Infinity'
    ELSE round((r % 40)::numeric / 4, 2 + r % 3) END$$, '{-Infinity,0.1,1e100}'),
('oid', 'oid', 'CASE WHEN r % 2 = 0 THEN r::oid ELSE (4294967295 - r)::oid END', '{1,4294967294}'),
('oidvector', 'oidvector', $$CASE WHEN r % 50 = 0 THEN '' ELSE r % 30 || ' ' || r % 7 || ' 4000000000' END$$,
  '{"1","1 2 3"}'),
('pg_lsn', 'pg_lsn', $$'0/0'::pg_lsn + r::numeric * 987654321$$, '{FFFFFFFF/FFFFFFFF,0/1}'),
('int4range', 'int4range', $$CASE WHEN r % 25 = 0 THEN 'empty'::int4range
    ELSE int4range(r % 30, r % 30 + 1 + r % 4, CASE WHEN r % 2 = 0 THEN '[)' ELSE '[]' END) END$$,
  '{"[100,200)","(,)","[1,)"}'),
('numrange', 'numrange', $$numrange(round((r % 20)::numeric / 2, 1 + r % 2), (r % 20 + 3)::numeric / 2)$$,
  '{"[0.1,0.2)",empty}'),
('record', 'oc_pair', $$CASE WHEN r % 40 = 0 THEN ROW(NULL, NULL, NULL)::oc_pair
    ELSE ROW(NULLIF(r % 12, 0), 'p' || r % 5, CASE WHEN r % 7 = 0 THEN '-0' ELSE (r % 3)::float8 END)::oc_pair END$$,
  '{"(1,p1,NaN)","(,,0)","(99,\"a b\",1)"}'),
('name', 'name', $$CASE WHEN r % 10 = 0 THEN repeat('n', 60) || r ELSE 'name_' || r * 37 END$$, '{"",name_1}'),
('text', 'text', $$CASE WHEN r % 25 = 0 THEN repeat('long', 800) || r WHEN r % 31 = 0 THEN '' ELSE 'text ' || r END$$,
  '{"text","text 1 "}'),
('tid', 'tid', $$format('(%s,%s)', r % 50, r % 9)$$, '{"(0,0)","(4294967295,65535)"}'),
('time', 'time', $$time '00:00' + r * interval '7 min 13 s'$$, '{24:00,00:00:00.000001}'),
('timestamp', 'timestamp', $$CASE WHEN r % 50 = 0 THEN 'infinity'::timestamp
    ELSE timestamp '2021-03-14 01:00' + r * interval '1 hour 1 min' END$$, '{-infinity,2000-01-01}'),
('timestamptz', 'timestamptz', $$timestamptz '2021-03-14 01:00+00' + r * interval '29 min'$$,
  '{infinity,"2021-03-14 01:00:01+00"}'),
('timetz', 'timetz', $$format('%s%s', time '00:00' + (r % 80) * interval '17 min',
    CASE r % 3 WHEN 0 THEN '+00' WHEN 1 THEN '+05:30' ELSE '-08' END)$$, '{"01:00+01","00:00-00:01"}'),
('uuid', 'uuid', 'md5((r % 130)::text)', '{00000000-0000-0000-0000-000000000000}'),
('xid8', 'xid8', '(r::int8 * 4294967311)::text', '{1,18446744073709551615}'),
('xid', 'xid', '(r * 1000003)::text', '{1,4294967295}');

-- the classes of the table above are exactly the 36 pmhash classes
SELECT count(DISTINCT c.opcname) AS classes_covered
FROM oc_spec s JOIN pg_type t ON t.oid = s.typ::regtype
JOIN pg_opclass c ON c.opcdefault AND c.opcmethod = (SELECT oid FROM pg_am WHERE amname = 'pmhash')
  AND (c.opcintype = t.oid OR c.opcintype = 'anyarray'::regtype AND t.typcategory = 'A'
       OR c.opcintype = 'anyenum'::regtype AND t.typtype = 'e'
       OR c.opcintype = 'anyrange'::regtype AND t.typtype = 'r'
       OR c.opcintype = 'anymultirange'::regtype AND t.typtype = 'm'
       OR c.opcintype = 'record'::regtype AND t.typtype = 'c'
       OR c.opcintype = 'inet'::regtype AND t.oid = 'cidr'::regtype);

-- one table per type: 400 rows, each value about 2.5 times, every 17th NULL
DO $$
DECLARE s record;
BEGIN
  FOR s IN SELECT * FROM oc_spec ORDER BY ord LOOP
    EXECUTE format('CREATE TABLE %I (id int, v %s) WITH (autovacuum_enabled = off)', 'oc_' || s.tag, s.typ);
    EXECUTE format('INSERT INTO %I SELECT i, CASE WHEN i %% 17 <> 0 THEN (%s)::%s END
                    FROM (SELECT i, i * 7 %% 160 AS r FROM generate_series(1, 400) i) g',
                   'oc_' || s.tag, s.gen, s.typ);
    EXECUTE format('CREATE INDEX %I ON %I USING pmhash (v)', 'oc_' || s.tag || '_v', 'oc_' || s.tag);
  END LOOP;
END $$;

-- Force the plan of the next query: 'index', 'bitmap' or 'seq'.
CREATE FUNCTION oc_force(how text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('enable_indexscan', (how = 'index')::text, true);
  PERFORM set_config('enable_bitmapscan', (how = 'bitmap')::text, true);
  PERFORM set_config('enable_seqscan', (how = 'seq')::text, true);
END $$;

-- Whether the forced plan of query q scans the way it should with index idx.
CREATE FUNCTION oc_plan_ok(q text, how text, idx text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE line text; plan text := '';
BEGIN
  PERFORM oc_force(how);
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
    plan := plan || line || E'\n';
  END LOOP;
  RETURN CASE how
    WHEN 'index' THEN plan LIKE '%Index Scan using ' || idx || ' %' AND plan NOT LIKE '%Bitmap%'
    WHEN 'bitmap' THEN plan LIKE '%Bitmap Index Scan on ' || idx || '%'
    ELSE plan LIKE '%Seq Scan%' AND plan NOT LIKE '%Index%' END;
END $$;

-- Probe the table of one type with every distinct value (as text, so equal
-- values with different text, like 1.0 and 1.00, are each probed) and the
-- absent values, each with an index scan, a bitmap scan and a seqscan.  The
-- value is a subquery: PostgreSQL 15 turns "v = true" into "v", which only
-- core's own boolean families can match to an index.
CREATE FUNCTION oc_check(tag text, typ text, absent text[],
  OUT opclass name, OUT probes int, OUT mismatches int, OUT covered boolean,
  OUT plans_ok boolean, OUT verified boolean) LANGUAGE plpgsql AS $$
DECLARE
  tbl text := 'oc_' || tag;
  idx text := 'oc_' || tag || '_v';
  lit text; sample text; q text; a int[]; b int[]; c int[]; seen int[] := '{}'; nrows bigint;
BEGIN
  probes := 0; mismatches := 0;
  FOR lit IN EXECUTE format('SELECT v::text FROM %I UNION SELECT unnest($1)', tbl) USING absent LOOP
    q := format('SELECT array_agg(id ORDER BY id) FROM %I WHERE v = (SELECT %L::%s)', tbl, lit, typ);
    PERFORM oc_force('index'); EXECUTE q INTO a;
    PERFORM oc_force('bitmap'); EXECUTE q INTO b;
    PERFORM oc_force('seq'); EXECUTE q INTO c;
    probes := probes + 1;
    IF a IS DISTINCT FROM c OR b IS DISTINCT FROM c THEN
      mismatches := mismatches + 1;
    END IF;
    seen := seen || c;
    sample := coalesce(sample, lit);
  END LOOP;
  -- every non-NULL row was found by some probe
  EXECUTE format('SELECT count(v) FROM %I', tbl) INTO nrows;
  covered := nrows > 0 AND nrows = (SELECT count(DISTINCT x) FROM unnest(seen) x);
  q := format('SELECT id FROM %I WHERE v = (SELECT %L::%s)', tbl, sample, typ);
  plans_ok := oc_plan_ok(q, 'index', idx) AND oc_plan_ok(q, 'bitmap', idx) AND oc_plan_ok(q, 'seq', idx);
  verified := pmhash_verify(idx::regclass) = nrows;
  SELECT o.opcname INTO opclass FROM pg_index i JOIN pg_opclass o ON o.oid = i.indclass[0]
  WHERE i.indexrelid = idx::regclass;
END $$;

SELECT s.tag, c.*
FROM oc_spec s, oc_check(s.tag, s.typ, s.absent) c
ORDER BY s.ord;

-- Cross-type equality within a family: int8 = int4/int2, int2 = int8/int4,
-- float4 = float8 and back, text = name and back.  A name constant has
-- collation "C", so comparing it with a text column needs COLLATE "default"
-- for any index (core's hash too) to match.
CREATE TABLE oc_cross (id int, k8 int8, k2 int2, f4 float4, f8 float8, s text, n name)
  WITH (autovacuum_enabled = off);
INSERT INTO oc_cross
SELECT i, i % 300 - 150, i % 250 - 120,
       CASE WHEN i % 97 = 0 THEN '-0' WHEN i % 89 = 0 THEN 'NaN' ELSE (i % 64 - 32) / 4.0 END,
       CASE WHEN i % 97 = 0 THEN '-0' WHEN i % 89 = 0 THEN 'NaN' WHEN i % 2 = 0 THEN i % 40 / 8.0 ELSE i % 40 / 10.0 END,
       'x' || i % 200, 'x' || i % 180
FROM generate_series(1, 3000) i;
INSERT INTO oc_cross VALUES (0, NULL, NULL, NULL, NULL, NULL, NULL);
CREATE INDEX oc_cross_k8 ON oc_cross USING pmhash (k8);
CREATE INDEX oc_cross_k2 ON oc_cross USING pmhash (k2);
CREATE INDEX oc_cross_f4 ON oc_cross USING pmhash (f4);
CREATE INDEX oc_cross_f8 ON oc_cross USING pmhash (f8);
CREATE INDEX oc_cross_s ON oc_cross USING pmhash (s);
CREATE INDEX oc_cross_n ON oc_cross USING pmhash (n);

-- the plans: the cross-type qual is an index condition
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM oc_cross WHERE k8 = 42::int4;
EXPLAIN (COSTS OFF) SELECT id FROM oc_cross WHERE k2 = 42::int8;
EXPLAIN (COSTS OFF) SELECT id FROM oc_cross WHERE f4 = 0.25::float8;
EXPLAIN (COSTS OFF) SELECT id FROM oc_cross WHERE n = 'x7'::text;
SET enable_bitmapscan = on;
SET enable_indexscan = off;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM oc_cross WHERE s = 'x7'::name COLLATE "default";
RESET enable_indexscan;
RESET enable_bitmapscan;
RESET enable_seqscan;

-- Rows matching qual with the index (forced plan kind how), as ids.
CREATE FUNCTION oc_cross_ids(qual text, how text) RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE ids int[];
BEGIN
  PERFORM oc_force(how);
  EXECUTE 'SELECT array_agg(id ORDER BY id) FROM oc_cross WHERE ' || qual INTO ids;
  RETURN ids;
END $$;

-- each qual: the index is used, and index and bitmap scans agree with a seqscan
SELECT qual,
       oc_plan_ok('SELECT id FROM oc_cross WHERE ' || qual, 'index', 'oc_cross_' || split_part(qual, ' ', 1))
         AND oc_plan_ok('SELECT id FROM oc_cross WHERE ' || qual, 'bitmap', 'oc_cross_' || split_part(qual, ' ', 1))
         AS uses_index,
       coalesce(cardinality(oc_cross_ids(qual, 'seq')), 0) AS matches,
       oc_cross_ids(qual, 'index') IS NOT DISTINCT FROM oc_cross_ids(qual, 'seq')
         AND oc_cross_ids(qual, 'bitmap') IS NOT DISTINCT FROM oc_cross_ids(qual, 'seq') AS agree
FROM unnest(ARRAY[
  'k8 = 42::int4', 'k8 = (-150)::int4', 'k8 = 149::int2', 'k8 = (-7)::int2', 'k8 = 4294967338::int8',
  'k2 = 42::int8', 'k2 = (-120)::int8', 'k2 = 70000::int8', 'k2 = (-65536)::int8', 'k2 = 129::int4',
  'k2 = 65537::int4',
  'f4 = 0.25::float8', 'f4 = 0.1::float8', 'f4 = (-0.0)::float8', 'f4 = ''NaN''::float8', 'f4 = 7.75::float8',
  'f8 = 0.25::float4', 'f8 = 0.1::float4', 'f8 = ''-0''::float4', 'f8 = ''NaN''::float4', 'f8 = 3.5::float4',
  's = ''x7''::name COLLATE "default"', 's = ''x199''::name COLLATE "default"', 's = ''y''::name COLLATE "default"',
  'n = ''x7''::text', 'n = ''x179''::text', 'n = ''x7 ''::text']) qual;

-- Multi-column indexes over a mix of the classes: every type above as a
-- column of one table, in two indexes (an index has at most 32 key
-- columns); for a sample of rows, equality on every column of an index
-- finds the row by index and bitmap scan as a seqscan does
DO $$
DECLARE s record; cols text := ''; vals text := '';
BEGIN
  FOR s IN SELECT * FROM oc_spec ORDER BY ord LOOP
    cols := cols || format(', c%s %s', s.ord, s.typ);
    vals := vals || format(', CASE WHEN i %% 17 <> 0 THEN (%s)::%s END', s.gen, s.typ);
  END LOOP;
  EXECUTE 'CREATE TABLE oc_multi (id int' || cols || ') WITH (autovacuum_enabled = off)';
  EXECUTE 'INSERT INTO oc_multi SELECT i' || vals
    || ' FROM (SELECT i, i * 7 % 160 AS r FROM generate_series(1, 400) i) g';
  EXECUTE 'CREATE INDEX oc_multi_a ON oc_multi USING pmhash ('
    || (SELECT string_agg('c' || ord, ', ' ORDER BY ord) FROM oc_spec WHERE ord <= 20) || ')';
  EXECUTE 'CREATE INDEX oc_multi_b ON oc_multi USING pmhash ('
    || (SELECT string_agg('c' || ord, ', ' ORDER BY ord) FROM oc_spec WHERE ord > 20) || ')';
END $$;
CREATE FUNCTION oc_multi_check(idx text, OUT columns int, OUT probes int, OUT mismatches int,
  OUT plans_ok boolean, OUT verified boolean) LANGUAGE plpgsql AS $$
DECLARE row_id int; q text; a int[]; b int[]; c int[]; lit text; s record; qual text;
BEGIN
  probes := 0; mismatches := 0; plans_ok := true;
  SELECT count(*) INTO columns FROM oc_spec
    WHERE CASE idx WHEN 'oc_multi_a' THEN ord <= 20 ELSE ord > 20 END;
  FOR row_id IN SELECT id FROM oc_multi WHERE id % 13 = 0 AND id % 17 <> 0 ORDER BY id LOOP
    qual := '';
    FOR s IN SELECT * FROM oc_spec WHERE CASE idx WHEN 'oc_multi_a' THEN ord <= 20 ELSE ord > 20 END
             ORDER BY ord LOOP
      EXECUTE format('SELECT c%s::text FROM oc_multi WHERE id = %s', s.ord, row_id) INTO lit;
      qual := qual || format(' AND c%s = (SELECT %L::%s)', s.ord, lit, s.typ);
    END LOOP;
    q := 'SELECT array_agg(id ORDER BY id) FROM oc_multi WHERE true' || qual;
    PERFORM oc_force('index'); EXECUTE q INTO a;
    PERFORM oc_force('bitmap'); EXECUTE q INTO b;
    PERFORM oc_force('seq'); EXECUTE q INTO c;
    probes := probes + 1;
    IF a IS DISTINCT FROM c OR b IS DISTINCT FROM c OR NOT row_id = ANY(c) THEN
      mismatches := mismatches + 1;
    END IF;
    IF probes = 1 THEN
      q := 'SELECT id FROM oc_multi WHERE true' || qual;
      plans_ok := oc_plan_ok(q, 'index', idx) AND oc_plan_ok(q, 'bitmap', idx);
    END IF;
  END LOOP;
  verified := pmhash_verify(idx::regclass) = (SELECT count(c1) FROM oc_multi);
END $$;
SELECT idx, c.* FROM unnest(ARRAY['oc_multi_a', 'oc_multi_b']) idx, oc_multi_check(idx) c;

-- Broken user classes fail amvalidate; a correct one passes.
CREATE OPERATOR CLASS oc_good_ops FOR TYPE int4 USING pmhash AS
  OPERATOR 3 = (int4, int4), FUNCTION 1 hashint4(int4);
-- hash function of the wrong type
CREATE OPERATOR CLASS oc_wrong_hash_ops FOR TYPE int4 USING pmhash AS
  OPERATOR 3 = (int4, int4), FUNCTION 1 hashtext(text);
-- hash function with two arguments (an extended hash function)
CREATE OPERATOR CLASS oc_two_arg_ops FOR TYPE int8 USING pmhash AS
  OPERATOR 3 = (int8, int8), FUNCTION 1 (int8, int8) hashint8extended(int8, int8);
-- a cross-type operator whose right type has no hash function in the family
CREATE OPERATOR FAMILY oc_partial_fam USING pmhash;
CREATE OPERATOR CLASS oc_partial_ops FOR TYPE int4 USING pmhash FAMILY oc_partial_fam AS
  OPERATOR 3 = (int4, int4), FUNCTION 1 hashint4(int4);
ALTER OPERATOR FAMILY oc_partial_fam USING pmhash ADD OPERATOR 3 = (int4, int8);
-- a class without a hash function at all
CREATE OPERATOR CLASS oc_no_hash_ops FOR TYPE int2 USING pmhash AS OPERATOR 3 = (int2, int2);
-- a class whose operator is not an equality of the class's type
CREATE OPERATOR CLASS oc_other_type_ops FOR TYPE oid USING pmhash AS
  OPERATOR 3 = (int4, int4), FUNCTION 1 hashoid(oid), FUNCTION 1 (int4, int4) hashint4(int4);
-- equality is number 3 (btree's); number 1, version 0.1's, is still valid
CREATE OPERATOR CLASS oc_numbered_0_1_ops FOR TYPE int4 USING pmhash AS
  OPERATOR 1 = (int4, int4), FUNCTION 1 hashint4(int4);
-- other operator numbers are rejected outright
CREATE OPERATOR CLASS oc_strategy_ops FOR TYPE int4 USING pmhash AS
  OPERATOR 2 = (int4, int4), FUNCTION 1 hashint4(int4);
CREATE OPERATOR CLASS oc_strategy_ops FOR TYPE int4 USING pmhash AS
  OPERATOR 4 = (int4, int4), FUNCTION 1 hashint4(int4);
ALTER OPERATOR FAMILY oc_partial_fam USING pmhash ADD OPERATOR 2 = (int4, int2);
SELECT c.opcname, amvalidate(c.oid)
FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
WHERE a.amname = 'pmhash' AND c.opcname LIKE 'oc\_%'
ORDER BY c.opcname;

-- cleanup
DROP OPERATOR FAMILY oc_partial_fam USING pmhash;
DO $$
DECLARE s record;
BEGIN
  FOR s IN SELECT c.opcname FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
           WHERE a.amname = 'pmhash' AND c.opcname LIKE 'oc\_%' LOOP
    EXECUTE format('DROP OPERATOR FAMILY %I USING pmhash', s.opcname);
  END LOOP;
  FOR s IN SELECT tag FROM oc_spec LOOP
    EXECUTE format('DROP TABLE %I', 'oc_' || s.tag);
  END LOOP;
END $$;
DROP TABLE oc_spec, oc_cross, oc_multi;
DROP FUNCTION oc_check, oc_plan_ok, oc_cross_ids, oc_force, oc_multi_check;
DROP TYPE oc_mood, oc_pair;
DROP ROLE regress_pmhash_oc_a, regress_pmhash_oc_b;
