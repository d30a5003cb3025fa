-- test/bench/sql/am.sql: AM-level probes of index :idx (on t_:ds) through
-- pmhash_bench_probe, with the present keys of pp_:ds and the absent keys
-- of pa_:ds; one untimed warm-up pass of each, then :loops timed passes.
-- Checks the TID counts; prints RESULT lines in nanoseconds per probe.
SET client_min_messages = warning;
SELECT * FROM expect_:ds \gset
\set kp '(SELECT array_agg(k) FROM pp_' :ds ')'
\set ka '(SELECT array_agg(k) FROM pa_' :ds ')'
SELECT ns_per_probe AS ns, tids FROM pmhash_bench_probe(:'idx', :kp, 1) \gset
SELECT ns_per_probe AS ns, tids FROM pmhash_bench_probe(:'idx', :ka, 1) \gset
SELECT ns_per_probe AS ns, tids FROM pmhash_bench_probe(:'idx', :kp, :loops) \gset
-- Hash-based indexes may also return the TIDs of colliding hash codes: the
-- 32-bit hash of an int8 folds its halves first, so about 2 rows in 2^32
-- collide with a key (4.7% of the probes at 100M rows); the check allows
-- twice that, plus 1%.
SELECT n * 4.0 / 4294967296 + 0.01 AS collide FROM (SELECT count(*) AS n FROM t_:ds) c \gset
SELECT bench_assert(:tids >= :present_rows AND :tids <= :present_rows * (1 + :collide) + 10,
	format('present keys: pmhash_bench_probe(%s) returned %s TIDs, expected %s',
		   :'idx', :tids, :present_rows)) AS ok \gset
\echo RESULT am_present_ns :ns
SELECT ns_per_probe AS ns, tids FROM pmhash_bench_probe(:'idx', :ka, :loops) \gset
SELECT bench_assert(:tids <= :absent_probes * :collide + 10,
	format('absent keys: pmhash_bench_probe(%s) returned %s TIDs, expected about 0',
		   :'idx', :tids)) AS ok \gset
\echo RESULT am_absent_ns :ns
