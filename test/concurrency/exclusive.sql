-- pgbench, concurrency suite: claim a key of conc_claims (whose exclusion constraint, k WITH =, uses pmhash) and hold it a moment uncommitted; now and then release one
\set k random(1, 50)
\set release random(0, 1)
BEGIN;
INSERT INTO conc_claims VALUES (:k) ON CONFLICT DO NOTHING;
SELECT pg_sleep(0.005);
COMMIT;
DELETE FROM conc_claims WHERE k = :k AND :release = 0;
