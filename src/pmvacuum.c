/*-------------------------------------------------------------------------
 *
 * pmvacuum.c
 *	  VACUUM support: removing dead entries, settling the entries a crash
 *	  left unverified, and shrinking sparse shards.
 *
 * Shards are visited one at a time under their writer lock; readers go on
 * without waiting.  Each bucket whose entries die gets one commit-word
 * store, and the removed entries of a shard are WAL-logged as one record.
 * An unverified entry is removed if its TID lies past the end of the heap
 * or on an unused line pointer (a phantom of a crash), and confirmed
 * otherwise.  A shard left nearly empty is rebuilt smaller, an empty one
 * gives its segment back.  Everything is durable before ambulkdelete
 * returns, because the heap reuses the dead TIDs right after.
 *
 * Between VACUUMs, index scans remove the entries of rows they find dead
 * to every transaction (kill_prior_tuple), once the heap confirms it
 * (src/README, Dead entries).
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmvacuum.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/tableam.h"
#include "access/xlog.h"
#include "catalog/index.h"
#include "commands/vacuum.h"
#include "lib/qunique.h"
#include "storage/bufmgr.h"
#include "storage/bufpage.h"
#include "storage/lmgr.h"
#include "utils/rel.h"

#include "pmhash.h"

typedef struct VacuumState
{
	IndexBulkDeleteCallback callback;
	void	   *callback_state;
	Relation	index;
	Relation	heap;			/* opened when an unverified entry needs it */
	BlockNumber heap_blocks;
	PmhEntry   *removed;		/* removed entries of the shard, for WAL */
	uint64		nremoved;
	uint64		maxremoved;
	ItemPointer killed;			/* a scan's confirmed dead TIDs, sorted */
	int			nkilled;
} VacuumState;

/* TIDs confirmed dead by the heap in one call (TM_IndexDelete.id is int16) */
#define CONFIRM_BATCH		1024

/* Core callback: whether VACUUM reports a TID dead. */
static int
tid_is_dead(void *arg, PmhTid tid)
{
	VacuumState *vs = arg;
	ItemPointerData ip;

	memcpy(&ip, &tid, sizeof(ItemPointerData));
	return vs->callback(&ip, vs->callback_state);
}

/* Core callback: whether a TID is among those a scan found dead. */
static int
tid_is_killed(void *arg, PmhTid tid)
{
	VacuumState *vs = arg;
	ItemPointerData ip;

	memcpy(&ip, &tid, sizeof(ItemPointerData));
	return bsearch(&ip, vs->killed, vs->nkilled, sizeof(ItemPointerData), pmhash_tid_cmp) != NULL;
}

/* Core callback: whether an unverified TID points at nothing in the heap. */
static int
tid_is_phantom(void *arg, PmhTid tid)
{
	VacuumState *vs = arg;
	BlockNumber block = pmh_tid_block(tid);
	Buffer		buf;
	Page		page;
	bool		phantom;

	if (vs->heap == NULL)
	{
		vs->heap = table_open(IndexGetRelation(RelationGetRelid(vs->index), false),
							  AccessShareLock);
		vs->heap_blocks = RelationGetNumberOfBlocks(vs->heap);
	}
	if (block >= vs->heap_blocks)
		return 1;
	buf = ReadBuffer(vs->heap, block);
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	phantom = tid.offset > PageGetMaxOffsetNumber(page) ||
		!ItemIdIsUsed(PageGetItemId(page, tid.offset));
	UnlockReleaseBuffer(buf);
	return phantom;
}

/* Core callback: remember a removed entry for the shard's WAL record. */
static void
note_removed(void *arg, uint32 hash, PmhTid tid)
{
	VacuumState *vs = arg;

	if (vs->nremoved == vs->maxremoved)
	{
		vs->maxremoved = Max(256, vs->maxremoved * 2);
		vs->removed = vs->removed ?
			repalloc_huge(vs->removed, vs->maxremoved * sizeof(PmhEntry)) :
			palloc_extended(vs->maxremoved * sizeof(PmhEntry), MCXT_ALLOC_HUGE);
	}
	vs->removed[vs->nremoved].hash = hash;
	vs->removed[vs->nremoved].tid = tid;
	vs->removed[vs->nremoved].flags = 0;
	vs->nremoved++;
}

/* Live entries of an index according to its shard counters. */
static double
count_entries(PmhashLocal *ix)
{
	uint32		nshards = UINT32_C(1) << ix->table.shard_bits;
	double		total = 0;

	for (uint32 s = 0; s < nshards; s++)
		total += (double) ix->share->shards[s].counts.entries;
	return total;
}

/*
 * Delete what ops condemn from a shard's segment (its lock held), count the
 * removal in the shard's removals, and log the removed entries: DELETE, or
 * KILL with the conflict horizon for a scan's removal.
 */
static PmhStatus
delete_logged(PmhashLocal *ix, uint32 shard, const PmhSegment *seg, const PmhDeleteOps *ops,
			  VacuumState *vs, bool kill, TransactionId horizon, uint64 *removed)
{
	PmhashShardState *state = &ix->share->shards[shard];
	PmhStatus	st;

	vs->nremoved = 0;
	st = pmh_bulk_delete(seg, ops, ix->logged ? GetXLogInsertRecPtr() : 0, &ix->persist,
						 &state->counts, removed);
	if (*removed > 0)
	{
		/* a probe that sees the new count sees the removal */
		pg_write_barrier();
		state->removals++;
	}
	if (vs->nremoved > 0)
		pmhash_log_delete(&ix->node, shard, kill, horizon, vs->removed, vs->nremoved);
	return st;
}

/* Remove dead entries from one shard, log them, and shrink it if sparse. */
static uint64
vacuum_shard(PmhashLocal *ix, uint32 shard, VacuumState *vs)
{
	PmhashShardState *state = &ix->share->shards[shard];
	LWLock	   *lock = pmhash_shard_lock(ix->share, shard);
	PmhDeleteOps ops = {vs->callback ? tid_is_dead : NULL, tid_is_phantom,
	ix->logged ? note_removed : NULL, vs};
	uint64		removed = 0;
	PmhSegment	seg;
	PmhStatus	st = PMH_OK;

	LWLockAcquire(lock, LW_EXCLUSIVE);
	pmhash_shard_segment(ix, shard, &seg);
	if (seg.unit != 0)
	{
		st = delete_logged(ix, shard, &seg, &ops, vs, false, InvalidTransactionId, &removed);
		if (st == PMH_OK &&
			(state->counts.entries == 0 || pmh_needs_shrink(&state->counts, &seg)))
		{
			if (pmh_table_rebuild(&ix->table, &seg, NULL, 0, 0, PMH_REBUILD_FILL, 0,
								  &state->counts) != PMH_OK)
				elog(WARNING, "could not shrink shard %u of pmhash index \"%s\"",
					 shard, RelationGetRelationName(vs->index));
		}
	}
	LWLockRelease(lock);
	/* what was removed elsewhere in the shard is logged; the damage stays */
	if (st == PMH_CORRUPT)
		pmhash_raise_shard_damaged(RelationGetRelationName(vs->index), shard);
	return removed;
}

/* Visit every shard: remove what callback condemns (if any) and settle unverified entries. */
static double
vacuum_shards(Relation index, IndexBulkDeleteCallback callback, void *callback_state,
			  double *remaining)
{
	VacuumState vs;
	PmhashLocal   *ix;
	uint32		nshards;
	double		removed = 0;

	memset(&vs, 0, sizeof(vs));
	vs.callback = callback;
	vs.callback_state = callback_state;
	vs.index = index;
	ix = pmhash_open(index, NULL);
	nshards = UINT32_C(1) << ix->table.shard_bits;
	pmhash_leave();
	for (uint32 s = 0; s < nshards; s++)
	{
		ix = pmhash_open(index, NULL);
		if (callback != NULL || ix->share->shards[s].counts.unverified > 0)
			removed += (double) vacuum_shard(ix, s, &vs);
		pmhash_leave();
		vacuum_delay_point();
	}
	ix = pmhash_open(index, NULL);
	if (ix->ndirty > 0)
		pmhash_sync_dirty(ix);
	*remaining = count_entries(ix);
	pmhash_leave();
	if (vs.heap)
		table_close(vs.heap, AccessShareLock);
	if (vs.removed)
		pfree(vs.removed);
	return removed;
}

/*
 * Record, before a scan probes one hash code, the state of its shard that
 * the removal of entries the scan finds dead depends on.
 */
void
pmhash_note_probe(PmhashLocal *ix, uint32 code, PmhashKilled *killed)
{
	const volatile PmhashShardState *state =
		&ix->share->shards[pmh_shard_of(code, ix->table.shard_bits)];

	killed->code = code;
	killed->share_gen = ix->share_gen;
	killed->removals = state->removals;
	killed->ntids = 0;
	/* the probe must not see the shard older than this count */
	pg_read_barrier();
}

/* Sort a scan's dead TIDs and drop repeats. */
static void
sort_killed(PmhashKilled *killed)
{
	qsort(killed->tids, killed->ntids, sizeof(ItemPointerData), pmhash_tid_cmp);
	killed->ntids = qunique(killed->tids, killed->ntids, sizeof(ItemPointerData),
							pmhash_tid_cmp);
}

/*
 * Add a TID whose row is dead to every transaction.  A cursor going back
 * and forth reports TIDs again: repeats go before the array grows.
 */
void
pmhash_add_killed(PmhashKilled *killed, ItemPointer tid)
{
	if (killed->ntids == killed->maxtids)
	{
		if (killed->ntids > 0)
			sort_killed(killed);
		/* grow unless dropping repeats freed half of it */
		if (killed->maxtids == 0 || killed->ntids > killed->maxtids / 2)
		{
			killed->maxtids = Max(64, killed->maxtids * 2);
			killed->tids = killed->tids ?
				repalloc_huge(killed->tids, (Size) killed->maxtids * sizeof(ItemPointerData)) :
				palloc(killed->maxtids * sizeof(ItemPointerData));
		}
	}
	killed->tids[killed->ntids++] = *tid;
}

/*
 * Keep, of n TIDs (sorted, at most CONFIRM_BATCH), those whose whole HOT
 * chain the heap finds dead to every transaction, sorted; returns their
 * number, and advances *horizon to the newest transaction that deleted one
 * of them.
 */
static int
confirm_dead(Relation index, Relation heap, BlockNumber block, ItemPointer tids, int n,
			 TransactionId *horizon)
{
	TM_IndexDeleteOp delstate;
	TransactionId newest;
	int			kept = 0;

	delstate.irel = index;
	delstate.iblknum = block;
	delstate.bottomup = false;
	delstate.bottomupfreespace = 0;
	delstate.ndeltids = n;
	delstate.deltids = palloc(n * sizeof(TM_IndexDelete));
	delstate.status = palloc(n * sizeof(TM_IndexStatus));
	for (int i = 0; i < n; i++)
	{
		delstate.deltids[i].tid = tids[i];
		delstate.deltids[i].id = i;
		delstate.status[i].idxoffnum = i % MaxOffsetNumber + 1;
		delstate.status[i].knowndeletable = false;
		delstate.status[i].promising = false;
		delstate.status[i].freespace = 0;
	}
	newest = table_index_delete_tuples(heap, &delstate);
	if (TransactionIdIsValid(newest) &&
		(!TransactionIdIsValid(*horizon) || TransactionIdFollows(newest, *horizon)))
		*horizon = newest;
	/* deltids come back sorted by TID */
	for (int i = 0; i < delstate.ndeltids; i++)
	{
		if (delstate.status[delstate.deltids[i].id].knowndeletable)
			tids[kept++] = delstate.deltids[i].tid;
	}
	pfree(delstate.deltids);
	pfree(delstate.status);
	return kept;
}

/*
 * Remove the entries whose rows a scan found dead to every transaction
 * (kill_prior_tuple), all under the hash code it probed, and log them with
 * the conflict horizon of hot-standby queries (src/README, Dead entries).
 * The removal writes the index, so it takes the writers' lock on it for
 * its duration, and skips (leaving the entries to VACUUM) rather than wait
 * for a holder of a conflicting one: pmhash_verify walks the whole file
 * without shard locks under a ShareLock.  The heap confirms each row dead
 * first, without the shard lock.  Nothing is removed if the shard lost
 * entries since the probe (to VACUUM or another scan) or the file was
 * attached again: a TID could since have been reused by a new row.
 * Otherwise no line pointer of theirs was freed, nor can be while the
 * shard lock is held, since VACUUM removes the entries first.  The removal
 * is made durable (or left to the syncer) before the lock is released, as
 * VACUUM's is.  Damage elsewhere in the shard is a warning: the removal is
 * a side effect of a read.
 */
void
pmhash_remove_killed(Relation index, Relation heap, PmhashKilled *killed)
{
	PmhashLocal *ix;
	uint32		shard;
	PmhashShardState *state;
	LWLock	   *lock;
	BlockNumber block;
	bool		stale;
	PmhDeleteOps ops = {tid_is_killed, NULL, NULL, NULL};
	TransactionId horizon = InvalidTransactionId;
	VacuumState vs;
	PmhSegment	seg;
	PmhStatus	st = PMH_OK;
	uint64		removed = 0;

	if (!ConditionalLockRelation(index, RowExclusiveLock))
	{
		killed->ntids = 0;
		return;
	}
	memset(&vs, 0, sizeof(vs));
	vs.index = index;
	vs.killed = killed->tids;
	ops.arg = &vs;
	sort_killed(killed);

	ix = pmhash_open(index, NULL);
	shard = pmh_shard_of(killed->code, ix->table.shard_bits);
	block = pmhash_predicate_block(ix, killed->code);
	stale = ix->share_gen != killed->share_gen ||
		ix->share->shards[shard].removals != killed->removals;
	pmhash_leave();
	for (int done = 0; !stale && done < killed->ntids; done += CONFIRM_BATCH)
	{
		int			n = Min(CONFIRM_BATCH, killed->ntids - done);

		/* confirmed TIDs move down to the front, still sorted */
		n = confirm_dead(index, heap, block, killed->tids + done, n, &horizon);
		memmove(killed->tids + vs.nkilled, killed->tids + done, n * sizeof(ItemPointerData));
		vs.nkilled += n;
	}

	ix = pmhash_open(index, NULL);
	state = &ix->share->shards[shard];
	lock = pmhash_shard_lock(ix->share, shard);
	if (ix->logged)
		ops.removed = note_removed;
	LWLockAcquire(lock, LW_EXCLUSIVE);
	pmhash_shard_segment(ix, shard, &seg);
	if (vs.nkilled > 0 && seg.unit != 0 && ix->share_gen == killed->share_gen &&
		state->removals == killed->removals)
	{
		st = delete_logged(ix, shard, &seg, &ops, &vs, true, horizon, &removed);
		pmhash_sync_or_leave(ix);
	}
	LWLockRelease(lock);
	pmhash_leave();
	UnlockRelation(index, RowExclusiveLock);
	killed->ntids = 0;
	if (vs.removed)
		pfree(vs.removed);
	if (st == PMH_CORRUPT)
		pmhash_report_damaged(WARNING, RelationGetRelationName(index),
							  pmhash_shard_damage_detail(shard));
}

/* ambulkdelete */
IndexBulkDeleteResult *
pmhashbulkdelete(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
				 IndexBulkDeleteCallback callback, void *callback_state)
{
	if (stats == NULL)
		stats = palloc0(sizeof(IndexBulkDeleteResult));
	stats->tuples_removed += vacuum_shards(info->index, callback, callback_state,
										   &stats->num_index_tuples);
	stats->num_pages = RelationGetNumberOfBlocks(info->index);
	stats->estimated_count = false;
	return stats;
}

/*
 * amvacuumcleanup: report statistics.  Without a bulk delete before it
 * (nothing was dead), it still settles entries a crash left unverified.
 */
IndexBulkDeleteResult *
pmhashvacuumcleanup(IndexVacuumInfo *info, IndexBulkDeleteResult *stats)
{
	if (info->analyze_only)
		return stats;
	if (stats == NULL)
	{
		stats = palloc0(sizeof(IndexBulkDeleteResult));
		stats->tuples_removed = vacuum_shards(info->index, NULL, NULL,
											  &stats->num_index_tuples);
	}
	stats->num_pages = RelationGetNumberOfBlocks(info->index);
	stats->estimated_count = false;
	return stats;
}
