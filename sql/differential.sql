-- Differential test: for each of the 36 default operator classes (plus cidr,
-- text[] and numrange), a table of 4000 rows with one key holding 5% of the
-- rows and 1% NULLs goes through build, INSERT, DELETE, UPDATE of keys,
-- aborted INSERTs, VACUUM, INSERTs after VACUUM and REINDEX.  Each table has
-- three pmhash indexes: on its key v; on (v, w), where w is of the next
-- type in the list (up to 7 values, 1 in 30 rows NULL), so every pair of
-- neighbouring operator classes is combined; and UNIQUE on (id, w).  After
-- every phase, every key of each index ever present in the table (and NULLs
-- and a few absent values) is looked up with a forced index scan, a forced
-- bitmap scan and a sequential scan, and the row ids found must be the
-- same.  pmhash_verify must count exactly the rows whose first key column
-- is not NULL whenever no dead rows remain.

-- quietly: the extension may exist already, and roles outlive the database
-- if an earlier run crashed
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pmhash;
DROP ROLE IF EXISTS regress_pmhash_df_a, regress_pmhash_df_b;
RESET client_min_messages;
SET max_parallel_workers_per_gather = 0;
-- forced plans cost over 1e10, which would make every query compile with JIT
SET jit = off;

CREATE ROLE regress_pmhash_df_a;
CREATE ROLE regress_pmhash_df_b;
CREATE TYPE df_color AS ENUM ('red', 'orange', 'yellow', 'green', 'blue', 'indigo', 'violet');
CREATE TYPE df_rec AS (a int, b text, c float8);

-- gen: an expression of r giving a value of typ; r = 0 is the frequent key,
-- the others are drawn from 1..2000, and gen maps different r to equal values
-- in different representations where the type has them.  absent: literals of
-- values that are never generated.
CREATE TABLE df_spec (ord serial, tag text, typ text, gen text, absent text[]);
INSERT INTO df_spec (tag, typ, gen, absent) VALUES
('aclitem', 'aclitem', $$format('%s=%s/%s', (ARRAY['', 'regress_pmhash_df_a', 'regress_pmhash_df_b'])[1 + r % 3],
    substr('arwdDxtXUCcT', 1 + r % 12, 1 + r % 5), (ARRAY['regress_pmhash_df_a', 'regress_pmhash_df_b'])[1 + r / 7 % 2])$$,
  '{"regress_pmhash_df_b=arwdDxtXUCcT/regress_pmhash_df_a"}'),
('int4_array', 'int4[]', $$CASE WHEN r % 97 = 7 THEN '{}'::int4[] ELSE ARRAY[r % 13, NULLIF(r % 11, 0), r / 100] END$$,
  '{"{-1}","{{1,2},{3,4}}"}'),
('text_array', 'text[]', $$ARRAY[to_hex(r % 300), NULLIF(md5((r / 300)::text), md5('0'))]$$, '{"{}","{NULL}"}'),
('bool', 'bool', 'r % 2 = 0', '{}'),
('bpchar', 'bpchar', $$rpad('b' || (r % 700), 4 + r % 3)$$, '{"b","b700 "}'),
('bytea', 'bytea', $$CASE WHEN r % 50 = 0 THEN decode(repeat(md5(r::text), 100), 'hex') ELSE decode(md5(r::text), 'hex') END$$,
  '{"\\x","\\x00"}'),
('char', '"char"', 'chr(33 + r % 94)', '{" "}'),
('cid', 'cid', '(r::int8 * 2000003 % 4294967296)::text', '{1,4294967295}'),
('date', 'date', $$CASE r % 97 WHEN 5 THEN 'infinity'::date WHEN 6 THEN '-infinity' ELSE date '1970-01-01' + r * 37 END$$,
  '{1970-01-02,4713-01-01BC}'),
('enum', 'df_color', '(enum_range(NULL::df_color))[1 + r % 6]', '{violet}'),
('float4', 'float4', $$CASE r % 97 WHEN 1 THEN 'NaN' WHEN 2 THEN '-0' WHEN 3 THEN 'Infinity'
    ELSE ((r - 1000) / 7.0)::float4 END$$, '{0.1,-Infinity}'),
('float8', 'float8', $$CASE r % 97 WHEN 1 THEN 'NaN' WHEN 2 THEN '-0' WHEN 3 THEN '-Infinity'
    ELSE (r - 1000) / 3.0::float8 END$$, '{0.1,Infinity}'),
('int2', 'int2', '(r * 31 - 31000)::int2', '{32767,-32768,1}'),
('int4', 'int4', 'r * 1000003 - 1000000000', '{2147483647,-2147483648,1}'),
('int8', 'int8', '(r - 1000)::int8 * 9000000000000000', '{9223372036854775807,-9223372036854775808,1}'),
('interval', 'interval', $$CASE r % 3 WHEN 0 THEN (r % 400) * interval '1 day' WHEN 1 THEN (r % 400) * interval '24 hours'
    ELSE (r % 400 / 30) * interval '1 mon' + (r % 400 % 30) * interval '1 day' END$$, '{"1 second","-1 day"}'),
('jsonb', 'jsonb', $$format('{"id": %s, "tags": ["t%s", %s], "v": %s}', r % 900, r % 9, (r % 2 = 0)::text,
    round((r % 900)::numeric / 10, 1 + r / 900))$$, '{"{}","[]","null"}'),
('macaddr8', 'macaddr8', 'substr(md5(r::text), 3, 16)', '{00:00:00:00:00:00:00:00}'),
('macaddr', 'macaddr', 'substr(md5(r::text), 1, 12)', '{00:00:00:00:00:00}'),
('int4multirange', 'int4multirange', $$int4multirange(int4range(r % 300, r % 300 + 2),
    int4range(r % 300 + 2 + r / 1000, r % 300 + 9))$$, '{"{}","{[1000,2000)}"}'),
('inet', 'inet', $$CASE r % 2 WHEN 0 THEN format('172.%s.%s.%s/%s', r % 16, r % 256, r % 200, 20 + r % 13)
    ELSE format('fd00::%s:%s/%s', to_hex(r), to_hex(r % 77), 64 + r % 65) END$$, '{127.0.0.1,::1}'),
('cidr', 'cidr', $$format('10.%s.%s.0/24', r % 256, r / 256)$$, '{10.0.0.0/8,::/0}'),
('numeric', 'numeric', $$CASE r % 97 WHEN 1 THEN 'NaN' WHEN 2 THEN '-Infinity'
    ELSE round((r % 600)::numeric / 8, 3 + r / 600) END$$, '{0.1,Infinity,1e100}'),
('oid', 'oid', '(r::int8 * 2147483 % 4294967296)::oid', '{4294967295,1}'),
('oidvector', 'oidvector', $$format('%s %s %s', r % 40, r % 53, r % 61 * 70000000::int8)$$, '{"","1 2 3"}'),
('pg_lsn', 'pg_lsn', $$'0/0'::pg_lsn + r::numeric * 4294967311$$, '{FFFFFFFF/FFFFFFFF,0/1}'),
('int4range', 'int4range', $$CASE WHEN r % 97 = 7 THEN 'empty'::int4range
    ELSE int4range(r % 500, r % 500 + 1 + r / 500, CASE WHEN r % 2 = 0 THEN '[)' ELSE '[]' END) END$$,
  '{"(,)","[1000,)"}'),
('numrange', 'numrange', $$numrange(round((r % 300)::numeric / 4, 2 + r / 1000), (r % 300 + 7)::numeric / 4)$$,
  '{empty,"[0.1,0.2)"}'),
('record', 'df_rec', $$CASE WHEN r % 60 = 0 THEN ROW(NULL, NULL, NULL)::df_rec
    ELSE ROW(r % 60, 'q' || r % 17, CASE WHEN r / 1000 = 1 THEN '-0' ELSE (r % 5)::float8 END)::df_rec END$$,
  '{"(0,q0,0)","(1,,)"}'),
('name', 'name', $$CASE WHEN r % 50 = 0 THEN repeat('N', 60) || r ELSE 'nm' || r * 7919 END$$, '{"",nm1}'),
('text', 'text', $$CASE WHEN r % 97 = 0 THEN repeat(md5(r::text), 80) WHEN r % 89 = 0 THEN '' ELSE md5(r::text) END$$,
  '{"x","y "}'),
('tid', 'tid', $$format('(%s,%s)', r % 300, r % 29)$$, '{"(0,30)","(4294967295,65535)"}'),
('time', 'time', $$time '00:00' + r * interval '43 s'$$, '{24:00,00:00:01}'),
('timestamp', 'timestamp', $$CASE WHEN r % 97 = 5 THEN 'infinity'::timestamp
    ELSE timestamp '2000-02-28' + r * interval '13 hours 7 min' END$$, '{-infinity,1999-01-01}'),
('timestamptz', 'timestamptz', $$timestamptz '2019-03-31 00:00+00' + r * interval '17 min'$$,
  '{infinity,"2019-03-31 00:00:01+00"}'),
('timetz', 'timetz', $$format('%s%s', time '00:00' + (r % 1000) * interval '86 s', CASE WHEN r < 1000 THEN '+02' ELSE '-03:30' END)$$,
  '{"00:00:01+00","12:00-12"}'),
('uuid', 'uuid', 'md5(r::text)', '{00000000-0000-0000-0000-000000000000}'),
('xid8', 'xid8', '(r::int8 * 4000000000000000)::text', '{1,18446744073709551615}'),
('xid', 'xid', '(r::int8 * 2146999)::text', '{1,4294967295}');

-- Results: per phase, the mismatching probes, whether the seqscan found
-- every non-NULL row exactly once (ok) and pmhash_verify's count; and the
-- pseudo-phases 'plans' (the forced plans are the intended ones) and 'shape'
-- (at the start, 1% NULLs and a key holding at least 5% of the rows) in ok.
CREATE TABLE df_result (tag text, idx text, phase text, mismatches bigint, ok boolean,
                        verified boolean);
-- Rows found by one plan kind for each probe (scratch).
CREATE TABLE df_found (how text, pid int, ids int[]);
-- The indexes of each table: suffix of their name, key columns, UNIQUE.
CREATE TABLE df_index (ord int, suffix text, cols text[], is_unique boolean);
INSERT INTO df_index VALUES (1, 'i', '{v}', false), (2, 'm', '{v,w}', false), (3, 'u', '{id,w}', true);

-- The expression of a key for a row with random r: NULL, the frequent key or gen.
CREATE FUNCTION df_key(s df_spec) RETURNS text LANGUAGE sql AS $$
  SELECT format('CASE WHEN r IS NOT NULL THEN (%s)::%s END', s.gen, s.typ)
$$;

-- The type after s in the list (the first after the last): w's type.
CREATE FUNCTION df_partner(s df_spec) RETURNS df_spec LANGUAGE sql AS $$
  SELECT * FROM df_spec WHERE ord = s.ord % (SELECT count(*) FROM df_spec) + 1
$$;

-- INSERT rows first..last: every 100th key NULL, every 20th the frequent
-- key; w of the partner type from r (or i) modulo 7, every 30th NULL.
CREATE FUNCTION df_insert(s df_spec, first int, last int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('INSERT INTO %I SELECT i, %s, (SELECT %s FROM (SELECT CASE WHEN i %% 30 <> 0
                    THEN coalesce(r, i) %% 7 END AS r) z) FROM (SELECT i, CASE WHEN i %% 100 = 0 THEN NULL
                    WHEN i %% 20 = 1 THEN 0 ELSE 1 + floor(random() * 2000)::int END AS r
                  FROM generate_series($1, $2) i) g', 'df_t_' || s.tag, df_key(s), df_key(df_partner(s)))
  USING first, last;
END $$;

-- Force the plans of the lookup join: 'index', 'bitmap' or 'seq' (for the
-- rest of the transaction); 'default' allows every plan again.
CREATE FUNCTION df_force(how text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('enable_indexscan', (how IN ('index', 'default'))::text, true);
  PERFORM set_config('enable_bitmapscan', (how IN ('bitmap', 'default'))::text, true);
  PERFORM set_config('enable_seqscan', (how IN ('seq', 'default'))::text, true);
  PERFORM set_config('enable_nestloop', (how <> 'seq')::text, true);
  PERFORM set_config('enable_hashjoin', (how IN ('seq', 'default'))::text, true);
  PERFORM set_config('enable_mergejoin', (how = 'default')::text, true);
  PERFORM set_config('enable_memoize', (how = 'default')::text, true);
  PERFORM set_config('enable_material', (how = 'default')::text, true);
END $$;

-- Whether the forced plan of the lookup join q scans the index as it should.
CREATE FUNCTION df_plan_ok(q text, how text, idx text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE line text; plan text := '';
BEGIN
  PERFORM df_force(how);
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
    plan := plan || line || E'\n';
  END LOOP;
  RETURN CASE how
    WHEN 'index' THEN plan LIKE '%Nested Loop%Index Scan using ' || idx || ' %' AND plan NOT LIKE '%Bitmap%'
    WHEN 'bitmap' THEN plan LIKE '%Nested Loop%Bitmap Index Scan on ' || idx || '%'
    ELSE plan LIKE '%Hash%Join%' AND plan NOT LIKE '%Index%' END;
END $$;

-- Look up every probe of one index of one type with each plan kind; record
-- the number of probes on which the plans disagree, whether the seqscan
-- found every row without NULL key columns exactly once, and (if
-- check_verify) whether pmhash_verify counted the rows that have entries.  The probe table's columns x1, x2 match the
-- index's key columns.
CREATE FUNCTION df_check_index(s df_spec, i df_index, phase text, check_verify boolean)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  tbl text := 'df_t_' || s.tag;
  prb text := format('df_%s_p_%s', i.suffix, s.tag);
  idx text := format('df_%s_%s', i.suffix, s.tag);
  tcols text := array_to_string(i.cols, ', ');
  pcols text := (SELECT string_agg('x' || n, ', ') FROM generate_series(1, cardinality(i.cols)) n);
  cond text := (SELECT string_agg(format('t.%I = p.x%s', c, n), ' AND ')
                FROM unnest(i.cols) WITH ORDINALITY u(c, n));
  q text; kind text; nkeys bigint; nentries bigint; nfound bigint; bad bigint;
  plans boolean := true;
BEGIN
  -- new keys become probes (one per equality class; NULLs are probes from the start)
  EXECUTE format('INSERT INTO %I (%s) SELECT DISTINCT %s FROM %I t WHERE num_nulls(%s) = 0
                  AND NOT EXISTS (SELECT FROM %I p WHERE %s)', prb, pcols, tcols, tbl, tcols, prb, cond);
  q := format('SELECT p.pid, array_agg(t.id ORDER BY t.id) FILTER (WHERE t.id IS NOT NULL)
               FROM %I p LEFT JOIN %I t ON %s GROUP BY p.pid', prb, tbl, cond);
  TRUNCATE df_found;
  FOREACH kind IN ARRAY ARRAY['index', 'bitmap', 'seq'] LOOP
    plans := plans AND df_plan_ok(q, kind, idx);
    PERFORM df_force(kind);
    EXECUTE format('INSERT INTO df_found SELECT %L, * FROM (%s) f', kind, q);
  END LOOP;
  PERFORM df_force('default');
  -- probes on which the three plans found different rows
  SELECT count(*) INTO bad FROM (SELECT f.pid FROM df_found f GROUP BY f.pid
    HAVING count(*) <> 3 OR count(DISTINCT coalesce(f.ids, '{}')) <> 1) d;
  SELECT coalesce(sum(cardinality(f.ids)), 0) INTO nfound FROM df_found f WHERE f.how = 'seq';
  -- a row has an entry unless its first key column is NULL
  EXECUTE format('SELECT count(*) FILTER (WHERE num_nulls(%s) = 0), count(%I) FROM %I',
                 tcols, i.cols[1], tbl) INTO nkeys, nentries;
  INSERT INTO df_result VALUES (s.tag, tcols, phase, bad, nkeys > 0 AND nfound = nkeys,
    CASE WHEN check_verify THEN pmhash_verify(idx::regclass) = nentries END);
  INSERT INTO df_result VALUES (s.tag, tcols, 'plans', NULL, plans, NULL);
END $$;

-- Check every index of one type, and at the build the shape of its data.
CREATE FUNCTION df_check(s df_spec, phase text, check_verify boolean) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  tbl text := 'df_t_' || s.tag;
  i df_index;
  shape boolean;
BEGIN
  FOR i IN SELECT * FROM df_index ORDER BY ord LOOP
    PERFORM df_check_index(s, i, phase, check_verify);
  END LOOP;
  IF phase = 'build' THEN
    EXECUTE format('SELECT (SELECT count(*) FROM %I WHERE num_nulls(v) = 1) = 40 AND
                    (SELECT max(n) FROM (SELECT count(*) AS n FROM %I GROUP BY v) g) >= 200 AND
                    (SELECT count(*) FROM (SELECT w FROM %I GROUP BY w) g) >= 2',
                   tbl, tbl, tbl) INTO shape;
    INSERT INTO df_result VALUES (s.tag, 'v', 'shape', NULL, shape, NULL);
  END IF;
END $$;

-- Run one phase on every type, then check.  VACUUM cannot run in a function:
-- the 'vacuum' phase only checks, after the caller vacuumed.
CREATE FUNCTION df_phase(phase text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  s df_spec; w df_spec; tbl text; n bigint := 0;
  phases text[] := '{build,insert,delete,update,abort,vacuum,reinsert,reindex}';
BEGIN
  FOR s IN SELECT * FROM df_spec ORDER BY ord LOOP
    tbl := 'df_t_' || s.tag;
    PERFORM setseed(((s.ord * 10 + array_position(phases, phase)) % 1000) / 1000.0);
    CASE phase
    WHEN 'build' THEN
      w := df_partner(s);
      EXECUTE format('CREATE TABLE %I (id int, v %s, w %s) WITH (autovacuum_enabled = off)',
                     tbl, s.typ, w.typ);
      PERFORM df_insert(s, 1, 4000);
      EXECUTE format('CREATE INDEX %I ON %I USING pmhash (v)', 'df_i_' || s.tag, tbl);
      EXECUTE format('CREATE INDEX %I ON %I USING pmhash (v, w)', 'df_m_' || s.tag, tbl);
      EXECUTE format('CREATE UNIQUE INDEX %I ON %I USING pmhash (id, w)', 'df_u_' || s.tag, tbl);
      -- probes with NULLs, and absent values next to present ones
      EXECUTE format('CREATE TABLE %I (pid serial, x1 %s)', 'df_i_p_' || s.tag, s.typ);
      EXECUTE format('INSERT INTO %I (x1) VALUES (NULL)', 'df_i_p_' || s.tag);
      EXECUTE format('INSERT INTO %I (x1) SELECT unnest($1)::%s', 'df_i_p_' || s.tag, s.typ) USING s.absent;
      EXECUTE format('CREATE TABLE %I (pid serial, x1 %s, x2 %s)', 'df_m_p_' || s.tag, s.typ, w.typ);
      EXECUTE format('INSERT INTO %I (x1, x2) SELECT v, NULL FROM %I WHERE id = 2', 'df_m_p_' || s.tag, tbl);
      EXECUTE format('INSERT INTO %I (x1, x2) SELECT a::%s, w FROM unnest($1) a, %I WHERE id = 2',
                     'df_m_p_' || s.tag, s.typ, tbl) USING s.absent;
      EXECUTE format('INSERT INTO %I (x1, x2) SELECT v, a::%s FROM unnest($1) a, %I WHERE id = 2',
                     'df_m_p_' || s.tag, w.typ, tbl) USING w.absent;
      EXECUTE format('CREATE TABLE %I (pid serial, x1 int, x2 %s)', 'df_u_p_' || s.tag, w.typ);
      EXECUTE format('INSERT INTO %I (x1, x2) SELECT 2, NULL UNION ALL SELECT 2, a::%s FROM unnest($1) a
                      UNION ALL SELECT -2, w FROM %I WHERE id = 2', 'df_u_p_' || s.tag, w.typ, tbl)
        USING w.absent;
    WHEN 'insert' THEN
      PERFORM df_insert(s, 4001, 5000);
    WHEN 'delete' THEN
      EXECUTE format('DELETE FROM %I WHERE random() < 0.2', tbl);
    WHEN 'update' THEN
      EXECUTE format('UPDATE %I t SET v = n.v FROM (SELECT id, %s AS v FROM (SELECT id,
                        CASE WHEN random() < 0.01 THEN NULL WHEN random() < 0.05 THEN 0
                        ELSE 1 + floor(random() * 2000)::int END AS r
                      FROM %I WHERE random() < 0.2) g) n WHERE t.id = n.id', tbl, df_key(s), tbl);
    WHEN 'abort' THEN
      BEGIN
        PERFORM df_insert(s, 5001, 5500);
        RAISE EXCEPTION 'roll back';
      EXCEPTION WHEN raise_exception THEN
        NULL;
      END;
    WHEN 'vacuum' THEN
      NULL;
    WHEN 'reinsert' THEN
      PERFORM df_insert(s, 6001, 7000);
    WHEN 'reindex' THEN
      EXECUTE format('REINDEX TABLE %I', tbl);
    END CASE;
    PERFORM df_check(s, phase, phase IN ('build', 'insert', 'vacuum', 'reinsert', 'reindex'));
    n := n + 1;
  END LOOP;
  RETURN n;
END $$;

SELECT df_phase('build') AS types;
SELECT df_phase('insert') AS types;
SELECT df_phase('delete') AS types;
SELECT df_phase('update') AS types;
SELECT df_phase('abort') AS types;
SELECT 'VACUUM ' || string_agg(format('%I', 'df_t_' || tag), ', ' ORDER BY ord) FROM df_spec \gexec
SELECT df_phase('vacuum') AS types;
SELECT df_phase('reinsert') AS types;
SELECT df_phase('reindex') AS types;

-- mismatching probes per type and phase (all 0); every phase found every
-- row; pmhash_verify counted the keys; the plans were the forced ones; the
-- data had the intended shape
SELECT tag, idx,
       sum(mismatches) FILTER (WHERE phase = 'build') AS build,
       sum(mismatches) FILTER (WHERE phase = 'insert') AS insert,
       sum(mismatches) FILTER (WHERE phase = 'delete') AS delete,
       sum(mismatches) FILTER (WHERE phase = 'update') AS update,
       sum(mismatches) FILTER (WHERE phase = 'abort') AS abort,
       sum(mismatches) FILTER (WHERE phase = 'vacuum') AS vacuum,
       sum(mismatches) FILTER (WHERE phase = 'reinsert') AS reinsert,
       sum(mismatches) FILTER (WHERE phase = 'reindex') AS reindex,
       bool_and(ok) FILTER (WHERE mismatches IS NOT NULL) AS covered,
       bool_and(verified) AS verified,
       bool_and(ok) FILTER (WHERE phase = 'plans') AS plans,
       bool_and(ok) FILTER (WHERE phase = 'shape') AS shape
FROM df_result r JOIN df_spec s USING (tag)
GROUP BY tag, ord, idx
ORDER BY ord, idx;

-- every index of every type went through every phase, verified 5 times
SELECT count(*) AS checks, count(verified) AS verifications FROM df_result WHERE mismatches IS NOT NULL;

-- cleanup
DO $$
DECLARE s record;
BEGIN
  FOR s IN SELECT tag FROM df_spec LOOP
    EXECUTE format('DROP TABLE %I, %I, %I, %I', 'df_t_' || s.tag, 'df_i_p_' || s.tag,
                   'df_m_p_' || s.tag, 'df_u_p_' || s.tag);
  END LOOP;
END $$;
DROP FUNCTION df_phase, df_check, df_check_index, df_plan_ok, df_force, df_insert, df_partner,
  df_key;
DROP TABLE df_spec, df_result, df_found, df_index;
DROP TYPE df_color, df_rec;
DROP ROLE regress_pmhash_df_a, regress_pmhash_df_b;
