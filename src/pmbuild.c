/*-------------------------------------------------------------------------
 *
 * pmbuild.c
 *	  Building a pmhash index: bulk build from the heap, serial or with
 *	  parallel workers, and the empty index of an unlogged table's init
 *	  fork.
 *
 * The heap scan collects (hash, TID) entries in memory, up to
 * maintenance_work_mem.  A full batch is sorted by the top 16 bits of its
 * hashes (an order that sorts it by shard whatever the number of shards)
 * and spilled to a temporary file, a run.  At the end of the scan the
 * number of entries fixes the number of shards (unless the shards
 * reloption sets it) and the file is created; the last batch, sorted the
 * same way, is merged with every run shard by shard, and each shard's
 * segment is written in one go.  However many batches it took, the build
 * writes each shard once and lays the file out as a build in one batch
 * would.  Nobody can see the index while it is built, so flushing waits
 * for the end.  With WAL, the build logs the new file and every shard's
 * content, so that standbys and archive recovery rebuild the same index.
 *
 * CREATE INDEX and REINDEX scan the heap with parallel workers when the
 * planner grants them (plan_create_index_workers, as for btree): each
 * worker collects and spills the entries of the blocks it scans into a
 * shared file set, and the leader, which scans too, merges their runs
 * with its own.  Only the leader touches the index file.
 *
 * The same build repairs, automatically and with a LOG line, a file that
 * recovery could not bring up to date.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmbuild.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>

#include "access/parallel.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xlog.h"
#include "catalog/index.h"
#include "commands/progress.h"
#include "commands/tablespace.h"
#include "executor/instrument.h"
#include "miscadmin.h"
#include "optimizer/optimizer.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "port/pg_bitutils.h"
#include "storage/buffile.h"
#include "storage/bufmgr.h"
#include "storage/dsm.h"
#include "storage/lmgr.h"
#include "storage/sharedfileset.h"
#include "storage/shm_toc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "pmhash.h"

#define ENTRIES_PER_SHARD	2048	/* target size of a shard at build time */
#define PROGRESS_EVERY		256		/* heap tuples between progress reports */

/* Subphases of a build in pg_stat_progress_create_index (pmhashbuildphasename) */
#define BUILD_PHASE_SCAN	2		/* the heap scan, spilling full batches */
#define BUILD_PHASE_LOAD	3		/* moving the entries into the shards */
#define BUILD_PHASE_UNIQUE	4		/* the duplicate check of a unique index */
#define BUILD_PHASE_SYNC	5		/* making the file durable */
#define MIN_SHARD_BITS		9		/* 512: bucket slots then keep every hash bit */

/* Batches are sorted by this many top bits of the hash: by shard, for any shard count */
#define PREFIX_BITS			PMH_MAX_SHARD_BITS
#define NPREFIXES			(UINT32_C(1) << PREFIX_BITS)

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

/* The leader's handle on its parallel workers. */
typedef struct ParallelBuild
{
	ParallelContext *pcxt;
	BuildShared *shared;
	ParallelTableScanDesc scan;
	Snapshot	snapshot;
	BufferUsage *buffer_usage;
	WalUsage   *wal_usage;
} ParallelBuild;

typedef struct BuildState
{
	Relation	index;
	PmhEntry   *entries;		/* the current batch */
	uint64		nentries;
	uint64		maxentries;
	BufFile   **runs;			/* full batches spilled, one file each */
	int			nruns;
	int			maxruns;
	SharedFileSet *fileset;		/* a worker's: where its runs go */
	dsm_segment *runs_seg;		/* the leader's: the segment of that file set */
	pg_atomic_uint64 *collected;	/* a parallel build's shared entry count */
	bool		transactional;	/* an abort removes the new file */
	bool		progress;		/* report to pg_stat_progress_create_index */
	int64		loaded;			/* entries moved into the shards */
	double		index_tuples;	/* entries collected */
	uint32		shard_bits;		/* the file's, fixed when the scan is over */
	bool		unique;			/* a unique index: remember which tuples are dead */
	ItemPointer dead;			/* TIDs of tuples that are not alive */
	int			ndead;
	int			maxdead;
} BuildState;

/* The merge of the spilled runs, shard by shard (load_entries). */
typedef struct RunMerge
{
	PmhEntry   *heads;			/* each run's next entry */
	bool	   *more;			/* whether heads[r] holds one */
	PmhEntry   *merged;			/* one shard's entries */
	uint64		maxmerged;
} RunMerge;

PGDLLEXPORT void pmhash_parallel_build_main(dsm_segment *seg, shm_toc *toc);

/* The bucket fill of a build: the fillfactor, leaving room before growth. */
double
pmhash_build_fill(Relation index)
{
	PmhashOptions *opts = (PmhashOptions *) index->rd_options;
	int			fillfactor = opts ? opts->fillfactor : PMHASH_DEFAULT_FILLFACTOR;

	return Min(fillfactor / 100.0, PMH_MAX_BUILD_FILL);
}

/* Shard bits for an index: from the reloption, else from the entry count. */
static uint32
choose_shard_bits(Relation index, double entries)
{
	PmhashOptions *opts = (PmhashOptions *) index->rd_options;
	uint32		bits = MIN_SHARD_BITS;

	if (opts && opts->shards > 0)
		return (uint32) pg_leftmost_one_pos32((uint32) opts->shards);
	while (bits < PMH_MAX_SHARD_BITS &&
		   entries > (double) ENTRIES_PER_SHARD * (double) (UINT64CONST(1) << bits))
		bits++;
	return bits;
}

/*
 * Sort a batch's entries by the top PREFIX_BITS bits of their hashes (a
 * counting sort): returns the sorted copy, and in *ends the end of each
 * prefix's entries in it.
 */
static PmhEntry *
sort_by_prefix(BuildState *bs, uint64 **ends)
{
	uint64	   *next = palloc0((NPREFIXES + 1) * sizeof(uint64));
	PmhEntry   *sorted = palloc_extended(Max(bs->nentries, 1) * sizeof(PmhEntry),
										 MCXT_ALLOC_HUGE);

	for (uint64 i = 0; i < bs->nentries; i++)
		next[pmh_shard_of(bs->entries[i].hash, PREFIX_BITS) + 1]++;
	for (uint32 p = 0; p < NPREFIXES; p++)
		next[p + 1] += next[p];
	for (uint64 i = 0; i < bs->nentries; i++)
		sorted[next[pmh_shard_of(bs->entries[i].hash, PREFIX_BITS)]++] = bs->entries[i];
	/* next[p] now holds the end of prefix p */
	*ends = next;
	return sorted;
}

/* Add a file to the runs that load_entries merges. */
static void
add_run(BuildState *bs, BufFile *run)
{
	if (bs->nruns == bs->maxruns)
	{
		bs->maxruns = Max(bs->maxruns * 2, 8);
		bs->runs = bs->runs ? repalloc(bs->runs, bs->maxruns * sizeof(BufFile *)) :
			palloc(bs->maxruns * sizeof(BufFile *));
	}
	bs->runs[bs->nruns++] = run;
}

/* Create a file of a worker's in the shared file set, named after the worker. */
static BufFile *
create_worker_file(BuildState *bs, const char *what)
{
	char		name[MAXPGPATH];

	snprintf(name, sizeof(name), "%d.%s", ParallelWorkerNumber, what);
	return BufFileCreateFileSet(&bs->fileset->fs, name);
}

/* Open, for reading, a file that a worker left in the shared file set. */
static BufFile *
open_worker_file(SharedFileSet *fileset, int worker, const char *what)
{
	char		name[MAXPGPATH];

	snprintf(name, sizeof(name), "%d.%s", worker, what);
	return BufFileOpenFileSet(&fileset->fs, name, O_RDONLY, false);
}

/*
 * Write the current batch, sorted by hash prefix, to a run: a temporary
 * file of the leader's, or a worker's file in the shared file set.
 */
static void
spill_batch(BuildState *bs)
{
	uint64	   *ends;
	PmhEntry   *sorted;

	if (bs->nentries == 0)
		return;
	sorted = sort_by_prefix(bs, &ends);
	if (bs->fileset)
	{
		char		run[32];
		BufFile    *file;

		snprintf(run, sizeof(run), "%d", bs->nruns++);
		file = create_worker_file(bs, run);
		BufFileWrite(file, sorted, bs->nentries * sizeof(PmhEntry));
		BufFileExportFileSet(file);
		BufFileClose(file);
	}
	else
	{
		BufFile    *file = BufFileCreateTemp(false);

		BufFileWrite(file, sorted, bs->nentries * sizeof(PmhEntry));
		if (BufFileSeek(file, 0, 0, SEEK_SET) != 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("pmhash build: could not rewind a temporary file: %m")));
		add_run(bs, file);
	}
	pfree(sorted);
	pfree(ends);
	bs->nentries = 0;
}

/* Read the next entry of a run into *head; false at its end. */
static bool
read_run(BufFile *run, PmhEntry *head)
{
	size_t		got = BufFileRead(run, head, sizeof(PmhEntry));

	if (got != 0 && got != sizeof(PmhEntry))
		elog(ERROR, "pmhash build: short read of a spilled batch");
	return got != 0;
}

/* Make room for count entries in a merge's buffer. */
static void
reserve_merged(RunMerge *m, uint64 count)
{
	if (count <= m->maxmerged)
		return;
	m->maxmerged = Max(count, Max(m->maxmerged * 2, 4096));
	m->merged = m->merged ? repalloc_huge(m->merged, m->maxmerged * sizeof(PmhEntry)) :
		palloc_extended(m->maxmerged * sizeof(PmhEntry), MCXT_ALLOC_HUGE);
}

/*
 * Gather one shard's entries: those of every spilled run (each sorted by
 * hash prefix, so read in step with the shards), then the last batch's;
 * returns their number, in m->merged.
 */
static uint64
merge_shard(BuildState *bs, RunMerge *m, uint32 shard, const PmhEntry *last, uint64 nlast)
{
	uint64		n = 0;

	for (int r = 0; r < bs->nruns; r++)
	{
		while (m->more[r] && pmh_shard_of(m->heads[r].hash, bs->shard_bits) == shard)
		{
			reserve_merged(m, n + 1);
			m->merged[n++] = m->heads[r];
			m->more[r] = read_run(bs->runs[r], &m->heads[r]);
		}
	}
	reserve_merged(m, n + nlast);
	memcpy(m->merged + n, last, nlast * sizeof(PmhEntry));
	return n + nlast;
}

/*
 * Create the index file, with the number of shards that the entries call
 * for, and move the entries into it: each shard is built once, at the
 * build fill, from its entries of every run spilled and of the last batch
 * (in memory), and logged in one REBUILD record.  However many batches
 * and participants the build took, the file and its WAL are those of a
 * build in one batch.
 */
static void
load_entries(BuildState *bs)
{
	PmhashLocal *ix;
	uint32		nshards;
	uint32		shift;
	uint64	   *ends;
	PmhEntry   *sorted;
	RunMerge	m = {0};

	bs->shard_bits = choose_shard_bits(bs->index, bs->index_tuples);
	(void) pmhash_create(bs->index, bs->shard_bits, true, bs->transactional);
	pmhash_leave();
	nshards = UINT32_C(1) << bs->shard_bits;
	shift = PREFIX_BITS - bs->shard_bits;
	sorted = sort_by_prefix(bs, &ends);
	if (bs->nruns > 0)
	{
		m.heads = palloc(bs->nruns * sizeof(PmhEntry));
		m.more = palloc(bs->nruns * sizeof(bool));
		for (int r = 0; r < bs->nruns; r++)
			m.more[r] = read_run(bs->runs[r], &m.heads[r]);
	}

	ix = pmhash_open(bs->index, NULL);
	for (uint32 s = 0; s < nshards; s++)
	{
		uint64		from = s == 0 ? 0 : ends[(s << shift) - 1];
		uint64		count = ends[((s + 1) << shift) - 1] - from;
		const PmhEntry *entries = sorted + from;
		PmhSegment	seg;
		PmhStatus	st;

		if (bs->nruns > 0)
		{
			count = merge_shard(bs, &m, s, entries, count);
			entries = m.merged;
		}
		if (count == 0)
			continue;
		CHECK_FOR_INTERRUPTS();
		LWLockAcquire(pmhash_shard_lock(ix->share, s), LW_EXCLUSIVE);
		pmhash_shard_segment(ix, s, &seg);
		st = pmh_table_rebuild(&ix->table, &seg, entries, count, 0, pmhash_build_fill(bs->index), 0,
							   &ix->share->shards[s].counts);
		LWLockRelease(pmhash_shard_lock(ix->share, s));
		if (bs->progress)
		{
			bs->loaded += count;
			pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, bs->loaded);
		}
		if (st != PMH_OK)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("pmhash index \"%s\" shard %u cannot hold its entries",
							RelationGetRelationName(bs->index), s),
					 errhint("Use more shards: WITH (shards = N).")));
	}
	pmhash_leave();
	if (bs->nruns > 0)
	{
		for (int r = 0; r < bs->nruns; r++)
			BufFileClose(bs->runs[r]);
		pfree(bs->runs);
		pfree(m.heads);
		pfree(m.more);
		if (m.merged)
			pfree(m.merged);
	}
	/* the last detach deletes the workers' files */
	if (bs->runs_seg)
		dsm_detach(bs->runs_seg);
	pfree(sorted);
	pfree(ends);
	bs->nentries = 0;
}

/* Heap scan callback: collect the entry of one heap tuple. */
static void
build_callback(Relation index pg_attribute_unused(), ItemPointer tid, Datum *values,
			   bool *isnull, bool tupleIsAlive, void *state)
{
	BuildState *bs = state;
	PmhEntry   *e;

	if (isnull[0])
		return;
	pmhash_check_tid(bs->index, tid);
	if (bs->unique && !tupleIsAlive)
	{
		if (bs->ndead == bs->maxdead)
		{
			bs->maxdead = Max(bs->maxdead * 2, 64);
			bs->dead = bs->dead ? repalloc_huge(bs->dead, bs->maxdead * sizeof(ItemPointerData)) :
				palloc_extended(bs->maxdead * sizeof(ItemPointerData), MCXT_ALLOC_HUGE);
		}
		bs->dead[bs->ndead++] = *tid;
	}
	if (bs->nentries == bs->maxentries)
		spill_batch(bs);
	e = &bs->entries[bs->nentries++];
	e->hash = pmhash_hash_key(bs->index, values, isnull);
	memcpy(&e->tid, tid, sizeof(PmhTid));
	e->flags = 0;
	bs->index_tuples++;
	if ((uint64) bs->index_tuples % PROGRESS_EVERY == 0)
	{
		uint64		collected = (uint64) bs->index_tuples;

		if (bs->collected)
			collected = pg_atomic_add_fetch_u64(bs->collected, PROGRESS_EVERY);
		if (bs->progress)
			pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, (int64) collected);
	}
}

/* Release a parallel build's snapshot and context, and leave parallel mode. */
static void
destroy_parallel(ParallelBuild *pb)
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
 * leader's own, which outlives the workers until load_entries has read
 * them.
 */
static ParallelBuild *
begin_parallel(BuildState *bs, Relation heap, Relation index, IndexInfo *info, int nworkers)
{
	ParallelBuild *pb = palloc0(sizeof(ParallelBuild));
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

/*
 * Wait for the workers of a parallel build to finish, and take over what
 * they collected: their runs, the dead tuples they saw, their counts.
 * Returns the number of heap tuples they scanned.
 */
static double
end_parallel(ParallelBuild *pb, BuildState *bs)
{
	ParallelContext *pcxt = pb->pcxt;
	SharedFileSet *fileset = dsm_segment_address(bs->runs_seg);
	double		heap_tuples = 0;

	WaitForParallelWorkersToFinish(pcxt);
	for (int w = 0; w < pcxt->nworkers_launched; w++)
	{
		WorkerResult *result = &pb->shared->results[w];

		InstrAccumParallelQuery(&pb->buffer_usage[w], &pb->wal_usage[w]);
		for (int r = 0; r < result->nruns; r++)
		{
			char		run[32];

			snprintf(run, sizeof(run), "%d", r);
			add_run(bs, open_worker_file(fileset, w, run));
		}
		if (result->ndead > 0)
		{
			BufFile    *file = open_worker_file(fileset, w, "dead");
			size_t		size = result->ndead * sizeof(ItemPointerData);

			if (bs->ndead + result->ndead > bs->maxdead)
			{
				bs->maxdead = bs->ndead + result->ndead;
				bs->dead = bs->dead ? repalloc_huge(bs->dead, bs->maxdead * sizeof(ItemPointerData)) :
					palloc_extended(bs->maxdead * sizeof(ItemPointerData), MCXT_ALLOC_HUGE);
			}
			if (BufFileRead(file, bs->dead + bs->ndead, size) != size)
				elog(ERROR, "pmhash build: short read of a worker's dead tuples");
			bs->ndead += result->ndead;
			BufFileClose(file);
		}
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
	BuildState	bs;

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
	result->heap_tuples = table_index_build_scan(heap, index, info, true, false, build_callback,
												 &bs, table_beginscan_parallel(heap, scan));
	spill_batch(&bs);
	if (bs.ndead > 0)
	{
		BufFile    *file = create_worker_file(&bs, "dead");

		BufFileWrite(file, bs.dead, bs.ndead * sizeof(ItemPointerData));
		BufFileExportFileSet(file);
		BufFileClose(file);
	}
	result->nruns = bs.nruns;
	result->ndead = bs.ndead;
	result->index_tuples = bs.index_tuples;
	InstrEndParallelQuery(&buffer_usage[ParallelWorkerNumber], &wal_usage[ParallelWorkerNumber]);

	index_close(index, index_lock);
	table_close(heap, heap_lock);
	dsm_detach(runs_seg);
}

/* Report two live tuples of a unique index's build with equal keys, as btree does. */
static void
raise_duplicated(Relation heap, Relation index, const Datum *key)
{
	char	   *desc = pmhash_key_description(index, key);

	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("could not create unique index \"%s\"", RelationGetRelationName(index)),
			 desc ? errdetail("Key %s is duplicated.", desc) : 0,
			 errtableconstraint(heap, RelationGetRelationName(index))));
}

/*
 * Compare the keys of a run of live entries with one hash code, pair by
 * pair (a run longer than one is rare unless keys repeat).
 */
static void
check_run(PmhashKeyReader *kr, const PmhEntry *run, uint64 count, MemoryContext keys_cxt)
{
	Datum	  **keys = MemoryContextAlloc(keys_cxt, count * sizeof(Datum *));
	uint64		nkeys = 0;

	for (uint64 i = 0; i < count; i++)
	{
		Datum		key[INDEX_MAX_KEYS];
		MemoryContext old;

		if (!pmhash_key_read_live(kr, (ItemPointer) &run[i].tid, key))
			continue;
		for (uint64 j = 0; j < nkeys; j++)
		{
			if (pmhash_keys_equal(kr, keys[j], key))
				raise_duplicated(kr->heap, kr->index, key);
		}
		old = MemoryContextSwitchTo(keys_cxt);
		keys[nkeys++] = pmhash_key_copy(kr->index, key);
		MemoryContextSwitchTo(old);
	}
	MemoryContextReset(keys_cxt);
}

/*
 * The duplicate check of a unique index's build: in each shard, the live
 * entries (those the heap scan found alive) that share a hash code must
 * have different keys.
 */
static void
check_unique(Relation heap, Relation index, IndexInfo *info, BuildState *bs)
{
	PmhashKeyReader kr;
	MemoryContext keys_cxt = AllocSetContextCreate(CurrentMemoryContext, "pmhash unique build",
												   ALLOCSET_DEFAULT_SIZES);
	PmhashLocal *ix = pmhash_open(index, NULL);
	uint32		nshards = UINT32_C(1) << ix->table.shard_bits;
	PmhEntry   *entries = NULL;
	uint64		maxentries = 0;
	int64		checked = 0;

	pmhash_leave();
	if (bs->progress)
	{
		const int	index[] = {PROGRESS_CREATEIDX_SUBPHASE, PROGRESS_CREATEIDX_TUPLES_TOTAL,
		PROGRESS_CREATEIDX_TUPLES_DONE};
		const int64 values[] = {BUILD_PHASE_UNIQUE, (int64) bs->index_tuples, 0};

		pgstat_progress_update_multi_param(3, index, values);
	}
	if (bs->ndead > 1)
		qsort(bs->dead, bs->ndead, sizeof(ItemPointerData), pmhash_tid_cmp);
	pmhash_key_reader_begin(&kr, heap, index, info);
	for (uint32 s = 0; s < nshards; s++)
	{
		uint64		count;
		uint64		live = 0;

		CHECK_FOR_INTERRUPTS();
		ix = pmhash_open(index, NULL);
		count = pmhash_shard_entries(index, ix, s, &entries, &maxentries);
		pmhash_leave();

		/* keep the live entries, sorted by hash code */
		for (uint64 i = 0; i < count; i++)
		{
			if (bs->ndead == 0 ||
				bsearch(&entries[i].tid, bs->dead, bs->ndead, sizeof(ItemPointerData),
						pmhash_tid_cmp) == NULL)
				entries[live++] = entries[i];
		}
		qsort(entries, live, sizeof(PmhEntry), pmh_entry_cmp);
		for (uint64 i = 0; i < live;)
		{
			uint64		j = i + 1;

			while (j < live && entries[j].hash == entries[i].hash)
				j++;
			if (j - i > 1)
				check_run(&kr, &entries[i], j - i, keys_cxt);
			i = j;
		}
		checked += count;
		if (bs->progress)
			pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, checked);
	}
	pmhash_key_reader_end(&kr);
	if (entries)
		pfree(entries);
	MemoryContextDelete(keys_cxt);
}

/*
 * Build the index file from the heap; returns the number of entries.  A
 * transactional build (CREATE INDEX, REINDEX) reports its progress, and
 * takes parallel workers if the planner grants them; a rebuild from the
 * table builds alone.
 */
static double
build_index(Relation heap, Relation index, IndexInfo *indexInfo, bool transactional,
			double *heap_tuples)
{
	BuildState	bs;
	ParallelBuild *pb = NULL;
	PmhashLocal *ix;
	int			nworkers = 0;

	memset(&bs, 0, sizeof(bs));
	bs.index = index;
	bs.transactional = transactional;
	bs.progress = transactional;
	bs.unique = indexInfo->ii_Unique;
	PrepareTempTablespaces();
	if (transactional)
		nworkers = plan_create_index_workers(RelationGetRelid(heap), RelationGetRelid(index));
	/* each participant's batch and its sorted copy share maintenance_work_mem */
	bs.maxentries = Max((uint64) maintenance_work_mem * 1024 /
						(2 * sizeof(PmhEntry) * (nworkers + 1)), 1024);
	if (nworkers > 0)
		pb = begin_parallel(&bs, heap, index, indexInfo, nworkers);
	bs.entries = palloc_extended(bs.maxentries * sizeof(PmhEntry), MCXT_ALLOC_HUGE);

	if (bs.progress)
		pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, BUILD_PHASE_SCAN);
	*heap_tuples = table_index_build_scan(heap, index, indexInfo, true, bs.progress,
										  build_callback, &bs,
										  pb ? table_beginscan_parallel(heap, pb->scan) : NULL);
	if (pb)
		*heap_tuples += end_parallel(pb, &bs);
	if (bs.progress)
	{
		const int	index[] = {PROGRESS_CREATEIDX_SUBPHASE, PROGRESS_CREATEIDX_TUPLES_TOTAL,
		PROGRESS_CREATEIDX_TUPLES_DONE};
		const int64 values[] = {BUILD_PHASE_LOAD, (int64) bs.index_tuples, 0};

		pgstat_progress_update_multi_param(3, index, values);
	}
	load_entries(&bs);
	pfree(bs.entries);
	if (bs.unique)
		check_unique(heap, index, indexInfo, &bs);

	if (bs.progress)
		pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, BUILD_PHASE_SYNC);
	ix = pmhash_open(index, NULL);
	pmhash_finish_build(ix);
	pmhash_leave();
	return bs.index_tuples;
}

/* ambuildphasename: the name of a build subphase (BUILD_PHASE_*). */
char *
pmhashbuildphasename(int64 phasenum)
{
	switch (phasenum)
	{
		case PROGRESS_CREATEIDX_SUBPHASE_INITIALIZE:
			return "initializing";
		case BUILD_PHASE_SCAN:
			return "scanning table";
		case BUILD_PHASE_LOAD:
			return "loading entries";
		case BUILD_PHASE_UNIQUE:
			return "checking uniqueness";
		case BUILD_PHASE_SYNC:
			return "writing the file";
	}
	return NULL;
}

/* ambuild: build the index from the heap. */
IndexBuildResult *
pmhashbuild(Relation heap, Relation index, IndexInfo *indexInfo)
{
	IndexBuildResult *result = palloc(sizeof(IndexBuildResult));

	if (RelationGetNumberOfBlocks(index) != 0)
		elog(ERROR, "index \"%s\" already contains data", RelationGetRelationName(index));
	pmhash_check_preloaded();
	if (indexInfo->ii_NullsNotDistinct)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("pmhash indexes do not support NULLS NOT DISTINCT"),
				 errdetail("A pmhash index does not store NULLs, so any number of rows may have a NULL key."),
				 errhint("Use a btree index for a unique key that treats NULLs as equal.")));
	result->index_tuples = build_index(heap, index, indexInfo, true, &result->heap_tuples);
	return result;
}

/*
 * Rebuild, from its table, an index whose file recovery could not bring up
 * to date.  An AccessExclusiveLock on the index keeps readers and writers
 * out meanwhile; the new file is not undone if the transaction aborts, but
 * a rebuild that fails leaves it marked to be rebuilt again, never half
 * built.  A unique index is not checked again (its rows were checked when
 * they were inserted), so the rebuild neither waits nor fails on the
 * tuple whose insert may have started it.
 */
static void
rebuild_from_table(Relation index)
{
	Oid			heap_oid = IndexGetRelation(RelationGetRelid(index), false);
	PmhashFileKey	key;
	char		path[MAXPGPATH];
	PmhFileHeader hdr;
	Relation	heap;
	IndexInfo  *info;
	double		heap_tuples;
	double		entries;

	if (RecoveryInProgress() || IsParallelWorker())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pmhash index \"%s\" must be rebuilt from its table, which cannot happen here",
						RelationGetRelationName(index)),
				 errdetail("Recovery could not bring the index file up to date, or the primary has not finished rebuilding it."),
				 errhint("It is rebuilt automatically on first use after promotion; or run REINDEX INDEX %s on the primary.",
						 quote_identifier(RelationGetRelationName(index)))));
	LockRelationOid(RelationGetRelid(index), AccessExclusiveLock);
	pmhash_file_key(index, &key);
	pmhash_file_path(&key, path);
	if (!pmhash_read_file_header(path, &hdr) ||
		!(hdr.state & (PMH_STATE_NEEDS_REBUILD | PMH_STATE_BUILDING)))
	{
		/* someone else rebuilt it meanwhile */
		UnlockRelationOid(RelationGetRelid(index), AccessExclusiveLock);
		return;
	}
	heap = table_open(heap_oid, AccessShareLock);
	info = BuildIndexInfo(index);
	info->ii_Unique = false;
	PG_TRY();
	{
		entries = build_index(heap, index, info, false, &heap_tuples);
	}
	PG_CATCH();
	{
		pmhash_set_file_state(path, PMH_STATE_NEEDS_REBUILD);
		PG_RE_THROW();
	}
	PG_END_TRY();
	ereport(LOG,
			(errmsg("pmhash index \"%s\" was rebuilt from table \"%s\" with %.0f entries",
					RelationGetRelationName(index), RelationGetRelationName(heap), entries),
			 errdetail("Recovery could not bring its file up to date.")));
	table_close(heap, AccessShareLock);
	UnlockRelationOid(RelationGetRelid(index), AccessExclusiveLock);
}

/*
 * Open an index for one operation: returns its local state with this
 * backend announced as a reader, after rebuilding the index from its table
 * if recovery could not bring its file up to date (then *rebuilt, if not
 * NULL, is set: the rebuild holds every tuple already in the table, such
 * as the one an insert is adding).  The caller must pmhash_leave() when
 * done.
 */
PmhashLocal *
pmhash_open(Relation index, bool *rebuilt)
{
	PmhashLocal *ix;

	while ((ix = pmhash_open_file(index)) == NULL)
	{
		rebuild_from_table(index);
		if (rebuilt)
			*rebuilt = true;
	}
	return ix;
}

/* ambuildempty: the init fork of an unlogged index holds just a metapage. */
void
pmhashbuildempty(Relation index)
{
	pmhash_check_preloaded();
	pmhash_write_init_meta(index, choose_shard_bits(index, 0));
}
