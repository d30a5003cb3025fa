/*-------------------------------------------------------------------------
 *
 * pmbuild.c
 *	  Building a pmhash index: bulk build from the heap, and the empty
 *	  index of an unlogged table's init fork.
 *
 * The heap scan collects (hash, TID) entries in memory, up to
 * maintenance_work_mem.  The first batch, usually the only one, fixes the
 * number of shards from the number of entries seen (unless the shards
 * reloption sets it), partitions the batch by shard and writes each shard's
 * segment in one go.  Later batches are merged into shards by rebuilding
 * those that receive many entries and inserting into the others, and the
 * last batch of several rebuilds every shard.  Nobody can see the index
 * while it is built, so flushing waits for the end.  With WAL, the build
 * logs the new file and, at its last batch, every shard's content once, so
 * that standbys and archive recovery rebuild the same index.
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
#include "utils/memutils.h"
#include "utils/rel.h"

#include "pmhash.h"

#define ENTRIES_PER_SHARD	2048	/* target size of a shard at build time */
#define PROGRESS_EVERY		256		/* heap tuples between progress reports */

/* Subphases of a build in pg_stat_progress_create_index (pmhashbuildphasename) */
#define BUILD_PHASE_SCAN	2		/* the heap scan, moving full batches in */
#define BUILD_PHASE_LOAD	3		/* moving the last batch into the shards */
#define BUILD_PHASE_UNIQUE	4		/* the duplicate check of a unique index */
#define BUILD_PHASE_SYNC	5		/* making the file durable */
#define MIN_SHARD_BITS		9		/* 512: bucket slots then keep every hash bit */

typedef struct BuildState
{
	Relation	index;
	PmhEntry   *entries;
	uint64		nentries;
	uint64		maxentries;
	int			batches;		/* batches moved into the index so far */
	bool		created;
	bool		transactional;	/* an abort removes the new file */
	bool		progress;		/* report to pg_stat_progress_create_index */
	bool		loading;		/* the last batch: report entries moved in */
	int64		loaded;
	double		index_tuples;
	BlockNumber heap_blocks;	/* the table's size when the build started */
	BlockNumber blocks_seen;	/* heap blocks that gave entries so far */
	BlockNumber last_block;
	bool		unique;			/* a unique index: remember which tuples are dead */
	ItemPointer dead;			/* TIDs of tuples that are not alive */
	int			ndead;
	int			maxdead;
} BuildState;

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
 * Whether a built shard takes the given number of further entries without
 * passing the build fill; if not, it is rebuilt with them at that fill, so
 * that the finished index leaves the same room before growth however many
 * batches the build took.
 */
static bool
fits_at_build_fill(BuildState *bs, PmhashShardState *state, const PmhSegment *seg,
				   uint64 entries)
{
	double		capacity = (double) seg->nbuckets * PMH_BUCKET_SLOTS *
		pmhash_build_fill(bs->index);

	return (double) (state->counts.slots + entries) <= capacity;
}

/* Insert a batch's entries of one shard one by one (shard lock held). */
static PmhStatus
insert_entries(PmhashLocal *ix, uint32 shard, const PmhEntry *entries, uint64 count)
{
	PmhashShardState *state = &ix->share->shards[shard];

	for (uint64 i = 0; i < count; i++)
	{
		PmhSegment	seg;
		PmhStatus	st;

		/* a growth may have replaced the segment */
		pmhash_shard_segment(ix, shard, &seg);
		st = pmh_table_insert(&ix->table, &seg, &state->counts, entries[i].hash, entries[i].tid,
							  0, PMH_INSERT_NEW, 0);
		if (st != PMH_OK)
			return st;
	}
	return PMH_OK;
}

/*
 * Move a batch of entries into the index, shard by shard: a shard whose
 * entries do not fit below the build fill is rebuilt at that fill, else
 * they are inserted.  Batches before the last write no WAL.  The last batch
 * of a build that took several rebuilds every shard, so that each shard's
 * content is logged once, in one REBUILD record; sweeping the shards in
 * order also lets each new segment reuse the space the previous ones left.
 */
static void
flush_batch(BuildState *bs, bool last)
{
	PmhashLocal   *ix;
	uint32		nshards;
	uint64	   *start;
	PmhEntry   *parted;
	bool		merge_all = last && bs->batches > 0;

	if (!bs->created)
	{
		ix = pmhash_create(bs->index, choose_shard_bits(bs->index, expected_entries(bs)), true,
						bs->transactional);
		bs->created = true;
	}
	else
		ix = pmhash_open(bs->index, NULL);
	/* nobody sees the index before its build ends, nor replays a part of it */
	if (!last)
		ix->logged = false;
	nshards = UINT32_C(1) << ix->table.shard_bits;

	/* counting sort by shard */
	start = palloc0((nshards + 1) * sizeof(uint64));
	parted = palloc_extended(Max(bs->nentries, 1) * sizeof(PmhEntry), MCXT_ALLOC_HUGE);
	for (uint64 i = 0; i < bs->nentries; i++)
		start[pmh_shard_of(bs->entries[i].hash, ix->table.shard_bits) + 1]++;
	for (uint32 s = 0; s < nshards; s++)
		start[s + 1] += start[s];
	for (uint64 i = 0; i < bs->nentries; i++)
		parted[start[pmh_shard_of(bs->entries[i].hash, ix->table.shard_bits)]++] = bs->entries[i];
	/* start[s] now holds the end of shard s */

	for (uint32 s = 0; s < nshards; s++)
	{
		uint64		from = s == 0 ? 0 : start[s - 1];
		uint64		count = start[s] - from;
		PmhashShardState *state = &ix->share->shards[s];
		LWLock	   *lock = pmhash_shard_lock(ix->share, s);
		PmhSegment	seg;
		PmhStatus	st = PMH_OK;

		if (count == 0 && !merge_all)
			continue;
		CHECK_FOR_INTERRUPTS();
		LWLockAcquire(lock, LW_EXCLUSIVE);
		pmhash_shard_segment(ix, s, &seg);
		if (merge_all || seg.unit == 0 || !fits_at_build_fill(bs, state, &seg, count))
		{
			if (count > 0 || seg.unit != 0)
				st = pmh_table_rebuild(&ix->table, &seg, parted + from, count, 0,
									   pmhash_build_fill(bs->index), 0, &state->counts);
		}
		else
			st = insert_entries(ix, s, parted + from, count);
		LWLockRelease(lock);
		if (bs->loading)
		{
			bs->loaded += count;
			pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, bs->loaded);
		}
		if (st == PMH_CORRUPT)
			pmhash_raise_shard_damaged(RelationGetRelationName(bs->index), s);
		if (st != PMH_OK)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("pmhash index \"%s\" shard %u cannot hold its entries",
							RelationGetRelationName(bs->index), s),
					 errhint("Use more shards: WITH (shards = N).")));
	}
	pmhash_leave();
	pfree(parted);
	pfree(start);
	bs->nentries = 0;
	bs->batches++;
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
		flush_batch(bs, false);
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
		const int64 values[] = {BUILD_PHASE_LOAD, (int64) bs.nentries, 0};

		pgstat_progress_update_multi_param(3, index, values);
		bs.loading = true;
	}
	flush_batch(&bs, true);
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
