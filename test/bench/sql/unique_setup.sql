-- test/bench/sql/unique_setup.sql: the extension and helper functions of
-- test/bench/unique.sh, in its benchmark database.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pmhash;
CREATE EXTENSION IF NOT EXISTS amcheck;

-- Raise an error with message "msg" unless "cond" holds.
CREATE OR REPLACE FUNCTION unique_assert(cond boolean, msg text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	IF cond IS NOT TRUE THEN
		RAISE EXCEPTION 'wrong result: %', msg;
	END IF;
END $$;

-- The plan of "query", as EXPLAIN (COSTS OFF) prints it.
CREATE OR REPLACE FUNCTION unique_plan(query text) RETURNS text
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

-- Raise an error unless the plan of "query" contains "pattern"; returns the plan.
CREATE OR REPLACE FUNCTION unique_plan_check(query text, pattern text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	plan text := unique_plan(query);
BEGIN
	IF position(pattern IN plan) = 0 THEN
		RAISE EXCEPTION 'wrong plan: the plan of "%" has no "%": %', query, pattern, plan;
	END IF;
	RETURN plan;
END $$;

-- Whether inserting the row of "id" of table "src" into table "tab" again,
-- without ON CONFLICT, fails with unique_violation (the key is in "tab"
-- already).  "cols" names the columns to copy.
CREATE OR REPLACE FUNCTION unique_rejects(tab regclass, src regclass, cols text, id int8)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('INSERT INTO %s (%s) SELECT %s FROM %s WHERE id = $1', tab, cols, cols, src)
		USING id;
	RETURN false;
EXCEPTION WHEN unique_violation THEN
	RETURN true;
END $$;
