-- test/concurrency/setup_unique.sql: the soak's unique key (test/soak.sh),
-- after setup.sql.  Column u of conc_rows holds 'u' || g for g up to about
-- 25,000, unique through a pmhash index; most of the first 20,000 rows get
-- one at once, the rest of the rows and the rows the other scripts insert
-- have none (NULLs are not indexed, so any number of them is allowed).
SET client_min_messages = warning;
DROP FUNCTION IF EXISTS conc_insert_u(int8);
ALTER TABLE conc_rows ADD COLUMN u text;
UPDATE conc_rows SET u = 'u' || id WHERE id <= 20000 AND id % 10 <> 0;
CREATE UNIQUE INDEX conc_rows_u ON conc_rows USING pmhash (u) WITH (shards = 2);
ANALYZE conc_rows;

-- a plain INSERT of key 'u' || g, whose duplicate error is caught (the
-- subtransaction takes its heap tuple and index entry back)
CREATE FUNCTION conc_insert_u(g int8) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO conc_rows (k, u) VALUES (conc_new_key(), 'u' || g);
EXCEPTION WHEN unique_violation THEN
	NULL;
END $$;
