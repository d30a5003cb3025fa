-- What PostgreSQL 18 lets a unique pmhash index be, and what 15-17 refuse:
-- a foreign key's referenced index, a partitioned table's unique index (and
-- with it ON CONFLICT through the parent), a replica identity.
-- expected/gates.out is 18, gates_1.out 15 and 16 (the foreign key and the
-- partitioned index refused), gates_2.out 17 (the replica identity refused
-- too: 17's subscribers cannot look rows up through it).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pmhash;
RESET client_min_messages;
-- which expected file this run must match
SELECT CASE WHEN current_setting('server_version_num')::int < 170000 THEN '15-16'
	WHEN current_setting('server_version_num')::int < 180000 THEN '17' ELSE '18' END AS versions;

-- a foreign key referencing a unique pmhash index, with actions
CREATE TABLE gate_pk (id int NOT NULL, v text);
CREATE UNIQUE INDEX gate_pk_id ON gate_pk USING pmhash (id);
INSERT INTO gate_pk SELECT g, 'v' || g FROM generate_series(1, 1000) g;
CREATE TABLE gate_fk (id int PRIMARY KEY, a int);
ALTER TABLE gate_fk ADD CONSTRAINT gate_fk_a FOREIGN KEY (a) REFERENCES gate_pk (id)
	ON DELETE CASCADE ON UPDATE CASCADE;
SELECT conindid::regclass AS referenced_index FROM pg_constraint WHERE conname = 'gate_fk_a';
INSERT INTO gate_fk SELECT g, g FROM generate_series(1, 100) g;
INSERT INTO gate_fk VALUES (1001, 5000);
DELETE FROM gate_pk WHERE id <= 10;
UPDATE gate_pk SET id = id + 5000 WHERE id BETWEEN 11 AND 20;
SELECT count(*), count(*) FILTER (WHERE a > 5000) AS moved, min(a) FROM gate_fk;
-- a NO ACTION foreign key: a referenced row cannot go
CREATE TABLE gate_fk_plain (a int REFERENCES gate_pk (id));
INSERT INTO gate_fk_plain VALUES (500);
DELETE FROM gate_pk WHERE id = 500;
UPDATE gate_pk SET id = -500 WHERE id = 500;
SELECT count(*) FROM gate_pk WHERE id = 500;
-- a unique btree index made first is the one a foreign key uses on every version
CREATE TABLE gate_pk2 (id int NOT NULL);
CREATE UNIQUE INDEX gate_pk2_btree ON gate_pk2 (id);
CREATE UNIQUE INDEX gate_pk2_pmhash ON gate_pk2 USING pmhash (id);
CREATE TABLE gate_fk2 (a int REFERENCES gate_pk2 (id));
SELECT conindid::regclass AS referenced_index FROM pg_constraint
	WHERE conrelid = 'gate_fk2'::regclass AND contype = 'f';

-- a unique pmhash index on a hash-partitioned table
CREATE TABLE gate_hp (k int, v int) PARTITION BY HASH (k);
CREATE TABLE gate_hp0 PARTITION OF gate_hp FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE gate_hp1 PARTITION OF gate_hp FOR VALUES WITH (MODULUS 2, REMAINDER 1);
CREATE UNIQUE INDEX gate_hp_k ON gate_hp USING pmhash (k);
INSERT INTO gate_hp SELECT g, g FROM generate_series(1, 200) g;
INSERT INTO gate_hp VALUES (5, 0);
INSERT INTO gate_hp VALUES (5, -5), (500, -500), (7, -7)
	ON CONFLICT (k) DO UPDATE SET v = excluded.v;
INSERT INTO gate_hp VALUES (6, 0), (600, 600) ON CONFLICT DO NOTHING;
SELECT * FROM gate_hp WHERE k IN (5, 6, 7, 500, 600) ORDER BY k;
SELECT count(*), sum(v) FROM gate_hp;

-- on a list-partitioned table, with a partition attached afterwards
CREATE TABLE gate_lp (k text, v int) PARTITION BY LIST (k);
CREATE TABLE gate_lp_ab PARTITION OF gate_lp FOR VALUES IN ('a', 'b');
CREATE UNIQUE INDEX gate_lp_k ON gate_lp USING pmhash (k);
CREATE TABLE gate_lp_c (k text, v int);
INSERT INTO gate_lp_c VALUES ('c', 1);
ALTER TABLE gate_lp ATTACH PARTITION gate_lp_c FOR VALUES IN ('c');
SELECT c.relname, a.amname, i.indisunique FROM pg_index i
	JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
	WHERE i.indrelid = 'gate_lp_c'::regclass;
INSERT INTO gate_lp VALUES ('a', 1), ('c', 2) ON CONFLICT (k) DO UPDATE SET v = gate_lp.v + excluded.v;
INSERT INTO gate_lp VALUES ('c', 5);
SELECT * FROM gate_lp ORDER BY k;

-- a partition's own unique pmhash index: ON CONFLICT on the partition works
-- on every version; through the parent 18 routes it, 15-17 refuse it
CREATE TABLE gate_rp (k int8, v text) PARTITION BY LIST ((k % 2));
CREATE TABLE gate_rp0 PARTITION OF gate_rp FOR VALUES IN (0);
CREATE TABLE gate_rp1 PARTITION OF gate_rp FOR VALUES IN (1);
CREATE UNIQUE INDEX gate_rp0_k ON gate_rp0 USING pmhash (k);
INSERT INTO gate_rp VALUES (2, 'a'), (3, 'b');
INSERT INTO gate_rp VALUES (2, 'dup');
INSERT INTO gate_rp0 VALUES (2, 'c') ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v;
INSERT INTO gate_rp VALUES (4, 'd'), (2, 'e') ON CONFLICT DO NOTHING;
SELECT * FROM gate_rp ORDER BY k;

-- a pmhash index as the replica identity
ALTER TABLE gate_pk REPLICA IDENTITY USING INDEX gate_pk_id;
SELECT relreplident FROM pg_class WHERE oid = 'gate_pk'::regclass;

DROP TABLE IF EXISTS gate_fk, gate_fk_plain, gate_fk2, gate_pk, gate_pk2, gate_hp, gate_lp, gate_rp;
