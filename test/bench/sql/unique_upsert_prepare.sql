-- test/bench/sql/unique_upsert_prepare.sql: the table of one upsert run of
-- test/bench/unique.sh.  Variables: am (pmhash or btree), kt, keytype (key
-- type and its SQL type).  (Re)creates up_<am>.u(id, k, v, n) with the rows
-- of base_<kt> in id order (v = id, n = 0) and a unique index u_k on k
-- using am, checks that an upsert into it uses the index as its arbiter,
-- vacuums and checkpoints, so that every run starts from the same state.
-- With am none (the bound: no index), checks instead that row id sits at
-- TID ((id - 1) / tpp, (id - 1) % tpp + 1), where tpp is the number of rows
-- of the first page, and prints RESULT tuples_per_page tpp.
SET client_min_messages = warning;
CREATE SCHEMA IF NOT EXISTS up_:am;
SET search_path = up_:am, public;
DROP TABLE IF EXISTS u;
CREATE TABLE u (id int8 NOT NULL, k :keytype NOT NULL, v int8 NOT NULL, n int4 NOT NULL DEFAULT 0)
	WITH (autovacuum_enabled = off);
INSERT INTO u SELECT id, k, id, 0 FROM base_:kt ORDER BY id;
SELECT :'am' <> 'none' AS has_index \gset
\if :has_index
CREATE UNIQUE INDEX u_k ON u USING :am (k);
\endif
VACUUM ANALYZE u;
\if :has_index
SELECT unique_plan_check('INSERT INTO u (id, k, v) SELECT id, k, 1 FROM base_' || :'kt' ||
	' WHERE id = 1 ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v, n = u.n + 1',
	'Conflict Arbiter Indexes: u_k') AS plan \gset
\else
SELECT count(*) AS tpp FROM u WHERE ctid >= '(0,0)' AND ctid < '(1,0)' \gset
SELECT count(*) AS misplaced FROM u
	WHERE ctid <> format('(%s,%s)', (id - 1) / :tpp, (id - 1) % :tpp + 1)::tid \gset
SELECT unique_assert(:misplaced = 0, format('up_none.u: %s rows are not where %s rows per page put them',
	:misplaced, :tpp)) AS ok \gset
\echo RESULT tuples_per_page :tpp
\endif
CHECKPOINT;
