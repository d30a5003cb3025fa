-- test/bench/sql/probe.sql: nested-loop probes of index :idx on t_:ds, with
-- the present keys of pp_:ds and the absent keys of pa_:ds in random order.
-- Checks the plan and the results; one untimed warm-up pass, then one timed
-- pass of each; prints RESULT lines in microseconds per probe.
SET client_min_messages = warning;
\ir nested_loop.sql
\set qp 'SELECT count(*) AS got_n, coalesce(sum(t.id), 0) AS got_s FROM pp_' :ds ' p JOIN t_' :ds ' t ON t.k = p.k'
\set qa 'SELECT count(*) AS got_n, coalesce(sum(t.id), 0) AS got_s FROM pa_' :ds ' p JOIN t_' :ds ' t ON t.k = p.k'
SELECT * FROM expect_:ds \gset
SELECT bench_plan_check(:'qp', :'idx', true) AS plan \gset
SELECT bench_plan_check(:'qa', :'idx', true) AS plan \gset
-- warm-up
:qp \gset
:qa \gset
-- present keys
SELECT extract(epoch FROM clock_timestamp()) AS t0 \gset
:qp \gset
SELECT (extract(epoch FROM clock_timestamp()) - :t0) * 1e6 / :present_probes AS us \gset
SELECT bench_check('present-key probes of ' || :'idx', :got_n, :got_s, :present_rows, :present_idsum) AS ok \gset
\echo RESULT probe_present_us :us
-- absent keys
SELECT extract(epoch FROM clock_timestamp()) AS t0 \gset
:qa \gset
SELECT (extract(epoch FROM clock_timestamp()) - :t0) * 1e6 / :absent_probes AS us \gset
SELECT bench_check('absent-key probes of ' || :'idx', :got_n, :got_s, 0, 0) AS ok \gset
\echo RESULT probe_absent_us :us
