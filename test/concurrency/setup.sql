-- test/concurrency/setup.sql: table, key generators and indexes of the concurrency suite.
-- ~50k rows; k and t each have a heavy value (5% of rows), NULLs (3%), a
-- dense range of keys with duplicates (some beyond the chain threshold) and
-- a sparse range of mostly unique keys.  The indexes start with few shards,
-- so that the workload has to grow and rebuild them.  Autovacuum is off for
-- the table (the suite runs VACUUM itself; a cancelled autovacuum would log
-- an ERROR), and every writing statement of the workload changes at most
-- one existing row, so that no deadlock can occur.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pmhash;
DROP TABLE IF EXISTS conc_rows;
DROP FUNCTION IF EXISTS conc_new_key(), conc_t(int8), conc_random_id(), conc_check(text, int8, int);

-- a key as the workload draws it: 0 is the heavy key, NULL is not indexed
CREATE FUNCTION conc_new_key() RETURNS int8 LANGUAGE sql VOLATILE AS $$
	SELECT CASE WHEN r < 0.05 THEN 0
				WHEN r < 0.08 THEN NULL
				WHEN r < 0.50 THEN 1 + floor(random() * 2000)::int8
				ELSE 1 + floor(random() * 200000)::int8 END
	FROM (SELECT random() AS r) s
$$;

-- the text value of key n (of varying length); conc_t(0) is the heavy one
CREATE FUNCTION conc_t(n int8) RETURNS text LANGUAGE sql IMMUTABLE STRICT AS $$
	SELECT 'v' || n || repeat('-', (n % 37)::int)
$$;

CREATE TABLE conc_rows (id bigserial PRIMARY KEY, k int8, t text, n int NOT NULL DEFAULT 0)
	WITH (fillfactor = 80, autovacuum_enabled = false);
INSERT INTO conc_rows (k, t) SELECT conc_new_key(), conc_t(conc_new_key())
FROM generate_series(1, 50000);
CREATE INDEX conc_rows_k ON conc_rows USING pmhash (k) WITH (shards = 4);
CREATE INDEX conc_rows_t ON conc_rows USING pmhash (t) WITH (shards = 2);
ANALYZE conc_rows;

-- an id between 1 and the last one handed out (the row may be gone)
CREATE FUNCTION conc_random_id() RETURNS int8 LANGUAGE sql VOLATILE AS $$
	SELECT 1 + floor(random() * last_value)::int8 FROM conc_rows_id_seq
$$;

-- Within one snapshot (the caller's REPEATABLE READ transaction), the rows
-- with col = conc_t(v) or col = v found by an index scan, a bitmap scan and
-- a seqscan must be the same; raises an error naming the difference.  With
-- width > 0 the condition is col = ANY of the width keys from v on instead
-- (conc_t of them for t), whose codes the scans look up in batches.
CREATE FUNCTION conc_check(col text, v int8, width int DEFAULT 0) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	keys int8[] := ARRAY(SELECT generate_series(v, v + width - 1));
	tkeys text[] := ARRAY(SELECT conc_t(x) FROM unnest(keys) x);
	q text := format('SELECT array_agg(id ORDER BY id) FROM conc_rows WHERE %I = %s', col,
					 CASE WHEN width > 0 AND col = 't' THEN 'ANY($3)'
						  WHEN width > 0 THEN 'ANY($2)'
						  WHEN col = 't' THEN 'conc_t($1)' ELSE '$1' END);
	by_index int8[];
	by_bitmap int8[];
	by_seq int8[];
BEGIN
	PERFORM set_config('enable_seqscan', 'off', true);
	PERFORM set_config('enable_bitmapscan', 'off', true);
	PERFORM set_config('enable_indexscan', 'on', true);
	EXECUTE q INTO by_index USING v, keys, tkeys;
	PERFORM set_config('enable_indexscan', 'off', true);
	PERFORM set_config('enable_bitmapscan', 'on', true);
	EXECUTE q INTO by_bitmap USING v, keys, tkeys;
	PERFORM set_config('enable_bitmapscan', 'off', true);
	PERFORM set_config('enable_seqscan', 'on', true);
	EXECUTE q INTO by_seq USING v, keys, tkeys;
	IF by_index IS DISTINCT FROM by_seq OR by_bitmap IS DISTINCT FROM by_seq THEN
		RAISE EXCEPTION 'conc_check: % = % (key %, width %) differs: index scan %, bitmap scan %, seqscan %',
			col, CASE col WHEN 't' THEN conc_t(v)::text ELSE v::text END, v, width,
			by_index, by_bitmap, by_seq;
	END IF;
END $$;
