/*-------------------------------------------------------------------------
 *
 * pmbuild.c
 *	  Building a pmhash index: bulk build from the heap, and the empty
 *	  index of an unlogged table's init fork.
 *
 * The heap scan collects (hash, TID) entries in memory, up to
 * maintenance_work_mem.  The first batch, usually the only one, fixes the
 * number of shards from the number of entries seen (unless the shards
 * reloption sets it) and creates the file.  A full batch is sorted by shard
 * and spilled to a temporary file (a run on a logical tape, as tuplesort
 * spills); at the end of the scan the last batch, sorted by shard too, is
 * merged with every run shard by shard, and each shard's segment is
 * written in one go.  However many batches it took, the build writes each
 * shard once and lays the file out as a build in one batch would.  Nobody
 * can see the index while it is built, so flushing waits for the end.
 * With WAL, the build logs the new file and every shard's content, so that
 * standbys and archive recovery rebuild the same index.
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

#include "access/parallel.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xlog.h"
#include "catalog/index.h"
#include "commands/progress.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/pg_bitutils.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/logtape.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "pmhash.h"

#define ENTRIES_PER_SHARD	2048	/* target size of a shard at build time */
#define PROGRESS_EVERY		256		/* heap tuples between progress reports */

/* Subphases of a build in pg_stat_progress_create_index (pmhashbuildphasename) */
#define BUILD_PHASE_SCAN	2		/* the heap scan, spilling full batches */
#define BUILD_PHASE_LOAD	3		/* moving the entries into the shards */
#define BUILD_PHASE_UNIQUE	4		/* the duplicate check of a unique index */
#define BUILD_PHASE_SYNC	5		/* making the file durable */
#define MIN_SHARD_BITS		9		/* 512: bucket slots then keep every hash bit */

typedef struct BuildState
{
	Relation	index;
	PmhEntry   *entries;
	uint64		nentries;
	uint64		maxentries;
	bool		created;
	uint32		shard_bits;		/* the file's, fixed at the first batch */
	LogicalTapeSet *tapes;		/* full batches spilled, one run each */
	LogicalTape **runs;
	int			nruns;
	int			maxruns;
	bool		transactional;	/* an abort removes the new file */
	bool		progress;		/* report to pg_stat_progress_create_index */
	int64		loaded;			/* entries moved into the shards */
	double		index_tuples;
	BlockNumber heap_blocks;	/* the table's size when the build started */
	BlockNumber blocks_seen;	/* heap blocks that gave entries so far */
	BlockNumber last_block;
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
 * The entries the whole build will have, for choosing the shard count at
 * the first batch: exact if the table fit in one batch, else extrapolated
 * from the heap blocks the batch came from.
 */
static double
expected_entries(BuildState *bs)
{
	if (bs->nentries < bs->maxentries || bs->blocks_seen == 0)
		return (double) bs->nentries;
	return (double) bs->nentries * Max(bs->heap_blocks, bs->blocks_seen) / bs->blocks_seen;
}

/*
 * Sort a batch's entries by shard (a counting sort): returns the sorted
 * copy, and in *ends the end of each shard's entries in it.
 */
static PmhEntry *
sort_by_shard(BuildState *bs, uint64 **ends)
{
	uint32		nshards = UINT32_C(1) << bs->shard_bits;
	uint64	   *start = palloc0((nshards + 1) * sizeof(uint64));
	PmhEntry   *sorted = palloc_extended(Max(bs->nentries, 1) * sizeof(PmhEntry),
										 MCXT_ALLOC_HUGE);

	for (uint64 i = 0; i < bs->nentries; i++)
		start[pmh_shard_of(bs->entries[i].hash, bs->shard_bits) + 1]++;
	for (uint32 s = 0; s < nshards; s++)
		start[s + 1] += start[s];
	for (uint64 i = 0; i < bs->nentries; i++)
		sorted[start[pmh_shard_of(bs->entries[i].hash, bs->shard_bits)]++] = bs->entries[i];
	/* start[s] now holds the end of shard s */
	*ends = start;
	return sorted;
}

/*
 * Create the index file at the first batch, with the number of shards
 * that the entries seen so far call for.
 */
static void
create_file(BuildState *bs)
{
	bs->shard_bits = choose_shard_bits(bs->index, expected_entries(bs));
	(void) pmhash_create(bs->index, bs->shard_bits, true, bs->transactional);
	pmhash_leave();
	bs->created = true;
}

/*
 * Write a full batch, sorted by shard, to a run of its own on a logical
 * tape (a temporary file), for load_entries to merge.
 */
static void
spill_batch(BuildState *bs)
{
	uint64	   *ends;
	PmhEntry   *sorted;

	if (!bs->created)
		create_file(bs);
	if (bs->tapes == NULL)
		bs->tapes = LogicalTapeSetCreate(false, NULL, -1);
	if (bs->nruns == bs->maxruns)
	{
		bs->maxruns = Max(bs->maxruns * 2, 8);
		bs->runs = bs->runs ? repalloc(bs->runs, bs->maxruns * sizeof(LogicalTape *)) :
			palloc(bs->maxruns * sizeof(LogicalTape *));
	}
	sorted = sort_by_shard(bs, &ends);
	bs->runs[bs->nruns] = LogicalTapeCreate(bs->tapes);
	LogicalTapeWrite(bs->runs[bs->nruns], sorted, bs->nentries * sizeof(PmhEntry));
	bs->nruns++;
	pfree(sorted);
	pfree(ends);
	bs->nentries = 0;
}

/* Read the next entry of a run into *head; false at its end. */
static bool
read_run(LogicalTape *run, PmhEntry *head)
{
	size_t		got = LogicalTapeRead(run, head, sizeof(PmhEntry));

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
 * shard, read in step with the shards), then the last batch's; returns
 * their number, in m->merged.
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
 * Move the entries into the index: each shard is built once, at the build
 * fill, from its entries of every run spilled and of the last batch (in
 * memory), and logged in one REBUILD record.  However many batches the
 * build took, the file and its WAL are those of a build in one batch.
 */
static void
load_entries(BuildState *bs)
{
	PmhashLocal   *ix;
	uint32		nshards;
	uint64	   *ends;
	PmhEntry   *sorted;
	RunMerge	m = {0};

	if (!bs->created)
		create_file(bs);
	nshards = UINT32_C(1) << bs->shard_bits;
	sorted = sort_by_shard(bs, &ends);
	if (bs->nruns > 0)
	{
		m.heads = palloc(bs->nruns * sizeof(PmhEntry));
		m.more = palloc(bs->nruns * sizeof(bool));
		for (int r = 0; r < bs->nruns; r++)
		{
			LogicalTapeRewindForRead(bs->runs[r], BLCKSZ);
			m.more[r] = read_run(bs->runs[r], &m.heads[r]);
		}
	}

	ix = pmhash_open(bs->index, NULL);
	for (uint32 s = 0; s < nshards; s++)
	{
		uint64		from = s == 0 ? 0 : ends[s - 1];
		uint64		count = ends[s] - from;
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
		LogicalTapeSetClose(bs->tapes);
		pfree(bs->runs);
		pfree(m.heads);
		pfree(m.more);
		if (m.merged)
			pfree(m.merged);
	}
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
	if (ItemPointerGetBlockNumber(tid) != bs->last_block)
	{
		bs->last_block = ItemPointerGetBlockNumber(tid);
		bs->blocks_seen++;
	}
	e = &bs->entries[bs->nentries++];
	e->hash = pmhash_hash_key(bs->index, values, isnull);
	memcpy(&e->tid, tid, sizeof(PmhTid));
	e->flags = 0;
	bs->index_tuples++;
	if (bs->progress && (uint64) bs->index_tuples % PROGRESS_EVERY == 0)
		pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, (int64) bs->index_tuples);
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
 * transactional build (CREATE INDEX, REINDEX) reports its progress.
 */
static double
build_index(Relation heap, Relation index, IndexInfo *indexInfo, bool transactional,
			double *heap_tuples)
{
	BuildState	bs;
	PmhashLocal   *ix;

	memset(&bs, 0, sizeof(bs));
	bs.index = index;
	bs.transactional = transactional;
	bs.progress = transactional;
	bs.maxentries = Max((uint64) maintenance_work_mem * 1024 / (2 * sizeof(PmhEntry)), 1024);
	bs.heap_blocks = RelationGetNumberOfBlocks(heap);
	bs.last_block = InvalidBlockNumber;
	bs.entries = palloc_extended(bs.maxentries * sizeof(PmhEntry), MCXT_ALLOC_HUGE);
	bs.unique = indexInfo->ii_Unique;

	if (bs.progress)
		pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, BUILD_PHASE_SCAN);
	*heap_tuples = table_index_build_scan(heap, index, indexInfo, true, bs.progress,
										  build_callback, &bs, NULL);
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
