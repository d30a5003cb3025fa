-- Inserts are queued per index and applied in batches of 256.  Queued
-- entries must be found by the transaction's own scans (index and bitmap,
-- also from triggers in the middle of a statement, and from parallel
-- workers), counted by pmhash_stats and pmhash_verify, survive PREPARE
-- TRANSACTION, vanish with a rollback of their transaction or
-- subtransaction, and never outlive the storage they were queued for
-- (TRUNCATE, REINDEX in the same transaction).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pmhash;
RESET client_min_messages;

CREATE TABLE bq (id int, k int);
CREATE INDEX bq_k ON bq USING pmhash (k);

-- rows with k = v found by a scan of one kind: index, bitmap or seq (the
-- SET clauses restore the planner settings when the function returns)
CREATE FUNCTION bq_by(scan text, tab regclass, v int) RETURNS bigint LANGUAGE plpgsql
SET enable_seqscan FROM CURRENT SET enable_bitmapscan FROM CURRENT
SET enable_indexscan FROM CURRENT AS $$
DECLARE n bigint;
BEGIN
  PERFORM set_config('enable_seqscan', (scan = 'seq')::text, true);
  PERFORM set_config('enable_bitmapscan', (scan = 'bitmap')::text, true);
  PERFORM set_config('enable_indexscan', (scan = 'index')::text, true);
  EXECUTE format('SELECT count(*) FROM %s WHERE k = $1', tab) INTO n USING v;
  RETURN n;
END $$;
CREATE FUNCTION bq_counts(tab regclass, v int) RETURNS text LANGUAGE sql AS $$
  SELECT format('index %s, bitmap %s, seqscan %s',
                bq_by('index', tab, v), bq_by('bitmap', tab, v), bq_by('seq', tab, v))
$$;
-- the plans really use the index
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM bq WHERE k = 3;
RESET enable_seqscan;

-- Several full batches and a partial one, then a few more rows: all found
-- inside the transaction, and after it.
BEGIN;
INSERT INTO bq SELECT i, i % 10 FROM generate_series(1, 1000) i;
SELECT bq_counts('bq', 3);
INSERT INTO bq SELECT i, 3 FROM generate_series(1001, 1005) i;
SELECT bq_counts('bq', 3);
SELECT entries FROM pmhash_stats('bq_k');
SELECT pmhash_verify('bq_k');
COMMIT;
SELECT bq_counts('bq', 3);

-- A rollback drops what was queued and what was applied is dead.
BEGIN;
INSERT INTO bq SELECT i, 77 FROM generate_series(2001, 2300) i;
SELECT bq_counts('bq', 77);
ROLLBACK;
SELECT bq_counts('bq', 77);

-- Savepoints.  (VACUUM first removes the entries of the rows rolled back
-- above, so that the index holds one entry per row.)
VACUUM (INDEX_CLEANUP ON) bq;
SELECT pmhash_verify('bq_k') = (SELECT count(k) FROM bq) AS one_entry_per_row;
BEGIN;
INSERT INTO bq SELECT i, 88 FROM generate_series(3001, 3010) i;
SAVEPOINT s;
INSERT INTO bq SELECT i, 88 FROM generate_series(3011, 3020) i;
ROLLBACK TO s;
INSERT INTO bq SELECT i, 88 FROM generate_series(3021, 3025) i;
SELECT bq_counts('bq', 88);
COMMIT;
SELECT bq_counts('bq', 88);
-- the rolled back rows never reached the index: one entry per live row
SELECT pmhash_verify('bq_k') = (SELECT count(k) FROM bq) AS one_entry_per_row;

-- Nested savepoints: a released one passes its rows to its parent, which
-- is rolled back with them; an exception block rolls back its own.
BEGIN;
INSERT INTO bq SELECT i, 89 FROM generate_series(3101, 3105) i;
SAVEPOINT a;
INSERT INTO bq SELECT i, 89 FROM generate_series(3106, 3110) i;
SAVEPOINT b;
INSERT INTO bq SELECT i, 89 FROM generate_series(3111, 3115) i;
RELEASE b;
SELECT bq_counts('bq', 89);
ROLLBACK TO a;
SELECT bq_counts('bq', 89);
SAVEPOINT c;
INSERT INTO bq SELECT i, 89 FROM generate_series(3116, 3120) i;
RELEASE c;
DO $$
BEGIN
  FOR i IN 3121..3130 LOOP
    BEGIN
      INSERT INTO bq VALUES (i, 89);
      IF i % 2 = 0 THEN
        RAISE EXCEPTION 'undo %', i;
      END IF;
    EXCEPTION WHEN raise_exception THEN
      NULL;
    END;
  END LOOP;
END $$;
SELECT bq_counts('bq', 89);
COMMIT;
SELECT bq_counts('bq', 89);
-- (rows of a subtransaction applied before it aborted are dead entries,
-- as in any index, until VACUUM)
VACUUM (INDEX_CLEANUP ON) bq;
SELECT pmhash_verify('bq_k') = (SELECT count(k) FROM bq) AS one_entry_per_row;

-- A parallel worker probing the index finds the leader's queued rows.
BEGIN;
INSERT INTO bq SELECT i, 90 FROM generate_series(3201, 3230) i;
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
SET LOCAL force_parallel_mode = on;
SET LOCAL parallel_setup_cost = 0;
SET LOCAL parallel_tuple_cost = 0;
EXPLAIN (COSTS OFF) SELECT count(*) FROM bq WHERE k = 90;
SELECT count(*) FROM bq WHERE k = 90;
COMMIT;

-- An AFTER ROW trigger probing the index sees every row of its statement.
CREATE TABLE bq_seen (id int, by_index bigint, by_seq bigint);
CREATE FUNCTION bq_note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO bq_seen VALUES (NEW.id, bq_by('index', 'bq', NEW.k), bq_by('seq', 'bq', NEW.k));
  RETURN NULL;
END $$;
CREATE TRIGGER bq_note AFTER INSERT ON bq FOR EACH ROW WHEN (NEW.k = 99) EXECUTE FUNCTION bq_note();
INSERT INTO bq VALUES (4001, 99), (4002, 99), (4003, 99);
SELECT * FROM bq_seen ORDER BY id;
DROP TRIGGER bq_note ON bq;

-- PREPARE TRANSACTION keeps the queued rows.
BEGIN;
INSERT INTO bq SELECT i, 123 FROM generate_series(5001, 5050) i;
PREPARE TRANSACTION 'bq_prepared';
COMMIT PREPARED 'bq_prepared';
SELECT bq_counts('bq', 123);

-- REINDEX after inserts in the same transaction, then more inserts.
BEGIN;
INSERT INTO bq SELECT i, 55 FROM generate_series(6001, 6040) i;
REINDEX INDEX bq_k;
INSERT INTO bq SELECT i, 55 FROM generate_series(6041, 6050) i;
SELECT bq_counts('bq', 55);
COMMIT;
SELECT bq_counts('bq', 55);
SELECT pmhash_verify('bq_k') = (SELECT count(k) FROM bq) AS verify_counts_every_row;

-- TRUNCATE in the transaction that created the table (the storage is
-- truncated in place): the truncated rows' queued entries must not come
-- back.
BEGIN;
CREATE TABLE bt (id int, k int);
CREATE INDEX bt_k ON bt USING pmhash (k);
INSERT INTO bt SELECT i, i % 20 FROM generate_series(1, 500) i;
TRUNCATE bt;
INSERT INTO bt SELECT i, i FROM generate_series(1, 20) i;
SELECT bq_counts('bt', 5);
COMMIT;
SELECT bq_counts('bt', 5);
SELECT pmhash_verify('bt_k') AS entries_of_bt;
SELECT entries FROM pmhash_stats('bt_k');

DROP TABLE bq, bq_seen, bt;
DROP FUNCTION bq_counts, bq_by, bq_note;
