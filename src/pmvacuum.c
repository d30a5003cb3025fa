/*-------------------------------------------------------------------------
 *
 * pmvacuum.c
 *	  VACUUM support: removing dead entries and shrinking sparse shards.
 *
 * Shards are visited one at a time under their writer lock; readers go on
 * without waiting.  Each bucket whose entries die gets one commit-word
 * store.  A shard left nearly empty is rebuilt smaller, an empty one gives
 * its segment back.  Everything is durable before ambulkdelete returns,
 * because the heap reuses the dead TIDs right after.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmvacuum.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/vacuum.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "pmhash.h"

typedef struct DeadState
{
	IndexBulkDeleteCallback callback;
	void	   *callback_state;
} DeadState;

/* Core callback: whether VACUUM reports a TID dead. */
static int
tid_is_dead(void *arg, PmhTid tid)
{
	DeadState  *ds = arg;
	ItemPointerData ip;

	memcpy(&ip, &tid, sizeof(ItemPointerData));
	return ds->callback(&ip, ds->callback_state);
}

/* Live entries of an index according to its shard counters. */
static double
count_entries(PmhIndex *ix)
{
	uint32		nshards = UINT32_C(1) << ix->table.shard_bits;
	double		total = 0;

	for (uint32 s = 0; s < nshards; s++)
		total += (double) ix->slot->shards[s].counts.entries;
	return total;
}

/* Remove dead entries from one shard, shrinking it if it became sparse. */
static uint64
vacuum_shard(Relation index, PmhIndex *ix, uint32 shard, DeadState *ds)
{
	PmhShardState *state = &ix->slot->shards[shard];
	LWLock	   *lock = pmh_shard_lock(ix->slot, shard);
	uint64		removed = 0;
	uint64		desc;

	LWLockAcquire(lock, LW_EXCLUSIVE);
	desc = pg_atomic_read_u64(&state->desc);
	if (desc != 0)
	{
		PmhSegment	seg;

		pmh_segment_of(ix, desc, &seg);
		removed = pmh_bulk_delete(&seg, tid_is_dead, ds, 0, &ix->persist, &state->counts);
		if (state->counts.entries == 0 ||
			pmh_needs_shrink(&state->counts, seg.nbuckets, pmh_segment_header(&seg)->nposting))
		{
			if (pmh_table_rebuild(&ix->table, shard, desc, NULL, 0, PMH_REBUILD_FILL, 0,
								  &state->counts) != PMH_OK)
				elog(WARNING, "could not shrink shard %u of pmhash index \"%s\"",
					 shard, RelationGetRelationName(index));
		}
	}
	LWLockRelease(lock);
	return removed;
}

/* ambulkdelete */
IndexBulkDeleteResult *
pmhashbulkdelete(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
				 IndexBulkDeleteCallback callback, void *callback_state)
{
	Relation	index = info->index;
	DeadState	ds = {callback, callback_state};
	PmhIndex   *ix;
	uint32		nshards;

	if (stats == NULL)
		stats = palloc0(sizeof(IndexBulkDeleteResult));

	ix = pmh_open(index);
	nshards = UINT32_C(1) << ix->table.shard_bits;
	pmh_leave();
	for (uint32 s = 0; s < nshards; s++)
	{
		ix = pmh_open(index);
		stats->tuples_removed += (double) vacuum_shard(index, ix, s, &ds);
		pmh_leave();
		vacuum_delay_point();
	}
	ix = pmh_open(index);
	if (ix->ndirty > 0)
		pmh_sync_dirty(ix);
	stats->num_index_tuples = count_entries(ix);
	pmh_leave();
	stats->num_pages = RelationGetNumberOfBlocks(index);
	stats->estimated_count = false;
	return stats;
}

/* amvacuumcleanup: report statistics; nothing is left to clean. */
IndexBulkDeleteResult *
pmhashvacuumcleanup(IndexVacuumInfo *info, IndexBulkDeleteResult *stats)
{
	PmhIndex   *ix;

	if (info->analyze_only)
		return stats;
	if (stats == NULL)
	{
		stats = palloc0(sizeof(IndexBulkDeleteResult));
		ix = pmh_open(info->index);
		stats->num_index_tuples = count_entries(ix);
		pmh_leave();
	}
	stats->num_pages = RelationGetNumberOfBlocks(info->index);
	stats->estimated_count = false;
	return stats;
}
