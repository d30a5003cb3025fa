-- test/bench/sql/nested_loop.sql: plan settings that make a join probe the
-- inner table's index once per outer row (a plain nested loop, no parallelism).
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SET enable_memoize = off;
SET enable_material = off;
SET jit = off;
SET max_parallel_workers_per_gather = 0;
