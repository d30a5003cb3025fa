/*-------------------------------------------------------------------------
 *
 * pmh_modify.c
 *	  Insert and delete entries in a published segment.
 *
 * The caller holds the shard's writer lock, so there is one writer per
 * segment; lock-free readers may be probing it.  Every change follows one
 * order: write the slot and flush it; then store the commit word with the
 * new valid bits and the next sequence number, flush it, fence.  A reader
 * that overlaps a change sees the sequence move and reads again.  Each
 * change also stamps the bucket (or posting block) with the WAL position of
 * its record, in the same cache line as the commit word.
 *
 * A new slot is fenced before its commit word only where a crash that kept
 * the commit word without it could show old bytes as an entry
 * (pmh_flush_slot); a slot whose tag shares the commit word's line and
 * whose TID field was blank is not, since recovery clears such a torn slot
 * (pmh_flag_unverified).  Builds fill buckets from their last slot down,
 * and inserts take the first free slot among the 15 whose tags share that
 * line and whose TIDs lie within one line (all of slots 0 to 15 but 6)
 * before any other, so most inserts pay one fence.  The access
 * method fences at commit only, so there a crash may also keep a slot
 * whose tag it lost; recovery flags it unverified like any entry of a
 * unit stamped after the recovery point.
 *
 * An entry goes to the first bucket of its run with a free slot (the run:
 * the buckets from its home bucket to the first bucket whose overflow bit
 * is clear).  If the run is full, the entry extends it by at most
 * PMH_MAX_PROBE buckets, setting the overflow bit of every full bucket it
 * passes before it commits itself, so a lookup can never stop short of a
 * committed entry.  Deleted slots are
 * free at once; overflow bits are cleared only by rebuilding the shard.
 * After a crash, recovery sets again the bits that a crash lost while it
 * kept the entry they lead to.
 *
 * Entries left by a crash may be phantoms (their WAL record was lost) and
 * are flagged unverified until checked against the heap.  An insert of an
 * entry that is already stored unverified just confirms it, and replayed
 * WAL, which may have reached the file before the crash, inserts only what
 * is absent; both checks look only where such entries can be.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/core/pmh_modify.c
 *
 *-------------------------------------------------------------------------
 */
#include <string.h>

#include "pmh_internal.h"

#define NO_BUCKET UINT32_MAX

/* What a walk along a hash's run found. */
typedef struct RunScan
{
	uint32_t	free_bucket;	/* first bucket of the run with a free slot */
	uint32_t	end_bucket;		/* last bucket of the run, if it ended */
	uint32_t	end_distance;	/* its distance from the home bucket */
	PmhPosting *chain;			/* posting chain of the hash, if wanted */
	PmhBucket  *chain_bucket;	/* bucket holding the chain reference */
	int			chain_unverified;	/* the chain holds unverified entries */
	int			present;		/* the entry looked for is stored, as confirm() says */
	int			corrupt;
} RunScan;

/* What an insert looks for besides room: an entry already stored. */
typedef struct Lookout
{
	PmhInsertMode mode;
	PmhTid		tid;
	PmhTid		slot;			/* the TID as a bucket slot holds it */
	uint64_t	since;			/* replay: buckets stamped at or after this */
} Lookout;

/* Slots of a bucket that may already hold the entry an insert looks out for. */
static uint64_t
suspects(const Lookout *look, uint64_t candidates, uint64_t unverified, uint64_t lsn)
{
	if (look->mode == PMH_INSERT_IF_ABSENT && lsn >= look->since)
		return candidates;
	return candidates & unverified;
}

/*
 * Look for a TID (as the slots hold it) among the suspect slots.  0: not
 * there; 1: there; 2: there unverified, and now confirmed.
 */
static int
confirm(uint64_t suspect, const PmhTid *tids, uint64_t *unverified, PmhTid tid,
		const PmhPersist *persist)
{
	while (suspect)
	{
		int			i = __builtin_ctzll(suspect);

		suspect &= suspect - 1;
		if (pmh_tid_equal(tids[i], tid))
		{
			if (!(*unverified & (UINT64_C(1) << i)))
				return 1;
			*unverified &= ~(UINT64_C(1) << i);
			pmh_flush(persist, unverified, sizeof(uint64_t));
			return 2;
		}
	}
	return 0;
}

/* Whether a chain holds the entry looked out for, as confirm() says; -1: damaged. */
static int
chain_holds(const PmhSegment *seg, PmhPosting *first, const Lookout *look,
			const PmhPersist *persist)
{
	for (uint32_t j = 0; j < first->nblocks; j++)
	{
		PmhPosting *blk = first + j;
		uint64_t	valid = blk->commit & PMH_POSTING_VALID_MASK;
		int			found;

		if (!pmh_posting_sound(seg, blk, blk->commit))
			return -1;
		found = confirm(suspects(look, valid, blk->unverified, blk->lsn), blk->tid,
						&blk->unverified, look->tid, persist);
		if (found)
			return found;
	}
	return 0;
}

/* Walk the run of a hash code from its home bucket. */
static void
scan_run(const PmhSegment *seg, uint32_t code, int want_chain, const Lookout *look,
		 const PmhPersist *persist, RunScan *rs)
{
	uint32_t	nbuckets = seg->nbuckets;
	uint32_t	b = pmh_home_bucket(code, nbuckets);

	rs->free_bucket = NO_BUCKET;
	rs->end_bucket = NO_BUCKET;
	rs->end_distance = 0;
	rs->chain = NULL;
	rs->chain_bucket = NULL;
	rs->chain_unverified = 0;
	rs->present = 0;
	rs->corrupt = 0;
	for (uint32_t dist = 0; dist < nbuckets; dist++)
	{
		PmhBucket  *bucket = pmh_bucket(seg, b);
		uint64_t	c = bucket->commit;
		uint32_t	valid = (uint32_t) (c & PMH_VALID_MASK);

		if (!pmh_bucket_sound(seg, bucket, c))
		{
			rs->corrupt = 1;
			return;
		}
		if (rs->free_bucket == NO_BUCKET && valid != PMH_VALID_MASK)
			rs->free_bucket = b;
		if (want_chain)
		{
			uint32_t	mask = pmh_match_code(bucket, code) & valid;

			if (look && !rs->present)
				rs->present = confirm(suspects(look, mask, bucket->unverified, bucket->lsn),
									  bucket->slot, &bucket->unverified, look->slot, persist);
			while (mask && rs->chain == NULL)
			{
				int			i = __builtin_ctz(mask);
				PmhTid		tid = pmh_slot_tid(bucket, i);

				mask &= mask - 1;
				if (pmh_is_chain_ref(tid))
				{
					rs->chain = pmh_chain_first(seg, tid, code);
					rs->chain_bucket = bucket;
					rs->chain_unverified = (bucket->unverified >> i) & 1;
					if (rs->chain == NULL)
						rs->corrupt = 1;
				}
			}
		}
		if (!(c & PMH_OVERFLOW_BIT))
		{
			rs->end_bucket = b;
			rs->end_distance = dist;
			return;
		}
		b = pmh_next_bucket(b, nbuckets);
	}
}

/*
 * Slots whose new entry needs no fence before its commit word when its TID
 * field is blank (pmh_flush_slot): the tag in the commit word's line (slots
 * 0 to 15), the TID within one line (all but slots 6 and 17).
 */
#define UNFENCED_SLOTS			UINT32_C(0xffbf)
_Static_assert(offsetof(PmhBucket, tag) == 32 && offsetof(PmhBucket, slot) == 88,
			   "UNFENCED_SLOTS follows the bucket layout");

/* The free slot an insert takes: the first unfenced one, else the first. */
static int
free_slot(uint64_t commit)
{
	uint32_t	free_mask = (uint32_t) (~commit & PMH_VALID_MASK);
	uint32_t	unfenced = free_mask & UNFENCED_SLOTS;

	return __builtin_ctz(unfenced ? unfenced : free_mask);
}

/* Write an entry into a free slot of a bucket, commit it and seal it. */
static void
commit_slot(const PmhSegment *seg, PmhBucket *bucket, uint32_t code, PmhTid tid,
			uint16_t flags, uint64_t lsn, const PmhPersist *persist)
{
	uint64_t	c = bucket->commit;
	int			i = free_slot(c);
	uint64_t	bit = UINT64_C(1) << i;
	int			was_blank = pmh_tid_blank(bucket->slot[i]);

	pmh_slot_set(bucket, i, code, tid);
	pmh_flush_slot(persist, bucket, &bucket->tag[i], &bucket->slot[i], was_blank);
	if (flags & PMH_ENTRY_UNVERIFIED)
		bucket->unverified |= bit;
	else
		bucket->unverified &= ~bit;
	if (lsn > bucket->lsn)
		bucket->lsn = lsn;
	pmh_store_release(&bucket->commit, (c | bit) + PMH_SEQ_ONE);
	pmh_bucket_seal(seg, bucket);
	/* the first line: commit word, stamp, checksums and the first 16 tags */
	pmh_flush(persist, &bucket->commit, PMH_LINE_SIZE);
	pmh_drain(persist);
}

/*
 * Place an entry in the first free slot of its run, or extend the run by up
 * to max_extend buckets.  PMH_FULL when neither works.
 */
static PmhStatus
place_entry(const PmhSegment *seg, const RunScan *rs, uint32_t code, PmhTid tid,
			uint16_t flags, uint64_t lsn, const PmhPersist *persist, uint32_t max_extend)
{
	uint32_t	nbuckets = seg->nbuckets;
	uint32_t	target = NO_BUCKET;
	uint32_t	b;

	if (rs->free_bucket != NO_BUCKET)
	{
		commit_slot(seg, pmh_bucket(seg, rs->free_bucket), code, tid, flags, lsn, persist);
		return PMH_OK;
	}
	if (rs->end_bucket == NO_BUCKET)
		return PMH_FULL;

	b = rs->end_bucket;
	for (uint32_t d = 1; d <= max_extend && rs->end_distance + d < nbuckets; d++)
	{
		PmhBucket  *next;

		b = pmh_next_bucket(b, nbuckets);
		next = pmh_bucket(seg, b);
		if (!pmh_bucket_sound(seg, next, next->commit))
			return PMH_CORRUPT;
		if ((next->commit & PMH_VALID_MASK) != PMH_VALID_MASK)
		{
			target = b;
			break;
		}
	}
	if (target == NO_BUCKET)
		return PMH_FULL;

	/*
	 * Mark the passed buckets before the entry becomes visible, durable
	 * first where the caller drains (the core tests).  The access method's
	 * flushes wait for its commit, and cache lines and pages reach the
	 * medium in any order, so a crash may keep the entry without them:
	 * recovery reconnects it (reconnect_entries).
	 */
	for (b = rs->end_bucket; b != target; b = pmh_next_bucket(b, nbuckets))
	{
		PmhBucket  *passed = pmh_bucket(seg, b);

		/* stamped first, so that recovery reseals it if the seal is lost */
		if (lsn > passed->lsn)
			passed->lsn = lsn;
		pmh_store_release(&passed->commit,
						  (passed->commit | PMH_OVERFLOW_BIT) + PMH_SEQ_ONE);
		pmh_bucket_seal(seg, passed);
		pmh_flush(persist, &passed->commit, PMH_BUCKET_COMMIT_BYTES);
	}
	pmh_drain(persist);
	commit_slot(seg, pmh_bucket(seg, target), code, tid, flags, lsn, persist);
	return PMH_OK;
}

/*
 * Append a TID to a posting chain; 0 if the chain is full, -1 if a block
 * disagrees with its checksum.  The block's stamped first line is durable
 * before its seal, so that a crash never leaves a new seal over an old
 * commit that recovery would not reseal.
 */
static int
chain_append(const PmhSegment *seg, PmhPosting *first, PmhTid tid, uint64_t lsn,
			 const PmhPersist *persist)
{
	for (uint32_t j = first->cursor; j < first->nblocks; j++)
	{
		PmhPosting *blk = first + j;
		uint64_t	c = blk->commit;
		uint64_t	free_bits = ~c & PMH_POSTING_VALID_MASK;
		int			i;
		int			was_blank;

		if (free_bits == 0)
			continue;
		if (!pmh_posting_sound(seg, blk, c))
			return -1;
		i = __builtin_ctzll(free_bits);
		was_blank = pmh_tid_blank(blk->tid[i]);
		blk->tid[i] = tid;
		pmh_flush_slot(persist, blk, NULL, &blk->tid[i], was_blank);
		blk->unverified &= ~(UINT64_C(1) << i);
		if (lsn > blk->lsn)
			blk->lsn = lsn;
		pmh_store_release(&blk->commit, (c | (UINT64_C(1) << i)) + PMH_POSTING_SEQ_ONE);
		if (seg->checksum_seed != 0)
			pmh_order(persist, &blk->commit, 3 * sizeof(uint64_t));
		else
			pmh_flush(persist, &blk->commit, 3 * sizeof(uint64_t));
		pmh_posting_seal(seg, blk, persist);
		pmh_drain(persist);
		first->cursor = (uint16_t) j;
		return 1;
	}
	first->cursor = first->nblocks;
	return 0;
}

/*
 * Insert an entry.  PMH_PRESENT if it was stored already (per mode);
 * PMH_FULL asks the caller to rebuild the shard with the entry;
 * PMH_CORRUPT reports a chain reference that does not fit.  *effects gets
 * PMH_USED_SLOT if a bucket slot was taken, PMH_CONFIRMED if an unverified
 * entry was confirmed instead.
 */
PmhStatus
pmh_insert(const PmhSegment *seg, uint32_t hash, PmhTid tid, uint64_t lsn,
		   const PmhPersist *persist, PmhInsertMode mode, uint64_t since,
		   unsigned *effects)
{
	uint32_t	code = pmh_hash_code(hash, seg->shard_bits);
	Lookout		look = {mode, tid, pmh_slot_value(code, tid), since};
	RunScan		rs;

	*effects = 0;
	if (seg->nbuckets == 0)
		return PMH_FULL;
	scan_run(seg, code, 1, &look, persist, &rs);
	if (rs.corrupt)
		return PMH_CORRUPT;
	/* a chain can hold the entry only if it has unverified ones, or changed since */
	if (!rs.present && rs.chain &&
		(rs.chain_unverified ||
		 (mode == PMH_INSERT_IF_ABSENT && rs.chain_bucket->lsn >= since)))
		rs.present = chain_holds(seg, rs.chain, &look, persist);
	if (rs.present < 0)
		return PMH_CORRUPT;
	if (rs.present)
	{
		if (rs.present == 2)
			*effects = PMH_CONFIRMED;
		pmh_drain(persist);
		return PMH_PRESENT;
	}
	if (rs.chain)
	{
		/* stamp the reference's bucket first, so recovery finds the entry */
		if (lsn > rs.chain_bucket->lsn)
		{
			rs.chain_bucket->lsn = lsn;
			pmh_flush(persist, &rs.chain_bucket->lsn, sizeof(uint64_t));
		}
		switch (chain_append(seg, rs.chain, tid, lsn, persist))
		{
			case 1:
				return PMH_OK;
			case -1:
				return PMH_CORRUPT;
		}
	}
	*effects = PMH_USED_SLOT;
	return place_entry(seg, &rs, code, tid, 0, lsn, persist, PMH_MAX_PROBE);
}

/*
 * Place an entry into a segment image that nobody else can see yet, walking
 * its run from the home bucket and past the last bucket if need be.  The
 * image must have a free slot somewhere, and its buckets their final LSN.
 */
void
pmh_image_place_run(const PmhSegment *seg, uint32_t code, PmhTid tid, uint16_t flags,
					uint64_t lsn)
{
	RunScan		rs;

	scan_run(seg, code, 0, NULL, NULL, &rs);
	(void) place_entry(seg, &rs, code, tid, flags, lsn, NULL, seg->nbuckets);
}

/*
 * Zero the TID fields of the slots in bits, freed ones: a crash that tears a
 * later insert there then shows a blank, which recovery clears, not an old
 * TID (src/README, durability hazard 2).
 */
static void
blank_slots(PmhTid *fields, uint64_t bits, const PmhPersist *persist)
{
	for (; bits; bits &= bits - 1)
	{
		PmhTid	   *field = &fields[__builtin_ctzll(bits)];

		memset(field, 0, sizeof(PmhTid));
		pmh_flush(persist, field, sizeof(PmhTid));
	}
}

/* The verdict of a bulk delete on one stored entry: 1 remove, 0 keep. */
static int
doomed(const PmhDeleteOps *ops, uint32_t hash, PmhTid tid, uint64_t bit, uint64_t *unverified)
{
	if (ops->dead && ops->dead(ops->arg, hash, tid))
		return 1;
	if ((*unverified & bit) && ops->phantom)
	{
		PmhPhantomVerdict verdict = ops->phantom(ops->arg, hash, tid);

		if (verdict == PMH_VERDICT_PHANTOM)
			return 1;
		if (verdict == PMH_VERDICT_REAL)
			*unverified &= ~bit;
	}
	return 0;
}

/*
 * The slots of a bucket or of a posting block, as a bulk delete sees them:
 * a bucket has a hash code per slot and may hold chain references; a
 * posting block has one hash for all.
 */
typedef struct SlotGroup
{
	uint64_t   *commit;
	uint64_t   *unverified;
	uint64_t   *lsn;
	const PmhBucket *bucket;	/* NULL for a posting block */
	PmhTid	   *fields;			/* the slots' TID fields (with a bucket's
								 * code bits) */
	uint32_t	hash;			/* the hash of a posting block */
	uint32_t	shard;			/* for the hashes of a bucket's slots */
	uint32_t	shard_bits;
	uint64_t	valid_mask;
	uint64_t	seq_one;
} SlotGroup;

/* TID in slot i of a group. */
static inline PmhTid
group_tid(const SlotGroup *g, int i)
{
	return g->bucket ? pmh_slot_tid(g->bucket, i) : g->fields[i];
}

/* Hash of the entry in slot i of a group. */
static inline uint32_t
group_hash(const SlotGroup *g, int i)
{
	if (g->bucket == NULL)
		return g->hash;
	return pmh_code_hash(pmh_slot_code(g->bucket, i), g->shard, g->shard_bits);
}

/* Bulk-delete within a bucket or posting block; returns the TIDs removed. */
static uint64_t
group_delete(const SlotGroup *g, const PmhDeleteOps *ops, uint64_t lsn,
			 const PmhPersist *persist, PmhCounts *left)
{
	uint64_t	c = *g->commit;
	uint64_t	valid = c & g->valid_mask;
	uint64_t	unverified = *g->unverified;
	uint64_t	gone = 0;

	while (valid)
	{
		int			i = __builtin_ctzll(valid);
		uint64_t	bit = UINT64_C(1) << i;
		PmhTid		tid = group_tid(g, i);

		valid &= valid - 1;
		if (g->bucket)
		{
			left->slots++;
			if (pmh_is_chain_ref(tid))
				continue;
		}
		if (doomed(ops, group_hash(g, i), tid, bit, &unverified))
		{
			gone |= bit;
			if (ops->removed)
				ops->removed(ops->arg, group_hash(g, i), tid);
		}
		else
		{
			left->entries++;
			left->unverified += (unverified & bit) != 0;
		}
	}
	if (gone || unverified != *g->unverified)
	{
		if (g->bucket)
			left->slots -= __builtin_popcountll(gone);
		*g->unverified = unverified & ~gone;
		if (lsn > *g->lsn)
			*g->lsn = lsn;
		pmh_store_release(g->commit, (c & ~gone) + g->seq_one);
		if (gone)
			pmh_order(persist, g->commit, 3 * sizeof(uint64_t));
		else
			pmh_flush(persist, g->commit, 3 * sizeof(uint64_t));
	}
	/* the commit word is durable first: a crash must not keep bits over blanks */
	blank_slots(g->fields, gone, persist);
	return __builtin_popcountll(gone);
}

/* Whether any posting block of a chain holds unverified entries. */
static int
chain_has_unverified(const PmhPosting *first)
{
	for (uint32_t j = 0; j < first->nblocks; j++)
	{
		if (first[j].unverified & first[j].commit & PMH_POSTING_VALID_MASK)
			return 1;
	}
	return 0;
}

/*
 * Bulk-delete within one bucket (after the posting blocks, so that the
 * unverified bit of a chain reference can follow its chain).  A bucket that
 * disagrees with its checksum is left as it is: *damaged is set.
 */
static uint64_t
bucket_delete(const PmhSegment *seg, PmhBucket *bucket, const PmhDeleteOps *ops,
			  uint64_t lsn, const PmhPersist *persist, PmhCounts *left, int *damaged)
{
	SlotGroup	g = {&bucket->commit, &bucket->unverified, &bucket->lsn, bucket, bucket->slot, 0,
		seg->shard, seg->shard_bits, PMH_VALID_MASK, PMH_SEQ_ONE};
	uint64_t	c = bucket->commit;
	uint64_t	removed;
	uint64_t	refs;

	if (!pmh_bucket_sound(seg, bucket, c))
	{
		*damaged = 1;
		return 0;
	}
	removed = group_delete(&g, ops, lsn, persist, left);
	if (bucket->commit != c)
	{
		pmh_bucket_seal(seg, bucket);
		pmh_flush(persist, &bucket->commit, PMH_BUCKET_COMMIT_BYTES);
	}
	refs = bucket->unverified & bucket->commit & PMH_VALID_MASK;
	for (; refs; refs &= refs - 1)
	{
		int			i = __builtin_ctzll(refs);
		PmhTid		ref = pmh_slot_tid(bucket, i);
		const PmhPosting *first;

		if (!pmh_is_chain_ref(ref))
			continue;
		first = pmh_chain_first(seg, ref, pmh_slot_code(bucket, i));
		if (first == NULL || !chain_has_unverified(first))
		{
			bucket->unverified &= ~(UINT64_C(1) << i);
			pmh_flush(persist, &bucket->unverified, sizeof(uint64_t));
		}
	}
	if (bucket->lsn > left->max_lsn)
		left->max_lsn = bucket->lsn;
	return removed;
}

/*
 * Bulk-delete within one posting block; as bucket_delete for a block that
 * disagrees with its checksum.  The block's first line (stamp and commit
 * word) is durable before its seal, so that a crash never leaves a new seal
 * over an old commit that recovery would not reseal.
 */
static uint64_t
posting_delete(const PmhSegment *seg, PmhPosting *blk, const PmhDeleteOps *ops, uint64_t lsn,
			   const PmhPersist *persist, PmhCounts *left, int *damaged)
{
	SlotGroup	g = {&blk->commit, &blk->unverified, &blk->lsn, NULL, blk->tid, blk->hash,
		0, 0, PMH_POSTING_VALID_MASK, PMH_POSTING_SEQ_ONE};
	uint64_t	c = blk->commit;
	uint64_t	removed;

	if (!pmh_posting_sound(seg, blk, c))
	{
		*damaged = 1;
		return 0;
	}
	removed = group_delete(&g, ops, lsn, persist, left);
	if (blk->commit != c && seg->checksum_seed != 0)
	{
		/* group_delete made the first line durable if it freed slots */
		if (removed == 0)
			pmh_order(persist, &blk->commit, 3 * sizeof(uint64_t));
		pmh_posting_seal(seg, blk, persist);
	}
	return removed;
}

/*
 * Delete every entry the callbacks condemn, with one commit store per
 * changed bucket or posting block and one fence at the end.  *removed gets
 * the number deleted, *remaining what is left (stored at the end, so that a
 * reader of the counters without the shard lock never sees a partial
 * count).  PMH_CORRUPT if a bucket or posting block disagreed with its
 * checksum: it was left unchanged.
 */
PmhStatus
pmh_bulk_delete(const PmhSegment *seg, const PmhDeleteOps *ops, uint64_t lsn,
				const PmhPersist *persist, PmhCounts *remaining, uint64_t *removed)
{
	uint32_t	nposting = seg->nposting;
	PmhPosting *first = NULL;
	uint32_t	head = 0;
	int			damaged = 0;
	PmhCounts	left = {0, 0, 0, 0};

	*removed = 0;
	for (uint32_t j = 0; j < nposting; j++)
	{
		PmhPosting *blk = pmh_posting(seg, (uint64_t) seg->nbuckets + 1 + j);
		uint64_t	gone;

		if (blk->nblocks > 0 || first == NULL)
		{
			head = j;
			first = blk;
		}
		gone = posting_delete(seg, blk, ops, lsn, persist, &left, &damaged);
		/* let appends reuse the freed slots */
		if (gone && j - head < first->cursor)
			first->cursor = (uint16_t) (j - head);
		*removed += gone;
	}
	for (uint32_t b = 0; b < seg->nbuckets; b++)
		*removed += bucket_delete(seg, pmh_bucket(seg, b), ops, lsn, persist, &left, &damaged);
	pmh_drain(persist);
	*remaining = left;
	return damaged ? PMH_CORRUPT : PMH_OK;
}

/*
 * Set the overflow bit of every bucket between an entry's home bucket and
 * its own that lacks it: a crash may keep an entry whose insert extended a
 * run without the bits it set (an ordinary file's pages reach the disk in
 * any order).  One sweep from the last bucket down, twice around the ring:
 * need_low is the lowest position that an entry above needs marked.  A
 * bucket marked here is stamped after after_lsn, so the flagging that
 * follows reseals it, and so does the next recovery if a crash comes
 * first.  An unchanged bucket that fails its checksum is damage, left for
 * verification to report: it is not marked (checked only then, so the
 * sweep computes no checksum of the buckets it leaves alone).
 */
static void
reconnect_entries(const PmhSegment *seg, uint64_t after_lsn, const PmhPersist *persist)
{
	int64_t		n = seg->nbuckets;
	int64_t		need_low = INT64_MAX;

	for (int64_t x = 2 * n - 1; x >= 0 && (x >= n || x >= need_low); x--)
	{
		uint32_t	b = (uint32_t) (x % n);
		PmhBucket  *bucket = pmh_bucket(seg, b);
		uint32_t	valid = (uint32_t) (bucket->commit & PMH_VALID_MASK);

		if (x >= need_low && !(bucket->commit & PMH_OVERFLOW_BIT) &&
			(bucket->lsn > after_lsn || pmh_bucket_sound(seg, bucket, bucket->commit)))
		{
			if (bucket->lsn <= after_lsn)
				bucket->lsn = after_lsn + 1;
			pmh_store_release(&bucket->commit,
							  (bucket->commit | PMH_OVERFLOW_BIT) + PMH_SEQ_ONE);
			pmh_flush(persist, &bucket->commit, PMH_BUCKET_COMMIT_BYTES);
		}
		for (; x >= n && valid; valid &= valid - 1)
		{
			uint32_t	home = pmh_home_bucket(pmh_slot_code(bucket, __builtin_ctz(valid)),
											   seg->nbuckets);
			int64_t		distance = (b - (int64_t) home + n) % n;

			if (x - distance < need_low)
				need_low = x - distance;
		}
	}
}

/*
 * The slots of a bucket changed after a crash's recovery point that the
 * crash tore: it kept the commit word that made a slot valid without all
 * of the slot's TID, whose old bytes show through: zero in a slot never
 * used or blanked by the delete that freed it, else a freed entry's TID.
 * Where that reads as a heap TID, the entry is a phantom for the heap
 * check; where it reads as a chain reference that resolves to no chain, it
 * is torn, since references are written only by rebuilds, which make a
 * segment durable before they publish it.
 */
static uint64_t
torn_bucket_slots(const PmhSegment *seg, const PmhBucket *bucket)
{
	uint64_t	torn = 0;

	for (uint64_t v = bucket->commit & PMH_VALID_MASK; v; v &= v - 1)
	{
		int			i = __builtin_ctzll(v);
		PmhTid		tid = pmh_slot_tid(bucket, i);

		if (pmh_is_chain_ref(tid) &&
			pmh_chain_first(seg, tid, pmh_slot_code(bucket, i)) == NULL)
			torn |= v & -v;
	}
	return torn;
}

/*
 * The slots among valid of a posting block changed after a crash's recovery
 * point that the crash tore, as for buckets: a posting block holds heap
 * TIDs only, so a TID whose offset is 0 is torn.
 */
static uint64_t
torn_posting_slots(const PmhPosting *blk, uint64_t valid)
{
	uint64_t	torn = 0;

	for (; valid; valid &= valid - 1)
	{
		if (blk->tid[__builtin_ctzll(valid)].offset == 0)
			torn |= valid & -valid;
	}
	return torn;
}

/*
 * Clear the torn slots of the buckets changed after after_lsn (their
 * checksums are resealed by the caller).
 */
static void
clear_torn_slots(const PmhSegment *seg, uint64_t after_lsn, const PmhPersist *persist)
{
	for (uint32_t b = 0; b < seg->nbuckets; b++)
	{
		PmhBucket  *bucket = pmh_bucket(seg, b);
		uint64_t	torn;

		if (bucket->lsn <= after_lsn)
			continue;
		torn = torn_bucket_slots(seg, bucket);
		if (torn)
		{
			bucket->unverified &= ~torn;
			pmh_store_release(&bucket->commit, (bucket->commit & ~torn) + PMH_SEQ_ONE);
			pmh_flush(persist, &bucket->commit, PMH_BUCKET_COMMIT_BYTES);
			blank_slots(bucket->slot, torn, persist);
		}
	}
}

/*
 * Flag as unverified every entry of the buckets changed after after_lsn,
 * with the chains they reference: after a crash these may be phantoms whose
 * WAL was lost, or torn copies of a base backup.  In a file with checksums,
 * reseal them, and every posting block changed after after_lsn: a crash may
 * have kept a commit word without its seal, or a seal without its commit
 * (see chain_append and posting_delete).  Returns the number flagged.
 */
uint64_t
pmh_flag_unverified(const PmhSegment *seg, uint64_t after_lsn, const PmhPersist *persist)
{
	uint64_t	flagged = 0;

	clear_torn_slots(seg, after_lsn, persist);
	reconnect_entries(seg, after_lsn, persist);
	for (uint32_t b = 0; b < seg->nbuckets; b++)
	{
		PmhBucket  *bucket = pmh_bucket(seg, b);
		uint64_t	valid = bucket->commit & PMH_VALID_MASK;
		uint64_t	refs = 0;
		int			changed = bucket->lsn > after_lsn;

		for (uint64_t v = valid; v; v &= v - 1)
		{
			int			i = __builtin_ctzll(v);

			if (pmh_is_chain_ref(pmh_slot_tid(bucket, i)))
				refs |= UINT64_C(1) << i;
		}
		if (changed)
		{
			pmh_bucket_seal(seg, bucket);
			pmh_flush(persist, &bucket->commit, PMH_BUCKET_COMMIT_BYTES);
			flagged += __builtin_popcountll(valid & ~refs & ~bucket->unverified);
			/* a reference's bit says that its chain holds unverified entries */
			bucket->unverified |= valid;
			pmh_flush(persist, &bucket->unverified, sizeof(uint64_t));
		}
		/*
		 * A chain's blocks are flagged when its bucket changed, or when they
		 * did themselves: a block can reach the medium before the stamp of
		 * the bucket that refers to it.
		 */
		for (; refs; refs &= refs - 1)
		{
			int			i = __builtin_ctzll(refs);
			PmhPosting *first = pmh_chain_first(seg, pmh_slot_tid(bucket, i),
												pmh_slot_code(bucket, i));

			for (uint32_t j = 0; first && j < first->nblocks; j++)
			{
				PmhPosting *blk = first + j;
				uint64_t	pvalid = blk->commit & PMH_POSTING_VALID_MASK;
				uint64_t	torn;

				if (!changed && blk->lsn <= after_lsn)
					continue;
				torn = torn_posting_slots(blk, pvalid);
				if (torn)
				{
					pvalid &= ~torn;
					pmh_store_release(&blk->commit, (blk->commit & ~torn) + PMH_POSTING_SEQ_ONE);
					blank_slots(blk->tid, torn, persist);
				}
				flagged += __builtin_popcountll(pvalid & ~blk->unverified);
				blk->unverified = (blk->unverified & ~torn) | pvalid;
				pmh_flush(persist, &blk->commit, 2 * sizeof(uint64_t));
				pmh_posting_seal(seg, blk, persist);
				if (!(bucket->unverified & (UINT64_C(1) << i)))
				{
					bucket->unverified |= UINT64_C(1) << i;
					pmh_flush(persist, &bucket->unverified, sizeof(uint64_t));
				}
			}
		}
	}
	for (uint32_t j = 0; j < seg->nposting && seg->checksum_seed != 0; j++)
	{
		PmhPosting *blk = pmh_posting(seg, (uint64_t) seg->nbuckets + 1 + j);

		if (blk->lsn > after_lsn)
			pmh_posting_seal(seg, blk, persist);
	}
	pmh_drain(persist);
	return flagged;
}
