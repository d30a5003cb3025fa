-- test/pgtap/privileges.sql: who may call pmhash_stats, pmhash_shards and
-- pmhash_verify (the index's owner, members of the owning role and
-- superusers; anyone else gets 42501), and that relations other than pmhash
-- indexes give 42809.
BEGIN;
SELECT plan(17);

CREATE ROLE pmhash_tap_owner;
CREATE ROLE pmhash_tap_other;
CREATE ROLE pmhash_tap_member IN ROLE pmhash_tap_owner;

CREATE TABLE pr (id int, k int8);
INSERT INTO pr SELECT i, CASE WHEN i % 10 = 0 THEN NULL ELSE i % 37 END FROM generate_series(1, 400) i;
CREATE INDEX pr_k ON pr USING pmhash (k);
ALTER TABLE pr OWNER TO pmhash_tap_owner;
GRANT SELECT ON pr TO pmhash_tap_other;

-- Run query q as role r and return its first column; the role is restored
-- afterwards, or by the subtransaction rollback of throws_ok on error.
CREATE FUNCTION pg_temp.as_role(r text, q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	saved text := current_setting('role');
	result text;
BEGIN
	PERFORM set_config('role', r, true);
	EXECUTE q INTO result;
	PERFORM set_config('role', saved, true);
	RETURN result;
END $$;

\ir helpers.psql

SELECT is((SELECT relowner::regrole::text FROM pg_class WHERE oid = 'pr_k'::regclass),
	'pmhash_tap_owner', 'the index belongs to the table''s owner');

-- someone else, even with SELECT on the table
SELECT throws_ok($$SELECT pg_temp.as_role('pmhash_tap_other', 'SELECT pmhash_stats(''pr_k'')')$$,
	'42501', 'permission denied for index pr_k', 'a non-owner cannot call pmhash_stats');
SELECT throws_ok($$SELECT pg_temp.as_role('pmhash_tap_other', 'SELECT pmhash_verify(''pr_k'')')$$,
	'42501', 'permission denied for index pr_k', 'a non-owner cannot call pmhash_verify');
SELECT throws_ok($$SELECT pg_temp.as_role('pmhash_tap_other', 'SELECT count(*) FROM pmhash_shards(''pr_k'')')$$,
	'42501', 'permission denied for index pr_k', 'a non-owner cannot call pmhash_shards');
SELECT is(current_user::text, session_user::text, 'the role is restored after a refused call');
SET LOCAL enable_seqscan = off;
SELECT is(pg_temp.as_role('pmhash_tap_other',
		  'SELECT count(*) FROM pr WHERE k = 5'), '10',
	'a non-owner with SELECT can still query through the index');
RESET enable_seqscan;

-- the owner
SELECT lives_ok($$SELECT pg_temp.as_role('pmhash_tap_owner', 'SELECT pmhash_stats(''pr_k'')')$$,
	'the owner can call pmhash_stats');
SELECT is(pg_temp.as_role('pmhash_tap_owner', 'SELECT pmhash_verify(''pr_k'')')::bigint,
	(SELECT count(k) FROM pr), 'the owner can call pmhash_verify, which counts the non-null keys');
SELECT is(pg_temp.as_role('pmhash_tap_member', 'SELECT entries FROM pmhash_stats(''pr_k'')')::bigint,
	(SELECT count(k) FROM pr), 'a member of the owning role can call pmhash_stats');
SELECT is(pg_temp.as_role('pmhash_tap_owner', 'SELECT sum(entries) FROM pmhash_shards(''pr_k'')')::bigint,
	(SELECT count(k) FROM pr), 'the owner can call pmhash_shards, whose shards hold the non-null keys');

-- a superuser who does not own it
SELECT ok((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), 'running as a superuser');
SELECT lives_ok($$SELECT pmhash_stats('pr_k')$$, 'a superuser can call pmhash_stats');
SELECT lives_ok($$SELECT pmhash_verify('pr_k')$$, 'a superuser can call pmhash_verify');

-- relations that are not pmhash indexes
CREATE INDEX pr_btree ON pr (k);
CREATE INDEX pr_hash ON pr USING hash (k);
CREATE SEQUENCE pr_seq;
CREATE VIEW pr_view AS SELECT * FROM pr;
CREATE MATERIALIZED VIEW pr_mat AS SELECT * FROM pr;
CREATE TYPE pr_type AS (a int);
CREATE TABLE pr_parted (k int8) PARTITION BY LIST (k);
CREATE TABLE pr_part1 PARTITION OF pr_parted FOR VALUES IN (1, NULL);
CREATE INDEX pr_parted_k ON pr_parted USING pmhash (k);
INSERT INTO pr_parted VALUES (1), (1), (NULL);
CREATE TEMP TABLE pr_rels (rel text);
INSERT INTO pr_rels VALUES ('pr'), ('pr_btree'), ('pr_hash'), ('pr_seq'), ('pr_view'), ('pr_mat'),
	('pr_type'), ('pr_parted'), ('pr_parted_k'), ('pg_class');
SELECT results_eq(
	$$SELECT rel, pg_temp.outcome(format('SELECT pmhash_stats(%L)', rel)) FROM pr_rels ORDER BY rel$$,
	$$SELECT rel, format('42809 "%s" is not a pmhash index', rel) FROM pr_rels ORDER BY rel$$,
	'pmhash_stats on a table, btree, hash, sequence, view, matview, type, partitioned table or index: 42809');
SELECT results_eq(
	$$SELECT rel, pg_temp.outcome(format('SELECT count(*) FROM pmhash_shards(%L)', rel)) FROM pr_rels ORDER BY rel$$,
	$$SELECT rel, format('42809 "%s" is not a pmhash index', rel) FROM pr_rels ORDER BY rel$$,
	'pmhash_shards on a table, btree, hash, sequence, view, matview, type, partitioned table or index: 42809');
SELECT results_eq(
	$$SELECT rel, pg_temp.outcome(format('SELECT pmhash_verify(%L)', rel)) FROM pr_rels ORDER BY rel$$,
	$$SELECT rel, format('42809 "%s" is not a pmhash index', rel) FROM pr_rels ORDER BY rel$$,
	'pmhash_verify on a table, btree, hash, sequence, view, matview, type, partitioned table or index: 42809');
SELECT is(pmhash_verify((SELECT i.inhrelid::regclass FROM pg_inherits i
						 WHERE i.inhparent = 'pr_parted_k'::regclass)), 2::bigint,
	'the partition''s own pmhash index can be verified');

SELECT * FROM finish();
ROLLBACK;
