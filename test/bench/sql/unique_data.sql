-- test/bench/sql/unique_data.sql: the keys of one key type of
-- test/bench/unique.sh.  Variables: kt (key type's name: int8, text or
-- uuid), keytype (its SQL type), keyexpr (the key of integer i), n (rows),
-- sample (keys to probe).  The key of row i is a function of i alone (an md5
-- of it, or its first 64 bits), so the pgbench scripts derive the key of a
-- drawn integer the same way.  Tables:
--   base_<kt>(id, k): rows 1..n, what each measurement's table starts with;
--   new_<kt>(id, k): rows n+1..2n, the rows the insert test adds;
--   sample_<kt>(id, k): sample ids drawn from 1..3n, with their keys: keys of
--     the table, keys an upsert run may have added, and keys of neither.
SET client_min_messages = warning;
SET work_mem = '512MB';
SELECT setseed(0.42) \gset
DROP TABLE IF EXISTS base_:kt, new_:kt, sample_:kt;
CREATE TABLE base_:kt WITH (autovacuum_enabled = off) AS
	SELECT i::int8 AS id, :keyexpr AS k FROM generate_series(1, :n) i;
CREATE TABLE new_:kt WITH (autovacuum_enabled = off) AS
	SELECT i::int8 AS id, :keyexpr AS k FROM generate_series(:n + 1, 2 * :n) i;
CREATE TABLE sample_:kt WITH (autovacuum_enabled = off) AS
	SELECT DISTINCT i, :keyexpr AS k
	FROM (SELECT (1 + floor(random() * 3 * :n))::int8 AS i FROM generate_series(1, :sample)) s;
ALTER TABLE sample_:kt RENAME i TO id;
SELECT unique_assert((SELECT count(DISTINCT k) FROM (SELECT k FROM base_:kt UNION ALL SELECT k FROM new_:kt) a) = 2 * :n,
	'the ' || 2 * :n || ' keys of ' || :'kt' || ' are not distinct') AS ok \gset
VACUUM ANALYZE base_:kt;
VACUUM ANALYZE new_:kt;
VACUUM ANALYZE sample_:kt;
SELECT count(*) AS sampled FROM sample_:kt \gset
\echo INFO keys :kt: :n rows of :keytype, :n more to insert, :sampled sample keys
