-- test/bench/sql/any_time_run.sql (from any_time.sql): one timed run of
-- query :q; :ms becomes the least time in ms of the runs so far.
SELECT clock_timestamp() AS t0 \gset
:q \gset
SELECT least(:'ms'::float8, extract(epoch FROM clock_timestamp() - :'t0') * 1000) AS ms \gset
