/* sql/pmhash--0.2--0.3.sql: update of the pmhash extension from 0.2 to 0.3 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pmhash UPDATE TO '0.3'" to load this file. \quit

-- One row per shard of one index file: its entries and the size of its
-- segment, the distribution behind pmhash_stats' totals (owner or superuser
-- only)
CREATE FUNCTION pmhash_shards(index regclass,
	OUT shard integer,
	OUT entries bigint,
	OUT buckets bigint,
	OUT posting_blocks bigint,
	OUT segment_bytes bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;
