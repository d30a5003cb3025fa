/*-------------------------------------------------------------------------
 *
 * bench_exec_time.c
 *	  The distribution of one statement's execution times in the server.
 *
 * pg_stat_statements keeps a statement's mean execution time, and its
 * standard deviation, least and greatest, but no quantiles.  On a virtual
 * machine a few executions in a thousand can take a millisecond or more
 * (the host, or the guest's own page reclaim, stalls the backend), and
 * those few move the mean of a 5-microsecond statement by microseconds.
 * This module, preloaded (shared_preload_libraries), counts the execution
 * times of the top-level statements whose text starts with
 * pmhash_bench.exec_time_prefix in a histogram in shared memory, so that
 * the median and other quantiles can be read next to the mean.
 *
 * An execution's time is pg_stat_statements' own: the executor's run and
 * finish, measured by the query's total-time instrumentation (which this
 * module asks for when no other module has); it is read at the end of the
 * execution.  Times go to buckets of 10 nanoseconds up to 100 microseconds;
 * longer ones share one bucket (they count in the mean and in quantiles
 * above the share of executions below 100 microseconds, reported as such).
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/bench/am/bench_exec_time.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/instrument.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"

PG_FUNCTION_INFO_V1(pmhash_bench_exec_time_reset);
PG_FUNCTION_INFO_V1(pmhash_bench_exec_times);

void		_PG_init(void);

/* Histogram buckets: 10 ns wide up to 100 us, then one for the rest. */
#define BUCKET_NS		10
#define NBUCKETS		10000

typedef struct ExecTimeHistogram
{
	pg_atomic_uint64 count[NBUCKETS + 1];
	pg_atomic_uint64 total_ns;	/* sum of every counted execution */
} ExecTimeHistogram;

static ExecTimeHistogram *histogram = NULL;
static char *exec_time_prefix = NULL;
static int	nesting_level = 0;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static ExecutorStart_hook_type prev_ExecutorStart = NULL;
static ExecutorRun_hook_type prev_ExecutorRun = NULL;
static ExecutorEnd_hook_type prev_ExecutorEnd = NULL;

/* Whether an execution at the current nesting level is one to count. */
static bool
counted(QueryDesc *queryDesc)
{
	return histogram != NULL && nesting_level == 0 && exec_time_prefix != NULL &&
		exec_time_prefix[0] != '\0' && queryDesc->sourceText != NULL &&
		strncmp(queryDesc->sourceText, exec_time_prefix, strlen(exec_time_prefix)) == 0;
}

/* Reserve the histogram's shared memory. */
static void
exec_time_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(sizeof(ExecTimeHistogram));
}

/* Create or attach to the histogram. */
static void
exec_time_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	histogram = ShmemInitStruct("pmhash_bench exec times", sizeof(ExecTimeHistogram), &found);
	if (!found)
	{
		for (int i = 0; i <= NBUCKETS; i++)
			pg_atomic_init_u64(&histogram->count[i], 0);
		pg_atomic_init_u64(&histogram->total_ns, 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

/* ExecutorStart hook: make sure a counted query measures its total time. */
static void
exec_time_ExecutorStart(QueryDesc *queryDesc, int eflags)
{
	if (prev_ExecutorStart)
		prev_ExecutorStart(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
	if (counted(queryDesc) && queryDesc->totaltime == NULL)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(queryDesc->estate->es_query_cxt);

		queryDesc->totaltime = InstrAlloc(1, INSTRUMENT_TIMER, false);
		MemoryContextSwitchTo(oldcxt);
	}
}

/* ExecutorRun's last parameter and argument: 18 dropped execute_once */
#if PG_VERSION_NUM >= 180000
#define EXECUTE_ONCE_PARAM
#define EXECUTE_ONCE_ARG
#else
#define EXECUTE_ONCE_PARAM , bool execute_once
#define EXECUTE_ONCE_ARG , execute_once
#endif

/* ExecutorRun hook: track the nesting level, as pg_stat_statements does. */
static void
exec_time_ExecutorRun(QueryDesc *queryDesc, ScanDirection direction, uint64 count
					  EXECUTE_ONCE_PARAM)
{
	nesting_level++;
	PG_TRY();
	{
		if (prev_ExecutorRun)
			prev_ExecutorRun(queryDesc, direction, count EXECUTE_ONCE_ARG);
		else
			standard_ExecutorRun(queryDesc, direction, count EXECUTE_ONCE_ARG);
	}
	PG_FINALLY();
	{
		nesting_level--;
	}
	PG_END_TRY();
}

/* ExecutorEnd hook: count a counted query's execution time. */
static void
exec_time_ExecutorEnd(QueryDesc *queryDesc)
{
	if (queryDesc->totaltime != NULL && counted(queryDesc))
	{
		uint64		ns;

		/* as pg_stat_statements does; a second call adds nothing */
		InstrEndLoop(queryDesc->totaltime);
		ns = (uint64) (queryDesc->totaltime->total * 1e9);
		pg_atomic_fetch_add_u64(&histogram->count[Min(ns / BUCKET_NS, NBUCKETS)], 1);
		pg_atomic_fetch_add_u64(&histogram->total_ns, ns);
	}
	if (prev_ExecutorEnd)
		prev_ExecutorEnd(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);
}

/* Module load: the GUC, and the hooks when preloaded. */
void
_PG_init(void)
{
	DefineCustomStringVariable("pmhash_bench.exec_time_prefix",
							   "Count the execution times of top-level statements whose text starts with this.",
							   "Empty counts none.",
							   &exec_time_prefix, "", PGC_SUSET, 0, NULL, NULL, NULL);
	MarkGUCPrefixReserved("pmhash_bench");
	if (!process_shared_preload_libraries_in_progress)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = exec_time_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = exec_time_shmem_startup;
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = exec_time_ExecutorStart;
	prev_ExecutorRun = ExecutorRun_hook;
	ExecutorRun_hook = exec_time_ExecutorRun;
	prev_ExecutorEnd = ExecutorEnd_hook;
	ExecutorEnd_hook = exec_time_ExecutorEnd;
}

/* Raise an error unless the histogram exists. */
static void
check_preloaded(void)
{
	if (histogram == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pmhash_bench must be loaded via shared_preload_libraries to count execution times")));
}

/* Empty the histogram. */
Datum
pmhash_bench_exec_time_reset(PG_FUNCTION_ARGS)
{
	check_preloaded();
	for (int i = 0; i <= NBUCKETS; i++)
		pg_atomic_write_u64(&histogram->count[i], 0);
	pg_atomic_write_u64(&histogram->total_ns, 0);
	PG_RETURN_VOID();
}

/*
 * The counted executions: their number, mean, and the quantiles of the
 * array argument (each in [0, 1]) in microseconds, the upper edge of the
 * bucket where each falls; NULL for one among the executions of 100 us or
 * more.
 */
Datum
pmhash_bench_exec_times(PG_FUNCTION_ARGS)
{
	ArrayType  *quantiles = PG_GETARG_ARRAYTYPE_P(0);
	Datum	   *qvalues;
	bool	   *qnulls;
	int			nq;
	uint64		counts[NBUCKETS + 1];
	uint64		calls = 0;
	Datum	   *result;
	bool	   *result_nulls;
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	int			dims[1];
	int			lbs[1] = {1};

	check_preloaded();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	deconstruct_array(quantiles, FLOAT8OID, sizeof(float8), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &qvalues, &qnulls, &nq);
	for (int i = 0; i <= NBUCKETS; i++)
	{
		counts[i] = pg_atomic_read_u64(&histogram->count[i]);
		calls += counts[i];
	}
	result = palloc(Max(nq, 1) * sizeof(Datum));
	result_nulls = palloc(Max(nq, 1) * sizeof(bool));
	for (int q = 0; q < nq; q++)
	{
		double		f = qnulls[q] ? -1 : DatumGetFloat8(qvalues[q]);
		uint64		rank;
		uint64		seen = 0;
		int			i = 0;

		if (f < 0 || f > 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("quantiles must lie between 0 and 1")));
		/* the executions at or below the quantile: at least one */
		rank = Max((uint64) ceil(f * (double) calls), 1);
		while (i < NBUCKETS && seen + counts[i] < rank)
			seen += counts[i++];
		result_nulls[q] = calls == 0 || i == NBUCKETS;
		result[q] = Float8GetDatum((double) (i + 1) * BUCKET_NS / 1000.0);
	}
	dims[0] = nq;
	values[0] = Int64GetDatum((int64) calls);
	values[1] = Float8GetDatum(calls == 0 ? 0 :
							   (double) pg_atomic_read_u64(&histogram->total_ns) / calls / 1000.0);
	values[2] = PointerGetDatum(construct_md_array(result, result_nulls, 1, dims, lbs, FLOAT8OID,
												   sizeof(float8), FLOAT8PASSBYVAL,
												   TYPALIGN_DOUBLE));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
