/* sql/pmhash--0.1.sql: objects of the pmhash extension, version 0.1 */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION pmhash" to load this file. \quit

CREATE FUNCTION pmhash_handler(internal)
RETURNS index_am_handler
AS 'MODULE_PATHNAME'
LANGUAGE C;

-- Access method
CREATE ACCESS METHOD pmhash TYPE INDEX HANDLER pmhash_handler;
COMMENT ON ACCESS METHOD pmhash IS 'persistent hash index on a memory-mapped file';

-- Statistics of one index file (owner or superuser only)
CREATE FUNCTION pmhash_stats(index regclass,
	OUT path text,
	OUT is_pmem boolean,
	OUT file_bytes bigint,
	OUT entries bigint,
	OUT shards integer,
	OUT segments bigint,
	OUT buckets bigint,
	OUT posting_blocks bigint,
	OUT chains bigint,
	OUT fill double precision,
	OUT avg_probe double precision,
	OUT max_probe integer,
	OUT free_bytes bigint,
	OUT overflow_buckets bigint)
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;

-- Structural check; returns the number of entries or raises an error
CREATE FUNCTION pmhash_verify(index regclass)
RETURNS bigint
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;

-- Operator families and classes, one for each default hash operator class of
-- PostgreSQL 15, in families that mirror core's so that cross-type equality
-- (int8 = int4, text = name, float8 = float4) can use the index.
CREATE OPERATOR FAMILY aclitem_ops USING pmhash;
CREATE OPERATOR FAMILY array_ops USING pmhash;
CREATE OPERATOR FAMILY bool_ops USING pmhash;
CREATE OPERATOR FAMILY bpchar_ops USING pmhash;
CREATE OPERATOR FAMILY bytea_ops USING pmhash;
CREATE OPERATOR FAMILY char_ops USING pmhash;
CREATE OPERATOR FAMILY cid_ops USING pmhash;
CREATE OPERATOR FAMILY date_ops USING pmhash;
CREATE OPERATOR FAMILY enum_ops USING pmhash;
CREATE OPERATOR FAMILY float_ops USING pmhash;
CREATE OPERATOR FAMILY integer_ops USING pmhash;
CREATE OPERATOR FAMILY interval_ops USING pmhash;
CREATE OPERATOR FAMILY jsonb_ops USING pmhash;
CREATE OPERATOR FAMILY macaddr8_ops USING pmhash;
CREATE OPERATOR FAMILY macaddr_ops USING pmhash;
CREATE OPERATOR FAMILY multirange_ops USING pmhash;
CREATE OPERATOR FAMILY network_ops USING pmhash;
CREATE OPERATOR FAMILY numeric_ops USING pmhash;
CREATE OPERATOR FAMILY oid_ops USING pmhash;
CREATE OPERATOR FAMILY oidvector_ops USING pmhash;
CREATE OPERATOR FAMILY pg_lsn_ops USING pmhash;
CREATE OPERATOR FAMILY range_ops USING pmhash;
CREATE OPERATOR FAMILY record_ops USING pmhash;
CREATE OPERATOR FAMILY text_ops USING pmhash;
CREATE OPERATOR FAMILY tid_ops USING pmhash;
CREATE OPERATOR FAMILY time_ops USING pmhash;
CREATE OPERATOR FAMILY timestamp_ops USING pmhash;
CREATE OPERATOR FAMILY timestamptz_ops USING pmhash;
CREATE OPERATOR FAMILY timetz_ops USING pmhash;
CREATE OPERATOR FAMILY uuid_ops USING pmhash;
CREATE OPERATOR FAMILY xid8_ops USING pmhash;
CREATE OPERATOR FAMILY xid_ops USING pmhash;
CREATE OPERATOR CLASS aclitem_ops DEFAULT FOR TYPE aclitem USING pmhash FAMILY aclitem_ops AS
	OPERATOR 1 = (aclitem, aclitem),
	FUNCTION 1 hash_aclitem(aclitem);
CREATE OPERATOR CLASS array_ops DEFAULT FOR TYPE anyarray USING pmhash FAMILY array_ops AS
	OPERATOR 1 = (anyarray, anyarray),
	FUNCTION 1 hash_array(anyarray);
CREATE OPERATOR CLASS bool_ops DEFAULT FOR TYPE boolean USING pmhash FAMILY bool_ops AS
	OPERATOR 1 = (boolean, boolean),
	FUNCTION 1 hashchar("char");
CREATE OPERATOR CLASS bpchar_ops DEFAULT FOR TYPE character USING pmhash FAMILY bpchar_ops AS
	OPERATOR 1 = (character, character),
	FUNCTION 1 hashbpchar(character);
CREATE OPERATOR CLASS bytea_ops DEFAULT FOR TYPE bytea USING pmhash FAMILY bytea_ops AS
	OPERATOR 1 = (bytea, bytea),
	FUNCTION 1 hashvarlena(internal);
CREATE OPERATOR CLASS char_ops DEFAULT FOR TYPE "char" USING pmhash FAMILY char_ops AS
	OPERATOR 1 = ("char", "char"),
	FUNCTION 1 hashchar("char");
CREATE OPERATOR CLASS cid_ops DEFAULT FOR TYPE cid USING pmhash FAMILY cid_ops AS
	OPERATOR 1 = (cid, cid),
	FUNCTION 1 hashint4(integer);
CREATE OPERATOR CLASS date_ops DEFAULT FOR TYPE date USING pmhash FAMILY date_ops AS
	OPERATOR 1 = (date, date),
	FUNCTION 1 hashint4(integer);
CREATE OPERATOR CLASS enum_ops DEFAULT FOR TYPE anyenum USING pmhash FAMILY enum_ops AS
	OPERATOR 1 = (anyenum, anyenum),
	FUNCTION 1 hashenum(anyenum);
CREATE OPERATOR CLASS float4_ops DEFAULT FOR TYPE real USING pmhash FAMILY float_ops AS
	OPERATOR 1 = (real, real),
	FUNCTION 1 hashfloat4(real);
CREATE OPERATOR CLASS float8_ops DEFAULT FOR TYPE double precision USING pmhash FAMILY float_ops AS
	OPERATOR 1 = (double precision, double precision),
	FUNCTION 1 hashfloat8(double precision);
CREATE OPERATOR CLASS int2_ops DEFAULT FOR TYPE smallint USING pmhash FAMILY integer_ops AS
	OPERATOR 1 = (smallint, smallint),
	FUNCTION 1 hashint2(smallint);
CREATE OPERATOR CLASS int4_ops DEFAULT FOR TYPE integer USING pmhash FAMILY integer_ops AS
	OPERATOR 1 = (integer, integer),
	FUNCTION 1 hashint4(integer);
CREATE OPERATOR CLASS int8_ops DEFAULT FOR TYPE bigint USING pmhash FAMILY integer_ops AS
	OPERATOR 1 = (bigint, bigint),
	FUNCTION 1 hashint8(bigint);
CREATE OPERATOR CLASS interval_ops DEFAULT FOR TYPE interval USING pmhash FAMILY interval_ops AS
	OPERATOR 1 = (interval, interval),
	FUNCTION 1 interval_hash(interval);
CREATE OPERATOR CLASS jsonb_ops DEFAULT FOR TYPE jsonb USING pmhash FAMILY jsonb_ops AS
	OPERATOR 1 = (jsonb, jsonb),
	FUNCTION 1 jsonb_hash(jsonb);
CREATE OPERATOR CLASS macaddr8_ops DEFAULT FOR TYPE macaddr8 USING pmhash FAMILY macaddr8_ops AS
	OPERATOR 1 = (macaddr8, macaddr8),
	FUNCTION 1 hashmacaddr8(macaddr8);
CREATE OPERATOR CLASS macaddr_ops DEFAULT FOR TYPE macaddr USING pmhash FAMILY macaddr_ops AS
	OPERATOR 1 = (macaddr, macaddr),
	FUNCTION 1 hashmacaddr(macaddr);
CREATE OPERATOR CLASS multirange_ops DEFAULT FOR TYPE anymultirange USING pmhash FAMILY multirange_ops AS
	OPERATOR 1 = (anymultirange, anymultirange),
	FUNCTION 1 hash_multirange(anymultirange);
CREATE OPERATOR CLASS inet_ops DEFAULT FOR TYPE inet USING pmhash FAMILY network_ops AS
	OPERATOR 1 = (inet, inet),
	FUNCTION 1 hashinet(inet);
CREATE OPERATOR CLASS numeric_ops DEFAULT FOR TYPE numeric USING pmhash FAMILY numeric_ops AS
	OPERATOR 1 = (numeric, numeric),
	FUNCTION 1 hash_numeric(numeric);
CREATE OPERATOR CLASS oid_ops DEFAULT FOR TYPE oid USING pmhash FAMILY oid_ops AS
	OPERATOR 1 = (oid, oid),
	FUNCTION 1 hashoid(oid);
CREATE OPERATOR CLASS oidvector_ops DEFAULT FOR TYPE oidvector USING pmhash FAMILY oidvector_ops AS
	OPERATOR 1 = (oidvector, oidvector),
	FUNCTION 1 hashoidvector(oidvector);
CREATE OPERATOR CLASS pg_lsn_ops DEFAULT FOR TYPE pg_lsn USING pmhash FAMILY pg_lsn_ops AS
	OPERATOR 1 = (pg_lsn, pg_lsn),
	FUNCTION 1 pg_lsn_hash(pg_lsn);
CREATE OPERATOR CLASS range_ops DEFAULT FOR TYPE anyrange USING pmhash FAMILY range_ops AS
	OPERATOR 1 = (anyrange, anyrange),
	FUNCTION 1 hash_range(anyrange);
CREATE OPERATOR CLASS record_ops DEFAULT FOR TYPE record USING pmhash FAMILY record_ops AS
	OPERATOR 1 = (record, record),
	FUNCTION 1 hash_record(record);
CREATE OPERATOR CLASS name_ops DEFAULT FOR TYPE name USING pmhash FAMILY text_ops AS
	OPERATOR 1 = (name, name),
	FUNCTION 1 hashname(name);
CREATE OPERATOR CLASS text_ops DEFAULT FOR TYPE text USING pmhash FAMILY text_ops AS
	OPERATOR 1 = (text, text),
	FUNCTION 1 hashtext(text);
CREATE OPERATOR CLASS tid_ops DEFAULT FOR TYPE tid USING pmhash FAMILY tid_ops AS
	OPERATOR 1 = (tid, tid),
	FUNCTION 1 hashtid(tid);
CREATE OPERATOR CLASS time_ops DEFAULT FOR TYPE time without time zone USING pmhash FAMILY time_ops AS
	OPERATOR 1 = (time without time zone, time without time zone),
	FUNCTION 1 time_hash(time without time zone);
CREATE OPERATOR CLASS timestamp_ops DEFAULT FOR TYPE timestamp without time zone USING pmhash FAMILY timestamp_ops AS
	OPERATOR 1 = (timestamp without time zone, timestamp without time zone),
	FUNCTION 1 timestamp_hash(timestamp without time zone);
CREATE OPERATOR CLASS timestamptz_ops DEFAULT FOR TYPE timestamp with time zone USING pmhash FAMILY timestamptz_ops AS
	OPERATOR 1 = (timestamp with time zone, timestamp with time zone),
	FUNCTION 1 timestamp_hash(timestamp without time zone);
CREATE OPERATOR CLASS timetz_ops DEFAULT FOR TYPE time with time zone USING pmhash FAMILY timetz_ops AS
	OPERATOR 1 = (time with time zone, time with time zone),
	FUNCTION 1 timetz_hash(time with time zone);
CREATE OPERATOR CLASS uuid_ops DEFAULT FOR TYPE uuid USING pmhash FAMILY uuid_ops AS
	OPERATOR 1 = (uuid, uuid),
	FUNCTION 1 uuid_hash(uuid);
CREATE OPERATOR CLASS xid8_ops DEFAULT FOR TYPE xid8 USING pmhash FAMILY xid8_ops AS
	OPERATOR 1 = (xid8, xid8),
	FUNCTION 1 hashint8(bigint);
CREATE OPERATOR CLASS xid_ops DEFAULT FOR TYPE xid USING pmhash FAMILY xid_ops AS
	OPERATOR 1 = (xid, xid),
	FUNCTION 1 hashint4(integer);
ALTER OPERATOR FAMILY float_ops USING pmhash ADD OPERATOR 1 = (double precision, real);
ALTER OPERATOR FAMILY float_ops USING pmhash ADD OPERATOR 1 = (real, double precision);
ALTER OPERATOR FAMILY integer_ops USING pmhash ADD OPERATOR 1 = (bigint, integer);
ALTER OPERATOR FAMILY integer_ops USING pmhash ADD OPERATOR 1 = (bigint, smallint);
ALTER OPERATOR FAMILY integer_ops USING pmhash ADD OPERATOR 1 = (integer, bigint);
ALTER OPERATOR FAMILY integer_ops USING pmhash ADD OPERATOR 1 = (integer, smallint);
ALTER OPERATOR FAMILY integer_ops USING pmhash ADD OPERATOR 1 = (smallint, bigint);
ALTER OPERATOR FAMILY integer_ops USING pmhash ADD OPERATOR 1 = (smallint, integer);
ALTER OPERATOR FAMILY text_ops USING pmhash ADD OPERATOR 1 = (name, text);
ALTER OPERATOR FAMILY text_ops USING pmhash ADD OPERATOR 1 = (text, name);
