-- pgbench, concurrency suite: delete one random row by id, and one found through the k index
\set k random(1, 2000)
DELETE FROM conc_rows WHERE id = (SELECT conc_random_id());
DELETE FROM conc_rows WHERE id = (SELECT id FROM conc_rows WHERE k = :k LIMIT 1);
