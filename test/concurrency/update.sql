-- pgbench, concurrency suite: change k, t, or only the unindexed n (HOT) of single rows
\set k random(1, 200000)
UPDATE conc_rows SET k = conc_new_key() WHERE id = (SELECT conc_random_id());
UPDATE conc_rows SET t = conc_t(conc_new_key()), n = n + 1 WHERE id = (SELECT conc_random_id());
UPDATE conc_rows SET n = n + 1 WHERE id = (SELECT conc_random_id());
UPDATE conc_rows SET k = conc_new_key() WHERE id = (SELECT id FROM conc_rows WHERE t = conc_t(:k) LIMIT 1);
