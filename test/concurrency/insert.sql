-- pgbench, concurrency suite: insert a batch of 10 rows with newly drawn keys (growth)
INSERT INTO conc_rows (k, t) SELECT conc_new_key(), conc_t(conc_new_key()) FROM generate_series(1, 10);
