--
-- Unique pmhash indexes: CREATE UNIQUE INDEX, the duplicate errors,
-- NULLs, builds over duplicates, dead and HOT-updated rows, keys that
-- share a hash code, and INSERT ... ON CONFLICT with a pmhash arbiter,
-- each checked against the same statements on a unique btree index.
CREATE EXTENSION IF NOT EXISTS pmhash;
SET jit = off;

-- SQLSTATE of the error a statement raises, or 'ok'
CREATE FUNCTION un_state(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE stmt;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE;
END $$;

-- a pmhash table and a btree twin take the same statements
CREATE TABLE un_p (id serial, k int8, v text);
CREATE TABLE un_b (id serial, k int8, v text);
INSERT INTO un_p (k, v) SELECT i, 'v' || i FROM generate_series(1, 5000) i;
INSERT INTO un_b (k, v) SELECT i, 'v' || i FROM generate_series(1, 5000) i;
CREATE UNIQUE INDEX un_p_k ON un_p USING pmhash (k);
CREATE UNIQUE INDEX un_b_k ON un_b USING btree (k);
SELECT indisunique FROM pg_index WHERE indexrelid = 'un_p_k'::regclass;

-- the statement runs on both tables; the outcomes must be equal
CREATE FUNCTION un_both(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE p text; b text;
BEGIN
  p := un_state(replace(stmt, 'un_x', 'un_p'));
  b := un_state(replace(stmt, 'un_x', 'un_b'));
  IF p <> b THEN
    RETURN 'pmhash ' || p || ' but btree ' || b;
  END IF;
  RETURN p;
END $$;
-- rows of the two tables, compared by (k, v)
CREATE FUNCTION un_same() RETURNS boolean LANGUAGE sql AS $$
  SELECT NOT EXISTS (SELECT k, v FROM un_p EXCEPT ALL SELECT k, v FROM un_b)
     AND NOT EXISTS (SELECT k, v FROM un_b EXCEPT ALL SELECT k, v FROM un_p)
$$;

-- a duplicate: btree's message, detail and SQLSTATE
INSERT INTO un_p (k, v) VALUES (42, 'dup');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO un_b (k, v) VALUES (42, 'dup');
SELECT un_both($$INSERT INTO un_x (k, v) VALUES (42, 'dup')$$);
SELECT un_both($$INSERT INTO un_x (k, v) VALUES (5001, 'new')$$);
-- a duplicate within one statement
SELECT un_both($$INSERT INTO un_x (k, v) VALUES (6000, 'a'), (6000, 'b')$$);
-- NULLs are not indexed: any number of them
SELECT un_both($$INSERT INTO un_x (k, v) VALUES (NULL, 'n1'), (NULL, 'n2'), (NULL, 'n3')$$);
-- an UPDATE onto an existing key; an UPDATE keeping the key (HOT); a key change
SELECT un_both($$UPDATE un_x SET k = 7 WHERE k = 8$$);
SELECT un_both($$UPDATE un_x SET v = 'hot' WHERE k = 9$$);
SELECT un_both($$UPDATE un_x SET k = 100009 WHERE k = 10$$);
SELECT un_both($$INSERT INTO un_x (k, v) VALUES (10, 'reused')$$);
-- delete then insert in one transaction; insert twice in one transaction
SELECT un_both($$DO 'BEGIN DELETE FROM un_x WHERE k = 11; INSERT INTO un_x (k, v) VALUES (11, ''again''); END'$$);
SELECT un_both($$DO 'BEGIN INSERT INTO un_x (k, v) VALUES (7000, ''a''); INSERT INTO un_x (k, v) VALUES (7000, ''b''); END'$$);
-- a duplicate inserted in a subtransaction that rolled back does not count
BEGIN;
SAVEPOINT s;
INSERT INTO un_p (k, v) VALUES (8000, 'in savepoint');
ROLLBACK TO SAVEPOINT s;
INSERT INTO un_p (k, v) VALUES (8000, 'after rollback');
COMMIT;
INSERT INTO un_b (k, v) VALUES (8000, 'after rollback');
-- rows deleted by a committed transaction do not conflict
DELETE FROM un_p WHERE k BETWEEN 20 AND 29;
DELETE FROM un_b WHERE k BETWEEN 20 AND 29;
SELECT un_both($$INSERT INTO un_x (k, v) SELECT i, 'refill' FROM generate_series(20, 29) i$$);
-- COPY with a duplicate
SELECT un_both($$COPY un_x (k, v) FROM PROGRAM 'printf "9001\\ta\\n9001\\tb\\n"'$$);
SELECT un_same();

-- int8 keys whose hash codes are equal: 0 and 2^32 + 1 hash alike
SELECT hashint8(0) = hashint8(4294967297) AS same_hash;
SELECT un_both($$INSERT INTO un_x (k, v) VALUES (0, 'zero'), (4294967297, 'twin')$$);
SELECT un_both($$INSERT INTO un_x (k, v) VALUES (4294967297, 'dup twin')$$);
SELECT un_both($$INSERT INTO un_x (k, v) VALUES (0, 'dup zero')$$);
SELECT un_both($$INSERT INTO un_x (k, v) VALUES (8589934594, 'third of the hash')$$);
SELECT un_same();

--
-- Builds
--
-- over duplicates: 23505 naming a key; no index, no file left
CREATE TABLE un_build (k int8, t text);
INSERT INTO un_build SELECT i, 't' || i FROM generate_series(1, 3000) i;
INSERT INTO un_build VALUES (1234, 'dup'), (NULL, 'n'), (NULL, 'n');
CREATE UNIQUE INDEX un_build_k ON un_build USING pmhash (k);
\echo :LAST_ERROR_SQLSTATE
CREATE UNIQUE INDEX un_build_t ON un_build USING pmhash (t);
-- duplicates of one hash code but different keys build
INSERT INTO un_build VALUES (4294967297, 'h1'), (0, 'h2');
DELETE FROM un_build WHERE t = 'dup';
CREATE UNIQUE INDEX un_build_k ON un_build USING pmhash (k);
-- by-reference keys of one hash code, computed by an expression: distinct
-- ones build, equal ones do not ({0} and {4294967297} hash alike)
SELECT hash_array(ARRAY[0::int8]) = hash_array(ARRAY[4294967297]) AS same_hash;
CREATE TABLE un_arr (k int8);
INSERT INTO un_arr VALUES (0), (4294967297), (5);
CREATE UNIQUE INDEX un_arr_k ON un_arr USING pmhash ((ARRAY[k]));
DROP INDEX un_arr_k;
INSERT INTO un_arr VALUES (4294967297);
CREATE UNIQUE INDEX un_arr_k ON un_arr USING pmhash ((ARRAY[k]));
-- a deleted duplicate and a HOT-updated row do not count
DROP INDEX un_build_k;
INSERT INTO un_build VALUES (77, 'dup');
DELETE FROM un_build WHERE t = 'dup';
UPDATE un_build SET t = t || '+' WHERE k = 78;
CREATE UNIQUE INDEX un_build_k ON un_build USING pmhash (k);
SELECT un_state($$INSERT INTO un_build VALUES (77, 'x')$$);
SELECT un_state($$INSERT INTO un_build VALUES (78, 'x')$$);
-- REINDEX and REINDEX CONCURRENTLY keep it unique
REINDEX INDEX un_build_k;
SELECT un_state($$INSERT INTO un_build VALUES (79, 'x')$$);
REINDEX INDEX CONCURRENTLY un_build_k;
SELECT un_state($$INSERT INTO un_build VALUES (80, 'x')$$);
SELECT pmhash_verify('un_build_k');
-- CREATE UNIQUE INDEX CONCURRENTLY over duplicates leaves an invalid index
INSERT INTO un_build VALUES (NULL, 'dup'), (NULL, 'dup');
CREATE UNIQUE INDEX CONCURRENTLY un_build_t ON un_build USING pmhash (t);
SELECT indisvalid FROM pg_index WHERE indexrelid = 'un_build_t'::regclass;
DROP INDEX un_build_t;
DELETE FROM un_build WHERE t IN ('dup', 'n');
CREATE UNIQUE INDEX CONCURRENTLY un_build_t ON un_build USING pmhash (t);
SELECT indisvalid FROM pg_index WHERE indexrelid = 'un_build_t'::regclass;
SELECT un_state($$INSERT INTO un_build VALUES (NULL, 't5')$$);
-- NULLS NOT DISTINCT is refused
CREATE UNIQUE INDEX un_build_nnd ON un_build USING pmhash (k) NULLS NOT DISTINCT;
-- what PostgreSQL reserves for btree: constraints, and partitioned unique
-- indexes before 18 (15 to 17 match a partition key to btree's equality
-- only; 18 asks the index's access method: pmhash's amtranslatecmptype)
ALTER TABLE un_build ADD CONSTRAINT un_build_c UNIQUE USING INDEX un_build_k;
CREATE TABLE un_parted (k int8, v text) PARTITION BY HASH (k);
SELECT un_state($$CREATE UNIQUE INDEX un_parted_k ON un_parted USING pmhash (k)$$)
       = CASE WHEN current_setting('server_version_num')::int >= 180000 THEN 'ok' ELSE '0A000' END
       AS as_the_version_allows;

-- text keys, an expression index and a partial index
CREATE TABLE un_text (id serial, email text, active bool, code text);
CREATE UNIQUE INDEX un_text_email ON un_text USING pmhash (lower(email));
CREATE UNIQUE INDEX un_text_code ON un_text USING pmhash (code) WHERE active;
INSERT INTO un_text (email, active, code) VALUES ('Ann@example.org', true, 'c1'), ('bob@example.org', false, 'c1');
INSERT INTO un_text (email, active, code) VALUES ('ANN@example.org', false, 'c2');
INSERT INTO un_text (email, active, code) VALUES ('cy@example.org', true, 'c1');
INSERT INTO un_text (email, active, code) VALUES ('cy@example.org', false, 'c1');
-- a long, compressed key
SELECT un_state($$INSERT INTO un_text (email) VALUES (repeat('long', 2000))$$);
SELECT un_state($$INSERT INTO un_text (email) VALUES (repeat('LONG', 2000))$$);

--
-- INSERT ... ON CONFLICT
--
SELECT un_both($$INSERT INTO un_x (k, v) VALUES (42, 'nothing') ON CONFLICT (k) DO NOTHING$$);
SELECT un_both($$INSERT INTO un_x (k, v) VALUES (42, 'nothing') ON CONFLICT DO NOTHING$$);
SELECT un_both($$INSERT INTO un_x (k, v) VALUES (42, 'updated') ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v$$);
SELECT un_both($$INSERT INTO un_x (k, v) VALUES (43, 'not updated') ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v WHERE un_x.v = 'never'$$);
SELECT un_both($$INSERT INTO un_x (k, v) SELECT i, 'batch' FROM generate_series(4990, 5010) i ON CONFLICT (k) DO UPDATE SET v = un_x.v || '+' || EXCLUDED.v$$);
SELECT un_both($$INSERT INTO un_x (k, v) VALUES (44, 'a'), (44, 'b') ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v$$);
SELECT un_both($$INSERT INTO un_x (k, v) VALUES (NULL, 'null key') ON CONFLICT (k) DO NOTHING$$);
SELECT un_both($$INSERT INTO un_x (k, v) VALUES (0, 'hash twin') ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v$$);
SELECT un_same();
INSERT INTO un_p (k, v) VALUES (45, 'r') ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v RETURNING k, v;
INSERT INTO un_p (k, v) VALUES (9999999, 'r') ON CONFLICT (k) DO NOTHING RETURNING k, v;
EXPLAIN (COSTS OFF) INSERT INTO un_p (k, v) VALUES (1, 'x') ON CONFLICT (k) DO NOTHING;
-- a data-modifying CTE
WITH ins AS (INSERT INTO un_p (k, v) VALUES (46, 'cte'), (9999998, 'cte')
             ON CONFLICT (k) DO NOTHING RETURNING k)
SELECT count(*) FROM ins;
-- inference from an expression and from a partial index's predicate
INSERT INTO un_text (email, active, code) VALUES ('ann@EXAMPLE.org', true, 'c9')
  ON CONFLICT (lower(email)) DO UPDATE SET code = 'ann again' RETURNING email, code;
INSERT INTO un_text (email, active, code) VALUES ('dee@example.org', true, 'c1')
  ON CONFLICT (code) WHERE active DO UPDATE SET email = EXCLUDED.email RETURNING email, code;
-- no unique index of the columns: the usual error
INSERT INTO un_text (email) VALUES ('x') ON CONFLICT (email) DO NOTHING;
-- a unique pmhash index that is not the arbiter is still enforced
CREATE TABLE un_two (a int8, b int8);
CREATE UNIQUE INDEX un_two_a ON un_two USING btree (a);
CREATE UNIQUE INDEX un_two_b ON un_two USING pmhash (b);
INSERT INTO un_two VALUES (1, 1), (2, 2);
INSERT INTO un_two VALUES (1, 3) ON CONFLICT (a) DO NOTHING;
INSERT INTO un_two VALUES (3, 1) ON CONFLICT (a) DO NOTHING;
INSERT INTO un_two VALUES (3, 1) ON CONFLICT DO NOTHING;
INSERT INTO un_two VALUES (3, 2) ON CONFLICT (b) DO UPDATE SET a = un_two.a + 10;
SELECT * FROM un_two ORDER BY a;

-- prepared statements past the switch to a generic plan, across an index
-- change that invalidates the cached plan and the relcache
PREPARE un_up (int8, text) AS
  INSERT INTO un_p (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = un_p.v || EXCLUDED.v;
EXECUTE un_up(47, '1'); EXECUTE un_up(47, '2'); EXECUTE un_up(47, '3');
EXECUTE un_up(47, '4'); EXECUTE un_up(47, '5'); EXECUTE un_up(47, '6');
ALTER INDEX un_p_k SET (fillfactor = 60);
EXECUTE un_up(47, '7');
CREATE INDEX un_p_v ON un_p USING pmhash (v);
EXECUTE un_up(47, '8');
EXECUTE un_up(48, 'v47');
DROP INDEX un_p_v;
SELECT v FROM un_p WHERE k = 47;
-- upserts in PL/pgSQL, with errors caught in subtransactions
CREATE FUNCTION un_upsert_loop(n int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE caught int := 0;
BEGIN
  FOR i IN 1..n LOOP
    INSERT INTO un_p (k, v) VALUES (100 + i % 7, 'loop') ON CONFLICT (k) DO UPDATE SET v = 'loop';
    BEGIN
      INSERT INTO un_p (k, v) VALUES (100 + i % 7, 'dup');
    EXCEPTION WHEN unique_violation THEN
      caught := caught + 1;
    END;
  END LOOP;
  RETURN caught;
END $$;
SELECT un_upsert_loop(50);

-- a conflict target that names an operator class: PostgreSQL looks the name
-- up among btree's classes, so it can match a btree index only (README,
-- Limitations)
SELECT un_state($$INSERT INTO un_p (k, v) VALUES (7, 'x') ON CONFLICT (k int8_ops) DO NOTHING$$) AS pmhash_named_opclass,
       un_state($$INSERT INTO un_b (k, v) VALUES (7, 'x') ON CONFLICT (k int8_ops) DO NOTHING$$) AS btree_named_opclass;

-- no key twice, by index scans and by a seqscan
SET enable_seqscan = off;
SELECT count(*) FROM generate_series(-5, 10000) g
  WHERE (SELECT count(*) FROM un_p WHERE k = g) > 1;
RESET enable_seqscan;
SET enable_indexscan = off;
SET enable_bitmapscan = off;
SELECT k, count(*) FROM un_p WHERE k IS NOT NULL GROUP BY k HAVING count(*) > 1;
SELECT count(*) FILTER (WHERE k IS NOT NULL) FROM un_p;
RESET enable_indexscan;
RESET enable_bitmapscan;
-- every entry sound, one per row once VACUUM removed the dead ones
VACUUM un_p, un_text;
SELECT pmhash_verify('un_p_k') = (SELECT count(k) FROM un_p) AS p_k,
       pmhash_verify('un_text_email') = (SELECT count(email) FROM un_text) AS email,
       pmhash_verify('un_text_code') = (SELECT count(code) FROM un_text WHERE active) AS code;

DROP TABLE un_p, un_b, un_build, un_arr, un_parted, un_text, un_two;
DROP FUNCTION un_state(text), un_both(text), un_same(), un_upsert_loop(int);
