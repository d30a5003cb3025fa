-- test/bench/sql/unique_upsert_text.sql: pgbench script of test/bench/unique.sh,
-- upsert of a text key: the md5 of an integer drawn uniformly from
-- 1..2 * size (pgbench -D size=<rows of the table>), as in base_text.
\set r random(1, 2 * :size)
\set v random(1, 1000000000)
INSERT INTO u (id, k, v) VALUES (:r, md5(:r::text), :v)
	ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v, n = u.n + 1;
