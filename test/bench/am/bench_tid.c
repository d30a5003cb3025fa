/*-------------------------------------------------------------------------
 *
 * bench_tid.c
 *	  pmhash_bench_tid(block, offset): a heap TID from two integers.
 *
 * The index-free bound of pgbench select-only fetches each row by its TID.
 * With prepared statements pgbench passes its variables as parameters, so
 * the TID has to be built from them in every execution; this immutable
 * function does it for a few nanoseconds, where text formatting and a cast
 * cost more than an index probe.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/bench/am/bench_tid.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "storage/itemptr.h"

PG_FUNCTION_INFO_V1(pmhash_bench_tid);

/* The TID (block, offset), checked to be one a heap tuple could have. */
Datum
pmhash_bench_tid(PG_FUNCTION_ARGS)
{
	int64		block = PG_GETARG_INT64(0);
	int32		offset = PG_GETARG_INT32(1);
	ItemPointer tid;

	if (block < 0 || block > (int64) MaxBlockNumber)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("block number %lld is out of range", (long long) block)));
	if (offset < FirstOffsetNumber || offset > MaxOffsetNumber)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("offset number %d is out of range", offset)));
	tid = palloc(sizeof(ItemPointerData));
	ItemPointerSet(tid, (BlockNumber) block, (OffsetNumber) offset);
	PG_RETURN_POINTER(tid);
}
