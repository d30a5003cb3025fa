-- test/pgtap/am_properties.sql: what the pmhash access method says it can do
-- (pg_indexam_has_property, pg_index_has_property,
-- pg_index_column_has_property), and that it says what hash says but where
-- it does more (unique, multicolumn, = ANY); that a unique index over duplicate keys
-- fails as btree's does, that what it cannot do (INCLUDE, CLUSTER) is
-- refused with the right error, while an exclusion constraint
-- with = works and reports conflicts.
BEGIN;
SELECT plan(17);

CREATE TABLE ap (id int, k int8, s text);
INSERT INTO ap SELECT i, i % 50, 'v' || i FROM generate_series(1, 500) i;
CREATE INDEX ap_k ON ap USING pmhash (k);
CREATE INDEX ap_hash ON ap USING hash (k);

SELECT index_is_type('public', 'ap', 'ap_k', 'pmhash', 'ap_k is a pmhash index');
SELECT results_eq(
	$$SELECT p, pg_indexam_has_property((SELECT oid FROM pg_am WHERE amname = 'pmhash'), p)
	  FROM unnest(ARRAY['can_order', 'can_unique', 'can_multi_col', 'can_exclude', 'can_include']) p$$,
	$$VALUES ('can_order', false), ('can_unique', true), ('can_multi_col', true),
			 ('can_exclude', true), ('can_include', false)$$,
	'access method properties: unique, multicolumn and exclusion; no order or include');
SELECT results_eq(
	$$SELECT p, pg_index_has_property('ap_k'::regclass, p)
	  FROM unnest(ARRAY['clusterable', 'index_scan', 'bitmap_scan', 'backward_scan']) p$$,
	$$VALUES ('clusterable', false), ('index_scan', true), ('bitmap_scan', true),
			 ('backward_scan', true)$$,
	'index properties: index and bitmap scans, backward scans, not clusterable');
SELECT results_eq(
	$$SELECT p, pg_index_column_has_property('ap_k'::regclass, 1, p)
	  FROM unnest(ARRAY['asc', 'desc', 'nulls_first', 'nulls_last', 'orderable',
						'distance_orderable', 'returnable', 'search_array', 'search_nulls']) p$$,
	$$VALUES ('asc', false), ('desc', false), ('nulls_first', false), ('nulls_last', false),
			 ('orderable', false), ('distance_orderable', false), ('returnable', false),
			 ('search_array', true), ('search_nulls', false)$$,
	'column properties: not orderable, not returnable, array search (= ANY), no NULL search');
SELECT results_eq(
	$$SELECT level, p FROM (
		SELECT 'am' AS level, p, pg_indexam_has_property((SELECT oid FROM pg_am WHERE amname = 'pmhash'), p) AS pm,
			   pg_indexam_has_property((SELECT oid FROM pg_am WHERE amname = 'hash'), p) AS h
		FROM unnest(ARRAY['can_order', 'can_unique', 'can_multi_col', 'can_exclude', 'can_include']) p
		UNION ALL
		SELECT 'index', p, pg_index_has_property('ap_k'::regclass, p), pg_index_has_property('ap_hash'::regclass, p)
		FROM unnest(ARRAY['clusterable', 'index_scan', 'bitmap_scan', 'backward_scan']) p
		UNION ALL
		SELECT 'column', p, pg_index_column_has_property('ap_k'::regclass, 1, p),
			   pg_index_column_has_property('ap_hash'::regclass, 1, p)
		FROM unnest(ARRAY['asc', 'desc', 'nulls_first', 'nulls_last', 'orderable',
						  'distance_orderable', 'returnable', 'search_array', 'search_nulls']) p) d
	  WHERE pm IS DISTINCT FROM h ORDER BY 1, 2$$,
	$$VALUES ('am', 'can_multi_col'), ('am', 'can_unique'), ('column', 'search_array')$$,
	'every property is hash''s but unique, multicolumn and = ANY, which pmhash adds');

-- refused
SELECT throws_ok('CREATE UNIQUE INDEX ap_dup ON ap USING pmhash (k)', '23505',
	'could not create unique index "ap_dup"', 'CREATE UNIQUE INDEX over duplicate keys fails as btree''s');
SELECT throws_ok('ALTER TABLE ap ADD CONSTRAINT ap_u UNIQUE USING INDEX ap_k', '42809',
	'"ap_k" is not a unique index', 'a pmhash index cannot back a UNIQUE constraint');
SELECT lives_ok('CREATE INDEX ON ap USING pmhash (k, s)', 'multicolumn indexes are built');
SELECT throws_ok('CREATE INDEX ON ap USING pmhash (k) INCLUDE (s)', '0A000',
	'access method "pmhash" does not support included columns', 'INCLUDE is refused');
SELECT throws_ok('CLUSTER ap USING ap_k', '0A000',
	'cannot cluster on index "ap_k" because access method does not support clustering',
	'CLUSTER on a pmhash index is refused');
SELECT throws_ok('CREATE INDEX ON ap USING pmhash (s text_pattern_ops)', '42704',
	'operator class "text_pattern_ops" does not exist for access method "pmhash"',
	'core''s hash text_pattern_ops has no pmhash counterpart');
SELECT throws_ok('CREATE INDEX ON ap USING pmhash ((point(k, k)))', '42704',
	'data type point has no default operator class for access method "pmhash"',
	'a type without a hash opclass cannot be indexed');

-- exclusion constraints
CREATE TABLE ax (id int, k int8, EXCLUDE USING pmhash (k WITH =));
SELECT lives_ok($$INSERT INTO ax SELECT i, i FROM generate_series(1, 300) i$$,
	'distinct keys satisfy an EXCLUDE USING pmhash (k WITH =) constraint');
SELECT lives_ok($$INSERT INTO ax VALUES (301, NULL), (302, NULL)$$,
	'NULL keys never conflict');
SELECT throws_ok($$INSERT INTO ax VALUES (303, 17)$$, '23P01',
	'conflicting key value violates exclusion constraint "ax_k_excl"',
	'a duplicate key violates the exclusion constraint');
SELECT throws_ok($$UPDATE ax SET k = 5 WHERE k = 6$$, '23P01',
	'conflicting key value violates exclusion constraint "ax_k_excl"',
	'an update to an existing key violates the exclusion constraint');
SELECT throws_ok($$ALTER TABLE ap ADD EXCLUDE USING pmhash (k WITH =)$$, '23P01',
	NULL, 'adding the constraint to a table with duplicates fails');

SELECT * FROM finish();
ROLLBACK;
