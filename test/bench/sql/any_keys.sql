-- test/bench/sql/any_keys.sql (from any.sql and any_tid.sql): the session
-- settings of the "k = ANY(array)" timings, and in :arr the array of :kkeys
-- keys of t_:ds, half present (from pp_:ds), half absent (from pa_:ds).
SET client_min_messages = warning;
SET jit = off;
SET max_parallel_workers_per_gather = 0;
SELECT array_agg(k)::text AS arr FROM (
	(SELECT k FROM pp_:ds LIMIT :kkeys / 2)
	UNION ALL
	(SELECT k FROM pa_:ds LIMIT :kkeys - :kkeys / 2)) s \gset
