-- test/bench/sql/serializable.sql: pgbench script of test/bench/serializable.sh.
-- One SERIALIZABLE transaction: count the rows of key :a (an index scan of
-- s, which the search_path points at the AM's schema), insert a row with
-- key :b; keys from 1..2 * size (pgbench -D size=<rows of the table>).
\set a random(1, 2 * :size)
\set b random(1, 2 * :size)
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT count(*) FROM s WHERE k = :a;
INSERT INTO s VALUES (:b, 1);
COMMIT;
