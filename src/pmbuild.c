/*-------------------------------------------------------------------------
 *
 * pmbuild.c
 *	  Building a pmhash index: bulk build from the heap, serial or with
 *	  parallel workers, its duplicate check, and the empty index of an
 *	  unlogged table's init fork.
 *
 * The heap scan collects (hash, TID) entries in memory, up to
 * maintenance_work_mem, and spills full batches to runs (pmbatch.c).  At
 * the end of the scan the
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
 * worker collects and spills the entries of the blocks it scans
 * (pmparallel.c), and the leader, which scans too, merges their runs with
 * its own.  Only the leader touches the index file.
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
#include "commands/tablespace.h"
#include "miscadmin.h"
#include "optimizer/optimizer.h"
#include "pgstat.h"
#include "port/pg_bitutils.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "pmbuild.h"

#define MIN_SHARD_BITS		9		/* 512: bucket slots then keep every hash bit */

/* Subphases of a build in pg_stat_progress_create_index (pmhashbuildphasename) */
#define PMHASH_REBUILD_LOCK_KEY		0x706d6873	/* "pmhs" */
#define PMHASH_REBUILD_LOCK_SPACE	3	/* after SQL's advisory locks, 1 and 2 */
#define BUILD_PHASE_SCAN	2		/* the heap scan, spilling full batches */
#define BUILD_PHASE_LOAD	3		/* moving the entries into the shards */
#define BUILD_PHASE_UNIQUE	4		/* the duplicate check of a unique index */
#define BUILD_PHASE_SYNC	5		/* making the file durable */

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
		   entries > (double) PMHASH_SHARD_ENTRIES * (double) (UINT64CONST(1) << bits))
		bits++;
	return bits;
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
load_entries(PmhashBuildState *bs)
{
	PmhashLocal *ix;
	uint32		nshards;
	uint32		shift;
	uint64	   *ends;
	PmhEntry   *sorted;
	PmhashRunMerge m;

	bs->shard_bits = choose_shard_bits(bs->index, bs->index_tuples);
	(void) pmhash_create(bs->index, bs->shard_bits, true, bs->transactional);
	pmhash_leave();
	nshards = UINT32_C(1) << bs->shard_bits;
	shift = PMHASH_PREFIX_BITS - bs->shard_bits;
	sorted = pmhash_batch_sort(bs, &ends);
	pmhash_runs_begin(bs, &m);

	ix = pmhash_open(bs->index, NULL);
	for (uint32 s = 0; s < nshards; s++)
	{
		uint64		from = s == 0 ? 0 : ends[(s << shift) - 1];
		uint64		count = ends[((s + 1) << shift) - 1] - from;
		const PmhEntry *entries = sorted + from;
		uint32		slot = pmh_slot_shard(s, bs->shard_bits);	/* shard s's */
		PmhSegment	seg;
		PmhStatus	st;

		if (bs->nruns > 0)
		{
			count = pmhash_runs_merge_shard(bs, &m, s, entries, count);
			entries = m.merged;
		}
		if (count == 0)
			continue;
		CHECK_FOR_INTERRUPTS();
		LWLockAcquire(pmhash_shard_lock(ix->share, slot), LW_EXCLUSIVE);
		pmhash_shard_segment(ix, slot, &seg);
		st = pmh_table_rebuild(&ix->table, &seg, entries, count, 0, pmhash_build_fill(bs->index), 0,
							   &pmhash_shard_state(ix->share, slot)->counts);
		LWLockRelease(pmhash_shard_lock(ix->share, slot));
		if (bs->progress)
		{
			bs->loaded += count;
			pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, bs->loaded);
		}
		if (st != PMH_OK)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("pmhash index \"%s\" shard %u cannot hold its entries",
							RelationGetRelationName(bs->index), slot),
					 errhint("Use more shards: WITH (shards = N).")));
	}
	pmhash_leave();
	pmhash_runs_end(bs, &m);
	pfree(sorted);
	pfree(ends);
	bs->nentries = 0;
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
check_unique(Relation heap, Relation index, IndexInfo *info, PmhashBuildState *bs)
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
		/* in hash order, the order a build reports its first duplicate in */
		count = pmhash_shard_entries(index, ix, pmh_slot_shard(s, ix->table.shard_bits),
									 &entries, &maxentries);
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
	PmhashBuildState bs;
	PmhashParallelBuild *pb = NULL;
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
		pb = pmhash_parallel_begin(&bs, heap, index, indexInfo, nworkers);
	bs.entries = palloc_extended(bs.maxentries * sizeof(PmhEntry), MCXT_ALLOC_HUGE);

	if (bs.progress)
		pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, BUILD_PHASE_SCAN);
	/* a rebuild from the table indexes rows of transactions in progress */
	*heap_tuples = table_index_build_range_scan(heap, index, indexInfo, true, !transactional,
												bs.progress, 0, InvalidBlockNumber,
												pmhash_build_collect, &bs,
												pb ? pmhash_parallel_scan(pb, heap) : NULL);
	if (pb)
		*heap_tuples += pmhash_parallel_end(pb, &bs);
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
 * The lock that backends needing a rebuild of one index take, and nothing
 * else: an advisory lock tag in pmhash's own key space (the fourth field
 * of an advisory tag is 1 or 2 for SQL's advisory locks).
 */
static void
rebuild_lock_tag(Relation index, LOCKTAG *tag)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, RelationGetRelid(index),
						 PMHASH_REBUILD_LOCK_KEY, PMHASH_REBUILD_LOCK_SPACE);
}

/*
 * Rebuild, from its table, an index whose file recovery could not bring up
 * to date.  Only the backends that need the rebuild take its lock: the
 * first rebuilds, the others wait for it (NOTICE lines say so) and then
 * find the file whole.  Until then every other backend that opens the
 * index is one of them, since the file is marked (pmattach.c), so no
 * reader or writer uses it meanwhile, and no lock on the index or its
 * table is raised: those held by the waiters, a query's AccessShareLock or
 * an insert's RowExclusiveLock, do not block the rebuild.  The table scan
 * indexes the rows of transactions in progress (anyvisible), such as a
 * waiter's own insert, which its aminsert then stores only if absent.  The
 * new file is not undone if the transaction aborts, but a rebuild that
 * fails leaves it marked to be rebuilt again, never half built.  A unique
 * index or an exclusion constraint is not checked again (its rows were
 * checked when they were inserted), so the rebuild neither waits nor fails
 * on a tuple of a waiting insert.
 */
static void
rebuild_from_table(Relation index)
{
	Oid			heap_oid = IndexGetRelation(RelationGetRelid(index), false);
	PmhashFileKey	key;
	char		path[MAXPGPATH];
	PmhFileHeader hdr;
	const char *err;
	const char *why;
	Relation	heap;
	IndexInfo  *info;
	double		heap_tuples;
	double		entries;
	LOCKTAG		tag;

	if (RecoveryInProgress() || IsParallelWorker())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pmhash index \"%s\" must be rebuilt from its table, which cannot happen here",
						RelationGetRelationName(index)),
				 errdetail("Recovery could not bring the index file up to date, or the primary has not finished rebuilding it."),
				 errhint("It is rebuilt automatically on first use after promotion; or run REINDEX INDEX %s on the primary.",
						 quote_identifier(RelationGetRelationName(index)))));
	rebuild_lock_tag(index, &tag);
	if (LockAcquire(&tag, ExclusiveLock, false, true) == LOCKACQUIRE_NOT_AVAIL)
	{
		ereport(NOTICE,
				(errmsg("waiting for pmhash index \"%s\" to be rebuilt from its table by another session",
						RelationGetRelationName(index))));
		(void) LockAcquire(&tag, ExclusiveLock, false, false);
	}
	pmhash_file_key(index, &key);
	pmhash_file_path(&key, path);
	err = pmhash_read_file_header(path, &hdr);
	if (err != pmh_older_format &&
		(err != NULL || !(hdr.state & (PMH_STATE_NEEDS_REBUILD | PMH_STATE_BUILDING))))
	{
		/* someone else rebuilt it meanwhile */
		LockRelease(&tag, ExclusiveLock, false);
		return;
	}
	why = err == pmh_older_format ?
		psprintf("Its file has format version %u, of an older pmhash; this one writes version %u.",
				 hdr.version, PMH_FORMAT_VERSION) :
		pstrdup("Recovery could not bring its file up to date.");
	heap = table_open(heap_oid, AccessShareLock);
	ereport(NOTICE,
			(errmsg("rebuilding pmhash index \"%s\" from table \"%s\"",
					RelationGetRelationName(index), RelationGetRelationName(heap)),
			 errdetail_internal("%s", why)));
	info = BuildIndexInfo(index);
	info->ii_Unique = false;
	info->ii_ExclusionOps = NULL;	/* nor an exclusion constraint's */
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
			 errdetail_internal("%s", why)));
	table_close(heap, AccessShareLock);
	LockRelease(&tag, ExclusiveLock, false);
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
