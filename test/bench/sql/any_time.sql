-- test/bench/sql/any_time.sql (from any.sql): run query :q once, check its
-- got_n and got_s against want_n and want_s (:label), then time it three
-- times and print "RESULT :metric <best time in ms>", and "RESULT
-- :metric_exec <ms>", the best of the four executions in the server
-- (pg_stat_statements' min_exec_time: no parsing, planning or transfer of
-- the query, which every index pays alike).
SELECT pg_stat_statements_reset() IS NULL AS reset \gset
:q \gset
SELECT bench_check(:'label' || ' through ' || :'idx', :got_n, :got_s, :want_n, :want_s) AS ok \gset
SELECT clock_timestamp() AS t0 \gset
:q \gset
SELECT extract(epoch FROM clock_timestamp() - :'t0') * 1000 AS c1, clock_timestamp() AS t0 \gset
:q \gset
SELECT extract(epoch FROM clock_timestamp() - :'t0') * 1000 AS c2, clock_timestamp() AS t0 \gset
:q \gset
SELECT least(:c1, :c2, extract(epoch FROM clock_timestamp() - :'t0') * 1000) AS ms \gset
\echo RESULT :metric :ms
SELECT min_exec_time AS exec_ms FROM pg_stat_statements
WHERE query LIKE '%= ANY(%' ORDER BY calls DESC LIMIT 1 \gset
\echo RESULT :metric_exec :exec_ms
