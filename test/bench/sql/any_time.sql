-- test/bench/sql/any_time.sql (from any.sql): run query :q once, check its
-- got_n and got_s against want_n and want_s (:label), then time it three
-- times and print "RESULT :metric <best time in ms>".
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
