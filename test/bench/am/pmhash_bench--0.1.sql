/* test/bench/am/pmhash_bench--0.1.sql: objects of the pmhash_bench helper extension */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION pmhash_bench" to load this file. \quit

-- Probe index "index" once per element of "keys", "loops" times over, through
-- index_beginscan / index_rescan / index_getnext_tid with an equality scan key
-- on the first index column.  Returns the mean time per probe in nanoseconds
-- and the number of TIDs one pass over the keys returned.
CREATE FUNCTION pmhash_bench_probe(index regclass, keys anyarray, loops integer DEFAULT 1,
	OUT ns_per_probe double precision,
	OUT tids bigint)
RETURNS record
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT VOLATILE;

-- The heap TID (block, offset), for the index-free bound of pgbench
-- select-only with prepared statements (test/bench/sql/pgb_select_by_tid_prepared.sql).
CREATE FUNCTION pmhash_bench_tid(block bigint, "offset" integer)
RETURNS tid
AS 'MODULE_PATHNAME'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- tidcalc: an index that computes a pgbench_accounts row's TID from its aid
-- (test/bench/am/bench_tidcalc.c), the cheapest index select-only can have.
CREATE FUNCTION tidcalc_handler(internal)
RETURNS index_am_handler
AS 'MODULE_PATHNAME'
LANGUAGE C;
CREATE ACCESS METHOD tidcalc TYPE INDEX HANDLER tidcalc_handler;
CREATE OPERATOR CLASS tidcalc_int4_ops DEFAULT FOR TYPE int4 USING tidcalc AS
	OPERATOR 1 = (int4, int4);

-- The execution-time histogram of the statements whose text starts with
-- pmhash_bench.exec_time_prefix (test/bench/am/bench_exec_time.c; needs
-- pmhash_bench in shared_preload_libraries): empty it, and read the number
-- of executions, their mean and the given quantiles, in microseconds (NULL
-- for a quantile among the executions of 100 us or more).
CREATE FUNCTION pmhash_bench_exec_time_reset()
RETURNS void
AS 'MODULE_PATHNAME'
LANGUAGE C VOLATILE;
CREATE FUNCTION pmhash_bench_exec_times(quantiles float8[],
	OUT calls bigint,
	OUT mean_us double precision,
	OUT quantile_us double precision[])
RETURNS record
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT VOLATILE;
