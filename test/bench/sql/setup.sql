-- test/bench/sql/setup.sql: the benchmark database's extensions and helper functions.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pmhash;
CREATE EXTENSION IF NOT EXISTS pmhash_bench;
CREATE EXTENSION IF NOT EXISTS pg_prewarm;

-- Size of an index in bytes: all its forks, plus its file for a pmhash index.
CREATE OR REPLACE FUNCTION bench_index_bytes(idx regclass) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	am name;
	bytes bigint := pg_total_relation_size(idx);
BEGIN
	SELECT a.amname INTO am FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE c.oid = idx;
	IF am = 'pmhash' THEN
		bytes := bytes + (SELECT file_bytes FROM pmhash_stats(idx));
	END IF;
	RETURN bytes;
END $$;

-- Raise an error unless a probe join returned the expected row count and id sum.
CREATE OR REPLACE FUNCTION bench_check(label text, got_n bigint, got_sum numeric,
									   exp_n bigint, exp_sum numeric) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	IF got_n IS DISTINCT FROM exp_n OR coalesce(got_sum, 0) <> coalesce(exp_sum, 0) THEN
		RAISE EXCEPTION 'wrong result: % returned % rows (id sum %), expected % rows (id sum %)',
			label, got_n, got_sum, exp_n, exp_sum;
	END IF;
END $$;

-- The plan of "query", as EXPLAIN (COSTS OFF) prints it.
CREATE OR REPLACE FUNCTION bench_plan(query text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	line text;
	plan text := '';
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
		plan := plan || line || E'\n';
	END LOOP;
	RETURN plan;
END $$;

-- Raise an error unless the plan of "query" scans index "idx" (as an index
-- scan, inside a nested loop if "nested" is set); returns the plan.
CREATE OR REPLACE FUNCTION bench_plan_check(query text, idx text, nested boolean) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	plan text := bench_plan(query);
BEGIN
	IF position('Index Scan using ' || idx || ' ' IN plan) = 0
	   OR (nested AND position('Nested Loop' IN plan) = 0) THEN
		RAISE EXCEPTION 'the plan of "%" does not probe index %: %', query, idx, plan;
	END IF;
	RETURN plan;
END $$;

-- Raise an error with message "msg" unless "cond" holds.
CREATE OR REPLACE FUNCTION bench_assert(cond boolean, msg text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	IF cond IS NOT TRUE THEN
		RAISE EXCEPTION 'wrong result: %', msg;
	END IF;
END $$;
