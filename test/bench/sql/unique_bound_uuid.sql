-- test/bench/sql/unique_bound_uuid.sql: pgbench script of test/bench/unique.sh,
-- the bound of the uuid upserts: the heap work of an upsert without an index.
-- A key of the table's first size rows is updated through its row's TID,
-- which the table's layout gives (pgbench -D tpp=<tuples per page>, checked
-- by unique_upsert_prepare.sql); a key above them is inserted.  No index is
-- probed or maintained and no ON CONFLICT runs, so an upsert through any
-- arbiter index does all of this and more: its tps stays below this.  A row
-- updated twice in one run is not found the second time (its TID holds a
-- dead version): that transaction does even less.
\set r random(1, 2 * :size)
\set v random(1, 1000000000)
\if :r <= :size
UPDATE u SET v = :v, n = n + 1
	WHERE ctid = format('(%s,%s)', (:r - 1) / :tpp, (:r - 1) % :tpp + 1)::tid;
\else
INSERT INTO u (id, k, v) VALUES (:r, md5(:r::text)::uuid, :v);
\endif
