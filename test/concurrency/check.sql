-- pgbench, concurrency suite: index scan, bitmap scan and seqscan agree within one snapshot, on one key and on an array of 150 (conc_check raises otherwise)
\set h random(0, 9)
\set k random(1, 2000)
\set k case when :h = 0 then 0 else :k end
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT conc_check('k', :k);
SELECT conc_check('t', :k);
SELECT conc_check('k', :k, 150);
SELECT conc_check('t', :k, 150);
COMMIT;
