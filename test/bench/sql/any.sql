-- test/bench/sql/any.sql: "k = ANY(array)" through index :idx of t_:ds,
-- with an array of :kkeys keys, half present (from pp_:ds), half absent
-- (from pa_:ds): written into the query (a constant, whose recheck
-- PostgreSQL hashes), and as the parameter of a prepared statement's
-- generic plan (as ORMs send it).  With sequential scans off, the planner
-- picks an index scan or a bitmap scan (hash, without amsearcharray, only
-- the latter).  Checks the results against a hash join; one untimed run,
-- then the best of ten timed runs of each; RESULT lines in ms.
\ir any_keys.sql
SELECT count(*) AS want_n, coalesce(sum(t.id), 0) AS want_s
FROM t_:ds t WHERE t.k IN (SELECT unnest(:'arr'::text:::keytype[])) \gset
\set qc 'SELECT count(*) AS got_n, coalesce(sum(id), 0) AS got_s FROM t_' :ds ' WHERE k = ANY(' :'arr' '::' :keytype '[])'
SET plan_cache_mode = force_generic_plan;
PREPARE any_param(:keytype[]) AS
	SELECT count(*) AS got_n, coalesce(sum(id), 0) AS got_s FROM t_:ds WHERE k = ANY($1);
\set qp 'EXECUTE any_param(' :'arr' ')'
SET enable_seqscan = off;
SELECT CASE WHEN position('Bitmap' IN p) > 0 THEN 'bitmap scan' ELSE 'index scan' END AS scan_c,
	bench_assert(position(:'idx' IN p) > 0, 'the plan of k = ANY(constant) does not use ' || :'idx' || ': ' || left(p, 200))
FROM bench_plan(:'qc') p \gset
SELECT CASE WHEN position('Bitmap' IN p) > 0 THEN 'bitmap scan' ELSE 'index scan' END AS scan_p,
	bench_assert(position(:'idx' IN p) > 0 AND position('$1' IN p) > 0,
		'the generic plan of k = ANY($1) does not use ' || :'idx' || ': ' || left(p, 200))
FROM bench_plan(:'qp') p \gset
-- the array as a constant, then as a parameter
\set q :qc
\set label 'k = ANY(constant)'
\set metric any_const_k:kkeys''_ms
\set metric_exec any_const_k:kkeys''_exec_ms
\ir any_time.sql
\set q :qp
\set label 'k = ANY($1)'
\set metric any_param_k:kkeys''_ms
\set metric_exec any_param_k:kkeys''_exec_ms
\ir any_time.sql
\echo INFO k = ANY, :kkeys keys (:want_n rows): :scan_c with a constant, :scan_p with a parameter
DEALLOCATE any_param;
