-- test/bench/sql/unique_bound_text.sql: pgbench script of test/bench/unique.sh,
-- the bound of the text upserts: the same statement into the same table with
-- no index and no ON CONFLICT, so every transaction inserts a row and no
-- index costs anything.  The tps of an upsert with any arbiter index stays
-- below this (an update of an existing row costs about what an insert does).
\set r random(1, 2 * :size)
\set v random(1, 1000000000)
INSERT INTO u (id, k, v) VALUES (:r, md5(:r::text), :v);
