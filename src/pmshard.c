/*-------------------------------------------------------------------------
 *
 * pmshard.c
 *	  Hashing keys and the shard-level entry points of inserts and scans:
 *	  the shard lock, growth and the lock-free probe (src/README, Readers
 *	  and Writers).  Inserted entries are queued for INSERT records in
 *	  pmxact.c.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmshard.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/xlog.h"
#include "storage/bufmgr.h"
#include "storage/itemptr.h"
#include "storage/predicate.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "pmhash.h"

StaticAssertDecl(sizeof(PmhTid) == sizeof(ItemPointerData),
				 "PmhTid must have the layout of ItemPointerData");
StaticAssertDecl(MaxHeapTuplesPerPage <= PMH_MAX_OFFSET,
				 "bucket slots hold heap TID offsets in 9 bits");

/* qsort and bsearch comparator for heap TIDs. */
int
pmhash_tid_cmp(const void *a, const void *b)
{
	return ItemPointerCompare((ItemPointer) a, (ItemPointer) b);
}

/*
 * Refuse a TID whose offset a bucket slot cannot hold; heap TIDs always fit,
 * other table access methods may use larger offsets.
 */
void
pmhash_check_tid(Relation index, ItemPointer tid)
{
	if (ItemPointerGetOffsetNumberNoCheck(tid) > PMH_MAX_OFFSET)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("pmhash index \"%s\" cannot store item pointer offset %u",
						RelationGetRelationName(index), ItemPointerGetOffsetNumberNoCheck(tid)),
				 errdetail("Offsets above %d are not supported.", PMH_MAX_OFFSET)));
}

/*
 * The segment of a shard as its mirror entry describes it, mapped: segments
 * lie within the file, so a mapping of the whole file covers them; the
 * mapping follows the file when it grows.
 */
static void
map_segment(PmhashLocal *ix, uint32 shard, const PmhPublication *pub, PmhSegment *seg)
{
	uint64		file_units = pg_atomic_read_u64(&ix->share->file_units);

	if (ix->mapped_len < file_units * PMH_UNIT_SIZE)
		pmhash_ensure_mapped(ix, file_units);
	if (pub->desc != 0)
		pmhash_ensure_mapped(ix, pmh_desc_unit(pub->desc) + 1 + pmh_desc_nbuckets(pub->desc) +
							 pub->nposting);
	pmh_table_segment(&ix->table, shard, pub, seg);
}

/*
 * The segment a shard publishes (of no buckets if none), mapped.  The caller
 * holds the shard lock, in either mode, so no publication is under way.
 */
void
pmhash_shard_segment(PmhashLocal *ix, uint32 shard, PmhSegment *seg)
{
	PmhPublication pub;

	if (!pmh_mirror_read(&pmhash_shard_state(ix->share, shard)->mirror, &pub))
		elog(ERROR, "pmhash: shard %u was published while its lock was held", shard);
	map_segment(ix, shard, &pub, seg);
}

/* The number of slots (shards) in the index's current shard map. */
uint32
pmhash_slots(PmhashLocal *ix)
{
	return pmh_map_slots(pg_atomic_read_u64(&ix->share->shard_map));
}

/* The slot of hash's shard in the index's current shard map. */
uint32
pmhash_slot_of(PmhashLocal *ix, uint32 hash)
{
	uint32		depth;

	return pmh_map_slot(hash, pg_atomic_read_u64(&ix->share->shard_map), &depth);
}

/*
 * Lock the shard of hash in mode and return its slot: the slot the map
 * gives once the lock is held (a split holds the locks of both of its
 * slots while it moves the map, so a writer that waited for it finds its
 * key's slot anew).
 */
uint32
pmhash_lock_shard_of(PmhashLocal *ix, uint32 hash, LWLockMode mode)
{
	for (;;)
	{
		uint32		slot = pmhash_slot_of(ix, hash);
		LWLock	   *lock = pmhash_shard_lock(ix->share, slot);

		LWLockAcquire(lock, mode);
		if (pmhash_slot_of(ix, hash) == slot)
			return slot;
		LWLockRelease(lock);
	}
}

/*
 * The block number that stands for hash's shard in predicate locks (block
 * 0 is the metapage): SERIALIZABLE scans lock the shards of the codes they
 * probe, inserts check the shards of theirs (src/README, Serializable
 * transactions).
 */
BlockNumber
pmhash_predicate_block(PmhashLocal *ix, uint32 hash)
{
	return pmh_shard_of(hash, ix->table.shard_bits) + 1;
}

/* The detail of a report of a shard whose segment contradicts its format or checksums. */
char *
pmhash_shard_damage_detail(uint32 shard)
{
	return psprintf("Shard %u has a bucket or posting block that disagrees with its checksum or refers outside its segment.",
					shard);
}

/* Raise an error for a shard whose segment contradicts its format or its checksums. */
void
pmhash_raise_shard_damaged(const char *index_name, uint32 shard)
{
	pmhash_raise_damaged(index_name, pmhash_shard_damage_detail(shard));
}

/* Raise the error of a shard that is unusable during recovery. */
static void
raise_broken(Relation index, uint32 shard)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("pmhash index \"%s\" is not usable during recovery yet",
					RelationGetRelationName(index)),
			 errdetail("Shard %u was copied inconsistently and awaits replay of its rebuild.", shard),
			 errhint("Wait for recovery to progress, or promote the server.")));
}

/*
 * Copy every entry of a shard into *entries (a palloc'd array of
 * *maxentries that grows as needed), with the shard's writers locked out;
 * returns their number.  A damaged shard raises, and so does one that
 * awaits replay on a standby.
 */
uint64
pmhash_shard_entries(Relation index, PmhashLocal *ix, uint32 shard, PmhEntry **entries,
					 uint64 *maxentries)
{
	LWLock	   *lock = pmhash_shard_lock(ix->share, shard);
	PmhSegment	seg;
	uint64		count;
	uint64		max_lsn;

	if (pmhash_shard_state(ix->share, shard)->broken)
		raise_broken(index, shard);
	LWLockAcquire(lock, LW_SHARED);
	count = pmhash_shard_state(ix->share, shard)->counts.entries;
	if (count > *maxentries)
	{
		*maxentries = Max(count, 2 * *maxentries);
		*entries = *entries ? repalloc_huge(*entries, *maxentries * sizeof(PmhEntry)) :
			palloc_extended(*maxentries * sizeof(PmhEntry), MCXT_ALLOC_HUGE);
	}
	pmhash_shard_segment(ix, shard, &seg);
	count = seg.unit != 0 ? pmh_segment_collect(&seg, *entries, *maxentries, &max_lsn) : 0;
	LWLockRelease(lock);
	if (count == PMH_COLLECT_DAMAGED || count > *maxentries)
		pmhash_raise_shard_damaged(RelationGetRelationName(index), shard);
	return count;
}

/*
 * Split a shard in the table (pmh_table_split), pausing after the step
 * pmhash.split_pause_step asks for: each structural persistence step of
 * the split, then its SPLIT record, which is the last (not yet flushed).
 * An error disarms the pause at the abort (pmxact.c).
 */
static PmhStatus
split_pausing(PmhashLocal *ix, const PmhSegment *seg, uint64 map, PmhCounts *counts)
{
	PmhStatus	st;

	pmhash_pause_after(pmhash_split_pause_step, "pmhash.split_pause_step");
	st = pmh_table_split(&ix->table, seg, map, ix->logged ? GetXLogInsertRecPtr() : 0,
						 &counts[0], &counts[1]);
	if (st == PMH_OK)
		pmhash_count_step();
	pmhash_pause_after(0, NULL);
	return st;
}

/*
 * Split the shard at the split pointer of the map read as map, holding the
 * locks of both of its slots (in stripe order), unless the map moved
 * meanwhile (another backend split it) or no room is left; its entries are
 * logged (SPLIT).  Returns whether the shard split.
 */
static bool
split_shard(Relation index, PmhashLocal *ix, uint64 map)
{
	uint32		low = pmh_map_split(map);
	uint32		high = low + (UINT32_C(1) << pmh_map_level(map));
	PmhCounts	counts[2];
	PmhSegment	seg;
	PmhStatus	st = PMH_FULL;
	PmhashShardState *state;

	if (!pmhash_share_make_room(ix->share, high))
		return false;
	state = pmhash_shard_state(ix->share, low);
	pmhash_lock_shard_pair(ix->share, low, high);
	if (pg_atomic_read_u64(&ix->share->shard_map) == map && !state->broken)
	{
		pmhash_shard_segment(ix, low, &seg);
		st = split_pausing(ix, &seg, map, counts);
		if (st == PMH_OK)
		{
			state->counts = counts[0];
			pmhash_shard_state(ix->share, high)->counts = counts[1];
			/*
			 * Entries left the slot: what scans noted of it is stale.  A
			 * note is compared with the count of the slot its code maps to
			 * when the scan ends, the new one for the entries that moved:
			 * its count starts past every note taken of the old.
			 */
			state->removals++;
			pmhash_shard_state(ix->share, high)->removals = state->removals;
		}
	}
	pmhash_unlock_shard_pair(ix->share, low, high);
	if (st == PMH_CORRUPT)
		pmhash_raise_shard_damaged(RelationGetRelationName(index), low);
	return st == PMH_OK;
}

/*
 * Whether the shards of a map hold more than PMHASH_SHARD_ENTRIES each on
 * average, by the counters of at most PMHASH_WEIGH_SLOTS slots spread
 * evenly over the map, read without their locks (an estimate whose work
 * does not grow with the index).  Split and unsplit shards are sampled in
 * their proportions, since the slots split at a level are the first ones
 * and the last ones of the map.
 */
static bool
over_target(PmhashLocal *ix, uint64 map)
{
	uint32		nslots = pmh_map_slots(map);
	uint32		nsample = Min(nslots, PMHASH_WEIGH_SLOTS);
	uint64		total = 0;

	for (uint32 i = 0; i < nsample; i++)
	{
		uint32		s = (uint32) (((uint64) i * nslots) / nsample);

		total += ((volatile PmhashShardState *) pmhash_shard_state(ix->share, s))->counts.entries;
	}
	return total > (uint64) PMHASH_SHARD_ENTRIES * nsample;
}

/*
 * Whether the shard at a map's split pointer should split: it may (9 bits
 * or more, below the last level) and the shards hold more than
 * PMHASH_SHARD_ENTRIES each on average.  Linear hashing: the splits follow
 * the average, and the shards not yet split at a level hold about twice
 * what the split ones do, so every shard stays within about twice the
 * target.
 */
static bool
should_split(PmhashLocal *ix, uint64 map)
{
	uint32		level = pmh_map_level(map);

	return level >= 9 && level < PMH_MAX_SHARD_BITS && over_target(ix, map);
}

/*
 * Insert one entry, growing its shard when needed, if gate (when given)
 * admits it: the gate runs under the shard lock, just before the insert.
 * PMH_INSERT_IF_ABSENT skips an entry already stored (after a rebuild from
 * the table).  Returns whether the entry went in (or was there already).
 * Its bucket is stamped with the current WAL insert position; the entry is
 * logged later, in a batch.  An insert that brings its shard to a multiple
 * of PMHASH_WEIGH_EVERY entries (one insert in that many, whoever makes
 * them) then weighs the shards and splits the shard at the split pointer if
 * they hold more than the target on average.
 */
bool
pmhash_insert_entry(Relation index, PmhashLocal *ix, uint32 hash, ItemPointer tid,
					PmhInsertMode mode, PmhashInsertGate gate, void *gate_arg)
{
	uint32		shard;
	PmhashShardState *state;
	LWLock	   *lock;
	PmhTid		ptid;
	PmhSegment	seg;
	uint64		lsn = 0;
	PmhStatus	st;
	bool		weigh;

	memcpy(&ptid, tid, sizeof(PmhTid));
	shard = pmhash_lock_shard_of(ix, hash, LW_EXCLUSIVE);
	state = pmhash_shard_state(ix->share, shard);
	lock = pmhash_shard_lock(ix->share, shard);
	pmhash_shard_segment(ix, shard, &seg);
	if (gate != NULL && !gate(gate_arg, &seg, state, ix->share->share_gen))
	{
		LWLockRelease(lock);
		return false;
	}
	if (ix->logged)
		lsn = GetXLogInsertRecPtr();
	if (pmhash_rebuild_pause_step > 0)
		pmhash_pause_after(pmhash_rebuild_pause_step, "pmhash.rebuild_pause_step");
	st = pmh_table_insert(&ix->table, &seg, &state->counts, hash, ptid, lsn, mode, 0);
	if (pmhash_rebuild_pause_step > 0)
		pmhash_pause_after(0, NULL);
	weigh = st == PMH_OK && state->counts.entries % PMHASH_WEIGH_EVERY == 0;
	LWLockRelease(lock);
	if (ix->logged && (st == PMH_OK || st == PMH_PRESENT))
		pmhash_queue_insert(ix, hash, ptid, lsn);
	if (st == PMH_CORRUPT)
		pmhash_raise_shard_damaged(RelationGetRelationName(index), shard);
	if (st == PMH_FULL)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("pmhash index \"%s\" shard %u cannot grow further",
						RelationGetRelationName(index), shard),
				 errhint("Rebuild the index with more shards: ALTER INDEX ... SET (shards = N); REINDEX.")));
	/* after the entry is in: a scan that locks the shard later finds it */
	CheckForSerializableConflictIn(index, NULL, pmhash_predicate_block(ix, hash));
	if (weigh)
	{
		uint64		map = pg_atomic_read_u64(&ix->share->shard_map);

		if (should_split(ix, map))
			(void) split_shard(index, ix, map);
	}
	return true;
}

typedef struct TidCollector
{
	ItemPointer tids;
	int			ntids;
	int			maxtids;
	int			nunverified;	/* TIDs that may be phantoms of a crash */
	int			maxunverified;
	ItemPointer unverified;
} TidCollector;

/* Append TIDs to a growable array. */
static void
append_tids(ItemPointer *array, int *n, int *max, const PmhTid *tids, int count)
{
	if (*n + count > *max)
	{
		int			newmax = Max(*max * 2, *n + count);

		*array = *array ? repalloc_huge(*array, (Size) newmax * sizeof(ItemPointerData)) :
			palloc_extended((Size) newmax * sizeof(ItemPointerData), MCXT_ALLOC_HUGE);
		*max = newmax;
	}
	memcpy(&(*array)[*n], tids, count * sizeof(ItemPointerData));
	*n += count;
}

/* Lookup sink: keep the TIDs, setting unverified ones aside. */
static void
collect_tids(void *arg, const PmhTid *tids, int count, uint64 unverified)
{
	TidCollector *c = arg;

	if (unverified == 0)
	{
		append_tids(&c->tids, &c->ntids, &c->maxtids, tids, count);
		return;
	}
	for (int i = 0; i < count; i++)
	{
		if (unverified & (UINT64CONST(1) << i))
			append_tids(&c->unverified, &c->nunverified, &c->maxunverified, &tids[i], 1);
		else
			append_tids(&c->tids, &c->ntids, &c->maxtids, &tids[i], 1);
	}
}

/* Keys a batched lookup resolves at a time. */
#define LOOKUP_BATCH	64

/*
 * Look hash up with writers of its shard locked out: after a lock-free
 * lookup found a bucket changing (or the shard unpublished), where only a
 * checksum mismatch can still keep a bucket busy.  What the lock-free
 * attempt delivered stays: validated copies of entries the shard held.
 */
static void
lookup_locked(Relation index, PmhashLocal *ix, uint32 hash, TidCollector *c)
{
	uint32		shard = pmhash_lock_shard_of(ix, hash, LW_SHARED);
	LWLock	   *lock = pmhash_shard_lock(ix->share, shard);
	PmhSegment	seg;
	PmhStatus	st;

	pmhash_shard_segment(ix, shard, &seg);
	st = pmh_lookup(&seg, hash, collect_tids, c);
	LWLockRelease(lock);
	if (st != PMH_OK)
		pmhash_raise_shard_damaged(RelationGetRelationName(index), shard);
}

/*
 * Map the segment hash's shard has published, without a lock; false when
 * the shard is not published (a writer is publishing it), or is not hash's
 * (a split moved the map after it was read).
 */
static bool
segment_unlocked(Relation index, PmhashLocal *ix, uint32 hash, PmhSegment *seg)
{
	uint32		shard = pmhash_slot_of(ix, hash);
	PmhashShardState *state = pmhash_shard_state(ix->share, shard);
	PmhPublication pub;

	if (state->broken)
		raise_broken(index, shard);
	if (!pmh_mirror_read(&state->mirror, &pub) ||
		pmh_shard_of(hash, pub.depth) != pmh_slot_shard(shard, pub.depth))
		return false;
	map_segment(ix, shard, &pub, seg);
	return true;
}

/*
 * Whether a lock-free lookup of hash that ended with st must be done again
 * with its shard locked (it met a changing bucket); a damaged shard raises.
 */
static bool
retry_locked(Relation index, PmhashLocal *ix, uint32 hash, PmhStatus st)
{
	if (st == PMH_CORRUPT)
		pmhash_raise_shard_damaged(RelationGetRelationName(index),
								   pmhash_slot_of(ix, hash));
	return st == PMH_BUSY;
}

/* Look one hash code up without a lock, or with its shard locked if need be. */
static void
lookup_one(Relation index, PmhashLocal *ix, uint32 hash, TidCollector *c)
{
	PmhSegment	seg;

	if (!segment_unlocked(index, ix, hash, &seg) ||
		retry_locked(index, ix, hash, pmh_lookup(&seg, hash, collect_tids, c)))
		lookup_locked(index, ix, hash, c);
}

/*
 * Look up m hash codes without locks in one batch, whose cache misses the
 * core overlaps.  Codes of one shard that come one after another (sorted
 * codes do) share one read of its mirror: every segment of the batch is
 * read before any bucket, so codes looked up in the segment one read found
 * are looked up as if each had read it at that moment (src/README,
 * Readers).  Keys whose lookup met a changing bucket, or whose shard is not
 * published, are looked up again with their shard locked.
 */
static void
lookup_batch(Relation index, PmhashLocal *ix, const uint32 *hashes, int m, TidCollector *c)
{
	PmhSegment	segs[LOOKUP_BATCH];
	uint32		found[LOOKUP_BATCH];
	void	   *args[LOOKUP_BATCH];
	PmhStatus	status[LOOKUP_BATCH];
	uint32		retry[LOOKUP_BATCH];
	int			nfound = 0;
	int			nretry = 0;

	Assert(m <= LOOKUP_BATCH);
	for (int k = 0; k < m; k++)
	{
		if (nfound > 0 &&
			pmh_shard_of(hashes[k], segs[nfound - 1].shard_bits) == segs[nfound - 1].shard)
			segs[nfound] = segs[nfound - 1];
		else if (!segment_unlocked(index, ix, hashes[k], &segs[nfound]))
		{
			retry[nretry++] = hashes[k];
			continue;
		}
		args[nfound] = c;
		found[nfound++] = hashes[k];
	}
	if (nfound > 0)
		pmh_lookup_batch(segs, found, nfound, collect_tids, args, status);
	for (int k = 0; k < nfound; k++)
	{
		if (retry_locked(index, ix, found[k], status[k]))
			retry[nretry++] = found[k];
	}
	for (int k = 0; k < nretry; k++)
		lookup_locked(index, ix, retry[k], c);
}

/*
 * Collect every TID stored under each of n hash codes into *tids (a
 * palloc'd array of *maxtids entries that grows as needed; a TID may come
 * more than once), without taking a lock unless a bucket keeps changing
 * under the probe.  Unverified TIDs past the end of heap (given for plain
 * index scans) are left out: they are phantoms of a crash that would make
 * the heap fetch fail.  With apart, the other unverified TIDs go to a
 * palloc'd *apart (*napart of them) instead of *tids, for the caller to
 * check.  Returns the number of unverified TIDs collected.
 */
int
pmhash_lookup_entries(Relation index, PmhashLocal *ix, Relation heap, const uint32 *hashes,
					  int n, ItemPointer *tids, int *ntids, int *maxtids, ItemPointer *apart,
					  int *napart)
{
	TidCollector c = {*tids, 0, *maxtids, 0, 0, NULL};

	if (n == 1)
		lookup_one(index, ix, hashes[0], &c);
	else
	{
		for (int done = 0; done < n; done += LOOKUP_BATCH)
			lookup_batch(index, ix, hashes + done, Min(LOOKUP_BATCH, n - done), &c);
	}
	if (apart)
	{
		*apart = NULL;
		*napart = 0;
	}
	if (c.nunverified > 0)
	{
		BlockNumber nblocks = heap ? RelationGetNumberOfBlocks(heap) : InvalidBlockNumber;
		int			nkept = 0;

		for (int i = 0; i < c.nunverified; i++)
		{
			if (heap == NULL || ItemPointerGetBlockNumberNoCheck(&c.unverified[i]) < nblocks)
				c.unverified[nkept++] = c.unverified[i];
		}
		if (apart)
		{
			*apart = c.unverified;
			*napart = nkept;
		}
		else
		{
			append_tids(&c.tids, &c.ntids, &c.maxtids, (PmhTid *) c.unverified, nkept);
			pfree(c.unverified);
		}
	}
	*tids = c.tids;
	*ntids = c.ntids;
	*maxtids = c.maxtids;
	return c.nunverified;
}
