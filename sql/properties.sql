-- Access method properties: pmhash against PostgreSQL's hash, property by
-- property, at the AM, index and column levels.  pmhash differs only where
-- it does more: unique and multi-column indexes, = ANY(array) conditions.
CREATE EXTENSION IF NOT EXISTS pmhash;
CREATE TABLE props (k int8, m int8);
CREATE INDEX props_hash ON props USING hash (k);
CREATE INDEX props_pmhash ON props USING pmhash (k);
SELECT p AS property,
	pg_indexam_has_property((SELECT oid FROM pg_am WHERE amname = 'hash'), p) AS hash,
	pg_indexam_has_property((SELECT oid FROM pg_am WHERE amname = 'pmhash'), p) AS pmhash
FROM unnest(ARRAY['can_order', 'can_unique', 'can_multi_col', 'can_exclude',
				  'can_include']) p;
SELECT p AS property, pg_index_has_property('props_hash'::regclass, p) AS hash,
	pg_index_has_property('props_pmhash'::regclass, p) AS pmhash
FROM unnest(ARRAY['clusterable', 'index_scan', 'bitmap_scan', 'backward_scan']) p;
SELECT p AS property, pg_index_column_has_property('props_hash'::regclass, 1, p) AS hash,
	pg_index_column_has_property('props_pmhash'::regclass, 1, p) AS pmhash
FROM unnest(ARRAY['asc', 'desc', 'nulls_first', 'nulls_last', 'orderable',
				  'distance_orderable', 'returnable', 'search_array', 'search_nulls']) p;
-- can_exclude holds
ALTER TABLE props ADD CONSTRAINT props_excl EXCLUDE USING pmhash (m WITH =);
INSERT INTO props VALUES (1, 1);
INSERT INTO props VALUES (2, 1);
DROP TABLE props;
