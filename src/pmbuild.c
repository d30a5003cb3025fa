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
 * those that receive many entries and inserting into the others.  Nobody
 * can see the index while it is built, so flushing waits for the end.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmbuild.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/tableam.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "pmhash.h"

#define ENTRIES_PER_SHARD	2048	/* target size of a shard at build time */
#define MIN_SHARD_BITS		4

typedef struct BuildState
{
	Relation	index;
	FmgrInfo   *hash_proc;
	Oid			collation;
	PmhEntry   *entries;
	uint64		nentries;
	uint64		maxentries;
	bool		created;
	double		index_tuples;
} BuildState;

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

/* Move a batch of entries into the index, shard by shard. */
static void
flush_batch(BuildState *bs)
{
	PmhIndex   *ix;
	uint32		nshards;
	uint64	   *start;
	PmhEntry   *parted;

	if (!bs->created)
	{
		ix = pmh_create(bs->index, choose_shard_bits(bs->index, (double) bs->nentries), true);
		bs->created = true;
	}
	else
		ix = pmh_open(bs->index);
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
		PmhShardState *state = &ix->slot->shards[s];
		LWLock	   *lock = pmh_shard_lock(ix->slot, s);
		uint64		desc;
		PmhStatus	st = PMH_OK;

		if (count == 0)
			continue;
		CHECK_FOR_INTERRUPTS();
		LWLockAcquire(lock, LW_EXCLUSIVE);
		desc = pg_atomic_read_u64(&state->desc);
		if (desc == 0 || count > state->counts.entries / 4)
			st = pmh_table_rebuild(&ix->table, s, desc, parted + from, count,
								   PMH_BUILD_FILL, 0, &state->counts);
		else
		{
			for (uint64 i = from; i < start[s] && st == PMH_OK; i++)
				st = pmh_table_insert(&ix->table, s, pg_atomic_read_u64(&state->desc),
									  &state->counts, parted[i].hash, parted[i].tid, 0);
		}
		LWLockRelease(lock);
		if (st != PMH_OK)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("pmhash index \"%s\" shard %u cannot hold its entries",
							RelationGetRelationName(bs->index), s),
					 errhint("Use more shards: WITH (shards = N).")));
	}
	pmh_leave();
	pfree(parted);
	pfree(start);
	bs->nentries = 0;
}

/* Heap scan callback: collect the entry of one heap tuple. */
static void
build_callback(Relation index, ItemPointer tid, Datum *values, bool *isnull,
			   bool tupleIsAlive, void *state)
{
	BuildState *bs = state;
	PmhEntry   *e;

	if (isnull[0])
		return;
	if (bs->nentries == bs->maxentries)
		flush_batch(bs);
	e = &bs->entries[bs->nentries++];
	e->hash = DatumGetUInt32(FunctionCall1Coll(bs->hash_proc, bs->collation, values[0]));
	memcpy(&e->tid, tid, sizeof(PmhTid));
	bs->index_tuples++;
}

/* ambuild: build the index from the heap. */
IndexBuildResult *
pmhashbuild(Relation heap, Relation index, IndexInfo *indexInfo)
{
	IndexBuildResult *result;
	BuildState	bs;
	double		reltuples;
	PmhIndex   *ix;

	if (RelationGetNumberOfBlocks(index) != 0)
		elog(ERROR, "index \"%s\" already contains data", RelationGetRelationName(index));
	pmhash_check_preloaded();

	memset(&bs, 0, sizeof(bs));
	bs.index = index;
	bs.hash_proc = index_getprocinfo(index, 1, 1);
	bs.collation = index->rd_indcollation[0];
	bs.maxentries = Max((uint64) maintenance_work_mem * 1024 / (2 * sizeof(PmhEntry)), 1024);
	bs.entries = palloc_extended(bs.maxentries * sizeof(PmhEntry), MCXT_ALLOC_HUGE);

	reltuples = table_index_build_scan(heap, index, indexInfo, true, true,
									   build_callback, &bs, NULL);
	flush_batch(&bs);
	pfree(bs.entries);

	ix = pmh_open(index);
	pmh_finish_deferred(ix);
	pmh_leave();

	result = palloc(sizeof(IndexBuildResult));
	result->heap_tuples = reltuples;
	result->index_tuples = bs.index_tuples;
	return result;
}

/* ambuildempty: the init fork of an unlogged index holds just a metapage. */
void
pmhashbuildempty(Relation index)
{
	pmhash_check_preloaded();
	pmh_write_init_meta(index, choose_shard_bits(index, 0));
}
