/*-------------------------------------------------------------------------
 *
 * pmparallel.c
 *	  The parallel workers of a build: starting them with a parallel heap
 *	  scan, a worker's work, and taking over what they collected.
 *
 * The leader and the workers share one parallel scan of the heap.  Each
 * worker collects the entries of the blocks it scans and spills all of
 * them to runs in a shared file set (pmbatch.c); that file set lives in a
 * DSM segment of the leader's own, not in the parallel context's, so the
 * runs outlive the workers until the leader has merged them.  Only the
 * leader touches the index file, its shared memory or WAL.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmparallel.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "executor/instrument.h"
#include "pgstat.h"
#include "storage/lmgr.h"
#include "storage/shm_toc.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "pmbuild.h"

/* Keys of a parallel build's shared memory */
#define PARALLEL_KEY_BUILD			UINT64CONST(0xB000000000000001)
#define PARALLEL_KEY_TABLE_SCAN		UINT64CONST(0xB000000000000002)
#define PARALLEL_KEY_QUERY_TEXT		UINT64CONST(0xB000000000000003)
#define PARALLEL_KEY_BUFFER_USAGE	UINT64CONST(0xB000000000000004)
#define PARALLEL_KEY_WAL_USAGE		UINT64CONST(0xB000000000000005)

/* What a worker of a parallel build leaves for the leader. */
typedef struct WorkerResult
{
	int			nruns;			/* runs it spilled: files "<worker>.<run>" */
	int			ndead;			/* TIDs of dead tuples: file "<worker>.dead" */
	double		heap_tuples;	/* heap tuples it scanned */
	double		index_tuples;	/* entries it collected */
} WorkerResult;

/* The shared state of a parallel build. */
typedef struct BuildShared
{
	Oid			heap_oid;
	Oid			index_oid;
	bool		concurrent;
	bool		unique;
	uint64		maxentries;		/* batch size of every participant */
	dsm_handle	runs_handle;	/* the leader's segment holding the runs' file set */
	pg_atomic_uint64 collected; /* entries collected by all participants */
	WorkerResult results[FLEXIBLE_ARRAY_MEMBER];	/* by worker number */
} BuildShared;

struct PmhashParallelBuild
{
	ParallelContext *pcxt;
	BuildShared *shared;
	ParallelTableScanDesc scan;
	Snapshot	snapshot;
	BufferUsage *buffer_usage;
	WalUsage   *wal_usage;
};

PGDLLEXPORT void pmhash_parallel_build_main(dsm_segment *seg, shm_toc *toc);

/* Release a parallel build's snapshot and context, and leave parallel mode. */
static void
destroy_parallel(PmhashParallelBuild *pb)
{
	if (IsMVCCSnapshot(pb->snapshot))
		UnregisterSnapshot(pb->snapshot);
	DestroyParallelContext(pb->pcxt);
	ExitParallelMode();
	pfree(pb);
}

/*
 * Start the parallel workers of a build, with a parallel scan of the heap
 * for them and the leader; NULL if none could be started (the leader then
 * builds alone).  The workers' runs go to a file set in a segment of the
 * leader's own, bs->runs_seg, which outlives the workers until the merge
 * has read them.
 */
PmhashParallelBuild *
pmhash_parallel_begin(PmhashBuildState *bs, Relation heap, Relation index, IndexInfo *info,
					  int nworkers)
{
	PmhashParallelBuild *pb = palloc0(sizeof(PmhashParallelBuild));
	ParallelContext *pcxt;
	Size		shared_size = add_size(offsetof(BuildShared, results),
									   mul_size(sizeof(WorkerResult), nworkers));
	Size		scan_size;
	Size		query_len = debug_query_string ? strlen(debug_query_string) : 0;
	BuildShared *shared;
	SharedFileSet *fileset;

	EnterParallelMode();
	pcxt = CreateParallelContext("pmhash", "pmhash_parallel_build_main", nworkers);
	pb->pcxt = pcxt;
	/* a concurrent build sees the rows of its snapshot; any other, all of them */
	pb->snapshot = info->ii_Concurrent ? RegisterSnapshot(GetTransactionSnapshot()) : SnapshotAny;
	scan_size = table_parallelscan_estimate(heap, pb->snapshot);
	shm_toc_estimate_chunk(&pcxt->estimator, shared_size);
	shm_toc_estimate_chunk(&pcxt->estimator, scan_size);
	shm_toc_estimate_chunk(&pcxt->estimator, mul_size(sizeof(BufferUsage), nworkers));
	shm_toc_estimate_chunk(&pcxt->estimator, mul_size(sizeof(WalUsage), nworkers));
	shm_toc_estimate_keys(&pcxt->estimator, 4);
	if (debug_query_string)
	{
		shm_toc_estimate_chunk(&pcxt->estimator, query_len + 1);
		shm_toc_estimate_keys(&pcxt->estimator, 1);
	}
	InitializeParallelDSM(pcxt);
	if (pcxt->seg == NULL)
		goto fail;

	bs->runs_seg = dsm_create(sizeof(SharedFileSet), 0);
	fileset = dsm_segment_address(bs->runs_seg);
	SharedFileSetInit(fileset, bs->runs_seg);

	shared = shm_toc_allocate(pcxt->toc, shared_size);
	memset(shared, 0, shared_size);
	shared->heap_oid = RelationGetRelid(heap);
	shared->index_oid = RelationGetRelid(index);
	shared->concurrent = info->ii_Concurrent;
	shared->unique = info->ii_Unique;
	shared->maxentries = bs->maxentries;
	shared->runs_handle = dsm_segment_handle(bs->runs_seg);
	pg_atomic_init_u64(&shared->collected, 0);
	shm_toc_insert(pcxt->toc, PARALLEL_KEY_BUILD, shared);
	pb->shared = shared;
	pb->scan = shm_toc_allocate(pcxt->toc, scan_size);
	table_parallelscan_initialize(heap, pb->scan, pb->snapshot);
	shm_toc_insert(pcxt->toc, PARALLEL_KEY_TABLE_SCAN, pb->scan);
	pb->buffer_usage = shm_toc_allocate(pcxt->toc, mul_size(sizeof(BufferUsage), nworkers));
	shm_toc_insert(pcxt->toc, PARALLEL_KEY_BUFFER_USAGE, pb->buffer_usage);
	pb->wal_usage = shm_toc_allocate(pcxt->toc, mul_size(sizeof(WalUsage), nworkers));
	shm_toc_insert(pcxt->toc, PARALLEL_KEY_WAL_USAGE, pb->wal_usage);
	if (debug_query_string)
	{
		char	   *query = shm_toc_allocate(pcxt->toc, query_len + 1);

		memcpy(query, debug_query_string, query_len + 1);
		shm_toc_insert(pcxt->toc, PARALLEL_KEY_QUERY_TEXT, query);
	}

	LaunchParallelWorkers(pcxt);
	ereport(DEBUG1,
			(errmsg_internal("pmhash build of index \"%s\": %d of %d parallel workers launched",
							 RelationGetRelationName(index), pcxt->nworkers_launched, nworkers)));
	if (pcxt->nworkers_launched == 0)
	{
		dsm_detach(bs->runs_seg);
		bs->runs_seg = NULL;
		goto fail;
	}
	/* a worker that fails to start must not leave the leader waiting */
	WaitForParallelWorkersToAttach(pcxt);
	bs->collected = &shared->collected;
	return pb;

fail:
	destroy_parallel(pb);
	return NULL;
}

/* The leader's part of the parallel heap scan. */
TableScanDesc
pmhash_parallel_scan(PmhashParallelBuild *pb, Relation heap)
{
	return table_beginscan_parallel(heap, pb->scan);
}

/*
 * Wait for the workers of a parallel build to finish, and take over what
 * they collected: their runs, the dead tuples they saw, their counts.
 * Returns the number of heap tuples they scanned.
 */
double
pmhash_parallel_end(PmhashParallelBuild *pb, PmhashBuildState *bs)
{
	ParallelContext *pcxt = pb->pcxt;
	double		heap_tuples = 0;

	WaitForParallelWorkersToFinish(pcxt);
	for (int w = 0; w < pcxt->nworkers_launched; w++)
	{
		WorkerResult *result = &pb->shared->results[w];

		InstrAccumParallelQuery(&pb->buffer_usage[w], &pb->wal_usage[w]);
		pmhash_batch_take_worker(bs, w, result->nruns, result->ndead);
		heap_tuples += result->heap_tuples;
		bs->index_tuples += result->index_tuples;
	}
	bs->collected = NULL;
	destroy_parallel(pb);
	return heap_tuples;
}

/*
 * Entry point of a parallel build's worker: scan its share of the heap,
 * spill everything it collects to runs in the shared file set, and leave
 * its counts for the leader.
 */
void
pmhash_parallel_build_main(dsm_segment *seg pg_attribute_unused(), shm_toc *toc)
{
	BuildShared *shared = shm_toc_lookup(toc, PARALLEL_KEY_BUILD, false);
	ParallelTableScanDesc scan = shm_toc_lookup(toc, PARALLEL_KEY_TABLE_SCAN, false);
	BufferUsage *buffer_usage = shm_toc_lookup(toc, PARALLEL_KEY_BUFFER_USAGE, false);
	WalUsage   *wal_usage = shm_toc_lookup(toc, PARALLEL_KEY_WAL_USAGE, false);
	WorkerResult *result = &shared->results[ParallelWorkerNumber];
	LOCKMODE	heap_lock = shared->concurrent ? ShareUpdateExclusiveLock : ShareLock;
	LOCKMODE	index_lock = shared->concurrent ? RowExclusiveLock : AccessExclusiveLock;
	dsm_segment *runs_seg;
	Relation	heap;
	Relation	index;
	IndexInfo  *info;
	PmhashBuildState bs;

	debug_query_string = shm_toc_lookup(toc, PARALLEL_KEY_QUERY_TEXT, true);
	pgstat_report_activity(STATE_RUNNING, debug_query_string);
	runs_seg = dsm_attach(shared->runs_handle);
	if (runs_seg == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pmhash build: could not attach to the leader's shared memory")));
	heap = table_open(shared->heap_oid, heap_lock);
	index = index_open(shared->index_oid, index_lock);
	info = BuildIndexInfo(index);
	info->ii_Concurrent = shared->concurrent;

	memset(&bs, 0, sizeof(bs));
	bs.index = index;
	bs.maxentries = shared->maxentries;
	bs.entries = palloc_extended(bs.maxentries * sizeof(PmhEntry), MCXT_ALLOC_HUGE);
	bs.unique = shared->unique;
	bs.fileset = dsm_segment_address(runs_seg);
	bs.collected = &shared->collected;
	SharedFileSetAttach(bs.fileset, runs_seg);

	InstrStartParallelQuery();
	result->heap_tuples = table_index_build_scan(heap, index, info, true, false,
												 pmhash_build_collect, &bs,
												 table_beginscan_parallel(heap, scan));
	pmhash_batch_spill(&bs);
	pmhash_batch_spill_dead(&bs);
	result->nruns = bs.nruns;
	result->ndead = bs.ndead;
	result->index_tuples = bs.index_tuples;
	InstrEndParallelQuery(&buffer_usage[ParallelWorkerNumber], &wal_usage[ParallelWorkerNumber]);

	index_close(index, index_lock);
	table_close(heap, heap_lock);
	dsm_detach(runs_seg);
}
