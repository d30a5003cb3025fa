-- test/bench/sql/dataset.sql: create one data set of the SQL-level benchmark.
-- Variables: ds (name), n (rows), m (rows of the insert test), p (probes),
-- keytype, keyexpr (a random key), absentexpr (a random candidate absent key),
-- grow (on: also the rows of the doubling insert test).
-- Tables: t_<ds>(id, k) with n random keys; ins_<ds>, m more rows with ids
-- above n; with grow, grow_<ds>, n more rows with ids above n + m (which
-- double the table); pp_<ds>, p keys of t_<ds> in random order (present probes);
-- pa_<ds>, p random keys that t_<ds> does not hold (absent probes);
-- expect_<ds>, what the probe joins must return.
SET client_min_messages = warning;
SET work_mem = '512MB';
SELECT setseed(0.42);
DROP TABLE IF EXISTS t_:ds, ins_:ds, grow_:ds, pp_:ds, pa_:ds, expect_:ds;
CREATE TABLE t_:ds (id int8 NOT NULL, k :keytype NOT NULL) WITH (autovacuum_enabled = off);
INSERT INTO t_:ds SELECT i, :keyexpr FROM generate_series(1, :n) i;
CREATE TABLE ins_:ds WITH (autovacuum_enabled = off) AS
	SELECT i::int8 AS id, :keyexpr AS k FROM generate_series(:n + 1, :n + :m) i;
\if :grow
CREATE TABLE grow_:ds WITH (autovacuum_enabled = off) AS
	SELECT i::int8 AS id, :keyexpr AS k FROM generate_series(:n + :m + 1, :n + :m + :n) i;
VACUUM ANALYZE grow_:ds;
\endif
CREATE TABLE pp_:ds WITH (autovacuum_enabled = off) AS
	SELECT k FROM t_:ds ORDER BY random() LIMIT :p;
CREATE TABLE pa_:ds WITH (autovacuum_enabled = off) AS
	SELECT a.k FROM (SELECT :absentexpr AS k FROM generate_series(1, :p)) a
	WHERE NOT EXISTS (SELECT FROM t_:ds t WHERE t.k = a.k)
	  AND NOT EXISTS (SELECT FROM ins_:ds i WHERE i.k = a.k);
CREATE TABLE expect_:ds AS
	SELECT (SELECT count(*) FROM pp_:ds) AS present_probes,
	       (SELECT count(*) FROM pa_:ds) AS absent_probes,
	       (SELECT count(*) FROM pp_:ds p JOIN t_:ds t ON t.k = p.k) AS present_rows,
	       (SELECT sum(t.id) FROM pp_:ds p JOIN t_:ds t ON t.k = p.k) AS present_idsum;
VACUUM ANALYZE t_:ds;
VACUUM ANALYZE ins_:ds;
VACUUM ANALYZE pp_:ds;
VACUUM ANALYZE pa_:ds;
SELECT present_probes, absent_probes, present_rows FROM expect_:ds \gset
\echo RESULT rows :n
\echo INFO :ds: :n rows of :keytype, :present_probes present probes (:present_rows rows), :absent_probes absent probes, :m rows to insert
