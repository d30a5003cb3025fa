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
 * or on an unused line pointer (a phantom of a crash); otherwise, once the
 * shard's lock is released, the HOT chain at its TID is asked whether the
 * index would hold an entry of its hash for one of its tuples (the heap may
 * have given a phantom's TID to a new row), and a second visit of the
 * shard removes or confirms it.  A shard left nearly empty is rebuilt
 * smaller, an empty one gives its segment back.  Everything is durable before ambulkdelete
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
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/bufpage.h"
#include "storage/lmgr.h"
#include "utils/rel.h"

#include "pmhash.h"

/* An unverified entry on a used line pointer, to be judged without the shard lock. */
typedef struct Suspect
{
	ItemPointerData tid;
	uint32		hash;
	bool		phantom;		/* no tuple of its chain has its hash */
} Suspect;

typedef struct VacuumState
{
	IndexBulkDeleteCallback callback;
	void	   *callback_state;
	Relation	index;
	Relation	heap;			/* opened when an unverified entry needs it */
	BlockNumber heap_blocks;
	uint32		shard_bits;		/* of the file, for comparing hashes */
	Suspect    *suspects;		/* of the shard being visited */
	int			nsuspects;
	int			maxsuspects;
	IndexInfo  *info;			/* for reader, set up for the first judgment */
	PmhashKeyReader reader;
	PmhEntry   *removed;		/* removed entries of the shard, for WAL */
	uint64		nremoved;
	uint64		maxremoved;
	ItemPointer killed;			/* a scan's confirmed dead TIDs, sorted */
	int			nkilled;
} VacuumState;

/* TIDs confirmed dead by the heap in one call (TM_IndexDelete.id is int16) */
#define CONFIRM_BATCH		1024

/* Core callback: whether VACUUM reports an entry's TID dead. */
static int
tid_is_dead(void *arg, uint32 hash pg_attribute_unused(), PmhTid tid)
{
	VacuumState *vs = arg;
	ItemPointerData ip;

	memcpy(&ip, &tid, sizeof(ItemPointerData));
	return vs->callback(&ip, vs->callback_state);
}

/* Core callback: whether an entry's TID is among those a scan found dead. */
static int
tid_is_killed(void *arg, uint32 hash pg_attribute_unused(), PmhTid tid)
{
	VacuumState *vs = arg;
	ItemPointerData ip;

	memcpy(&ip, &tid, sizeof(ItemPointerData));
	return bsearch(&ip, vs->killed, vs->nkilled, sizeof(ItemPointerData), pmhash_tid_cmp) != NULL;
}

/* Order of suspects: by TID, then by hash. */
static int
suspect_cmp(const void *a, const void *b)
{
	const Suspect *x = a;
	const Suspect *y = b;
	int			c = ItemPointerCompare((ItemPointer) &x->tid, (ItemPointer) &y->tid);

	if (c != 0)
		return c;
	return x->hash < y->hash ? -1 : x->hash > y->hash;
}

/* Set an unverified entry aside to be judged after the shard's lock is released. */
static void
add_suspect(VacuumState *vs, uint32 hash, PmhTid tid)
{
	if (vs->nsuspects == vs->maxsuspects)
	{
		vs->maxsuspects = Max(64, vs->maxsuspects * 2);
		vs->suspects = vs->suspects ?
			repalloc_huge(vs->suspects, (Size) vs->maxsuspects * sizeof(Suspect)) :
			palloc(vs->maxsuspects * sizeof(Suspect));
	}
	memcpy(&vs->suspects[vs->nsuspects].tid, &tid, sizeof(ItemPointerData));
	vs->suspects[vs->nsuspects].hash = pmh_canonical_hash(hash, vs->shard_bits);
	vs->suspects[vs->nsuspects].phantom = false;
	vs->nsuspects++;
}

/*
 * Core callback, for an unverified entry on VACUUM's first visit of its
 * shard: a phantom if its TID points at nothing in the heap, else
 * undecided and set aside to be judged.
 */
static PmhPhantomVerdict
line_pointer_verdict(void *arg, uint32 hash, PmhTid tid)
{
	VacuumState *vs = arg;
	BlockNumber block = pmh_tid_block(tid);
	Buffer		buf;
	Page		page;
	bool		unused;

	if (vs->heap == NULL)
	{
		vs->heap = table_open(IndexGetRelation(RelationGetRelid(vs->index), false),
							  AccessShareLock);
		vs->heap_blocks = RelationGetNumberOfBlocks(vs->heap);
	}
	if (block >= vs->heap_blocks)
		return PMH_VERDICT_PHANTOM;
	buf = ReadBuffer(vs->heap, block);
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	unused = tid.offset > PageGetMaxOffsetNumber(page) ||
		!ItemIdIsUsed(PageGetItemId(page, tid.offset));
	UnlockReleaseBuffer(buf);
	if (unused)
		return PMH_VERDICT_PHANTOM;
	add_suspect(vs, hash, tid);
	return PMH_VERDICT_UNDECIDED;
}

/*
 * Judge the suspects of a shard, without its lock: a suspect is a phantom
 * unless some tuple of the HOT chain at its TID that a transaction may
 * still see has a key that the index holds under its hash (src/README,
 * Durability hazards).
 */
static void
judge_suspects(VacuumState *vs)
{
	if (vs->info == NULL)
	{
		vs->info = BuildIndexInfo(vs->index);
		pmhash_key_reader_begin(&vs->reader, vs->heap, vs->index, vs->info);
	}
	for (int i = 0; i < vs->nsuspects; i++)
	{
		Suspect    *s = &vs->suspects[i];

		CHECK_FOR_INTERRUPTS();
		s->phantom = !pmhash_key_chain_holds(&vs->reader, &s->tid, s->hash, vs->shard_bits);
	}
	pmhash_key_reader_release(&vs->reader);
	qsort(vs->suspects, vs->nsuspects, sizeof(Suspect), suspect_cmp);
}

/*
 * Core callback, for an unverified entry on the second visit of its shard:
 * the judgment of judge_suspects (undecided for an entry not judged).
 */
static PmhPhantomVerdict
judged_verdict(void *arg, uint32 hash, PmhTid tid)
{
	VacuumState *vs = arg;
	Suspect		key;
	Suspect    *found;

	memcpy(&key.tid, &tid, sizeof(ItemPointerData));
	key.hash = pmh_canonical_hash(hash, vs->shard_bits);
	found = bsearch(&key, vs->suspects, vs->nsuspects, sizeof(Suspect), suspect_cmp);
	if (found == NULL)
		return PMH_VERDICT_UNDECIDED;
	return found->phantom ? PMH_VERDICT_PHANTOM : PMH_VERDICT_REAL;
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
	uint32		nshards = pmhash_slots(ix);
	double		total = 0;

	for (uint32 s = 0; s < nshards; s++)
		total += (double) pmhash_shard_state(ix->share, s)->counts.entries;
	return total;
}

/*
 * Delete what ops condemn from a shard's segment (its lock held), count the
 * removal in the shard's removals, and log the removed entries as removal
 * says (with the conflict horizon for a scan's removal).
 */
static PmhStatus
delete_logged(PmhashLocal *ix, uint32 shard, const PmhSegment *seg, const PmhDeleteOps *ops,
			  VacuumState *vs, PmhashRemoval removal, TransactionId horizon, uint64 *removed)
{
	PmhashShardState *state = pmhash_shard_state(ix->share, shard);
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
	{
		pmhash_log_map_once(ix);
		pmhash_log_delete(&ix->node, shard, removal, horizon, vs->removed, vs->nremoved);
	}
	return st;
}

/* Remove dead entries from one shard, log them, and shrink it if sparse. */
static uint64
vacuum_shard(PmhashLocal *ix, uint32 shard, VacuumState *vs)
{
	PmhashShardState *state = pmhash_shard_state(ix->share, shard);
	LWLock	   *lock = pmhash_shard_lock(ix->share, shard);
	PmhDeleteOps ops = {vs->callback ? tid_is_dead : NULL, line_pointer_verdict,
	ix->logged ? note_removed : NULL, vs};
	uint64		removed = 0;
	PmhSegment	seg;
	PmhStatus	st = PMH_OK;

	LWLockAcquire(lock, LW_EXCLUSIVE);
	pmhash_shard_segment(ix, shard, &seg);
	if (seg.unit != 0)
	{
		st = delete_logged(ix, shard, &seg, &ops, vs, PMHASH_REMOVAL_VACUUM, InvalidTransactionId,
						   &removed);
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

/*
 * Visit a shard again to remove the judged suspects that are phantoms and
 * confirm the others.  The judgments hold: a line pointer in use is freed
 * only once VACUUM removed its entries, and a new row that took a
 * phantom's TID since confirmed it if it has its hash (src/README,
 * Durability hazards).  Nothing is done if the file was attached again.
 */
static uint64
settle_suspects(PmhashLocal *ix, uint32 shard, uint64 share_gen, VacuumState *vs)
{
	LWLock	   *lock = pmhash_shard_lock(ix->share, shard);
	PmhDeleteOps ops = {NULL, judged_verdict, ix->logged ? note_removed : NULL, vs};
	uint64		removed = 0;
	PmhSegment	seg;
	PmhStatus	st = PMH_OK;

	LWLockAcquire(lock, LW_EXCLUSIVE);
	pmhash_shard_segment(ix, shard, &seg);
	if (seg.unit != 0 && ix->share_gen == share_gen)
		st = delete_logged(ix, shard, &seg, &ops, vs, PMHASH_REMOVAL_PHANTOMS, InvalidTransactionId,
						   &removed);
	LWLockRelease(lock);
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
	double		removed = 0;

	memset(&vs, 0, sizeof(vs));
	vs.callback = callback;
	vs.callback_state = callback_state;
	vs.index = index;

	/*
	 * Up to the slot count of the moment: a split moves entries from its
	 * slot to one past every slot there was, which is visited later if its
	 * entries were not seen yet.
	 */
	for (uint32 s = 0;; s++)
	{
		uint64		share_gen;

		ix = pmhash_open(index, NULL);
		if (s >= pmhash_slots(ix))
		{
			pmhash_leave();
			break;
		}
		share_gen = ix->share_gen;
		vs.shard_bits = ix->table.shard_bits;
		vs.nsuspects = 0;
		if (callback != NULL || pmhash_shard_state(ix->share, s)->counts.unverified > 0)
			removed += (double) vacuum_shard(ix, s, &vs);
		pmhash_leave();
		if (vs.nsuspects > 0)
		{
			judge_suspects(&vs);
			ix = pmhash_open(index, NULL);
			removed += (double) settle_suspects(ix, s, share_gen, &vs);
			pmhash_leave();
		}
		vacuum_delay_point(false);
	}
	ix = pmhash_open(index, NULL);
	if (ix->ndirty > 0)
		pmhash_sync_dirty(ix);
	*remaining = count_entries(ix);
	pmhash_leave();
	if (vs.info)
		pmhash_key_reader_end(&vs.reader);
	if (vs.heap)
		table_close(vs.heap, AccessShareLock);
	if (vs.removed)
		pfree(vs.removed);
	if (vs.suspects)
		pfree(vs.suspects);
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
		pmhash_shard_state(ix->share, pmhash_slot_of(ix, code));

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
 * without shard locks under a ShareLock.  It also takes, or else skips,
 * ShareUpdateExclusiveLock on the table, which every VACUUM holds: the
 * heap confirms each row dead first, without the shard lock, and a VACUUM
 * that removed the entries and freed the rows' line pointers in between
 * would make that confirmation fail (a TID on an unused line pointer is
 * index corruption to the heap).  Nothing is removed if the shard lost
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
	/* no VACUUM may free the rows' line pointers before the heap confirms them */
	if (!ConditionalLockRelation(heap, ShareUpdateExclusiveLock))
	{
		UnlockRelation(index, RowExclusiveLock);
		killed->ntids = 0;
		return;
	}
	memset(&vs, 0, sizeof(vs));
	vs.index = index;
	vs.killed = killed->tids;
	ops.arg = &vs;
	sort_killed(killed);

	ix = pmhash_open(index, NULL);
	shard = pmhash_slot_of(ix, killed->code);
	block = pmhash_predicate_block(ix, killed->code);
	stale = ix->share_gen != killed->share_gen ||
		pmhash_shard_state(ix->share, shard)->removals != killed->removals;
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
	state = pmhash_shard_state(ix->share, shard);
	lock = pmhash_shard_lock(ix->share, shard);
	if (ix->logged)
		ops.removed = note_removed;
	LWLockAcquire(lock, LW_EXCLUSIVE);
	pmhash_shard_segment(ix, shard, &seg);
	if (vs.nkilled > 0 && seg.unit != 0 && ix->share_gen == killed->share_gen &&
		state->removals == killed->removals)
	{
		st = delete_logged(ix, shard, &seg, &ops, &vs, PMHASH_REMOVAL_KILL, horizon, &removed);
		pmhash_sync_or_leave(ix);
	}
	LWLockRelease(lock);
	pmhash_leave();
	UnlockRelation(heap, ShareUpdateExclusiveLock);
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
