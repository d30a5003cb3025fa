-- test/bench/sql/unique_upsert_uuid.sql: pgbench script of test/bench/unique.sh,
-- upsert of a uuid key: the md5 of an integer drawn uniformly from
-- 1..2 * size (pgbench -D size=<rows of the table>) as a uuid, as in base_uuid.
\set r random(1, 2 * :size)
\set v random(1, 1000000000)
INSERT INTO u (id, k, v) VALUES (:r, md5(:r::text)::uuid, :v)
	ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v, n = u.n + 1;
