-- test/bench/sql/unique_upsert_prepare.sql: the table of one upsert run of
-- test/bench/unique.sh.  Variables: am (pmhash or btree), kt, keytype (key
-- type and its SQL type).  (Re)creates up_<am>.u(id, k, v, n) with the rows
-- of base_<kt> (v = id, n = 0) and a unique index u_k on k using am (none:
-- no index, for the bound), checks that an upsert into it uses the index as
-- its arbiter, vacuums and checkpoints, so that every run starts from the
-- same state.
SET client_min_messages = warning;
CREATE SCHEMA IF NOT EXISTS up_:am;
SET search_path = up_:am, public;
DROP TABLE IF EXISTS u;
CREATE TABLE u (id int8 NOT NULL, k :keytype NOT NULL, v int8 NOT NULL, n int4 NOT NULL DEFAULT 0)
	WITH (autovacuum_enabled = off);
INSERT INTO u SELECT id, k, id, 0 FROM base_:kt;
SELECT :'am' <> 'none' AS has_index \gset
\if :has_index
CREATE UNIQUE INDEX u_k ON u USING :am (k);
\endif
VACUUM ANALYZE u;
\if :has_index
SELECT unique_plan_check('INSERT INTO u (id, k, v) SELECT id, k, 1 FROM base_' || :'kt' ||
	' WHERE id = 1 ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v, n = u.n + 1',
	'Conflict Arbiter Indexes: u_k') AS plan \gset
\endif
CHECKPOINT;
