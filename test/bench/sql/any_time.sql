-- test/bench/sql/any_time.sql (from any.sql): run query :q once, check its
-- got_n and got_s against want_n and want_s (:label), then time it ten
-- times (any_time_run.sql) and print "RESULT :metric <best time in ms>",
-- and "RESULT :metric_exec <ms>", the best of the eleven executions in the
-- server (pg_stat_statements' min_exec_time: no parsing, planning or
-- transfer of the query, which every index pays alike).  A statement of a
-- millisecond spends most of it outside the executor, whose time varies by
-- tens of percent from run to run: ten runs let the best of them show it.
SELECT pg_stat_statements_reset() IS NULL AS reset \gset
:q \gset
SELECT bench_check(:'label' || ' through ' || :'idx', :got_n, :got_s, :want_n, :want_s) AS ok \gset
SELECT 'infinity' AS ms \gset
\ir any_time_run.sql
\ir any_time_run.sql
\ir any_time_run.sql
\ir any_time_run.sql
\ir any_time_run.sql
\ir any_time_run.sql
\ir any_time_run.sql
\ir any_time_run.sql
\ir any_time_run.sql
\ir any_time_run.sql
\echo RESULT :metric :ms
SELECT min_exec_time AS exec_ms FROM pg_stat_statements
WHERE query LIKE '%= ANY(%' ORDER BY calls DESC LIMIT 1 \gset
\echo RESULT :metric_exec :exec_ms
