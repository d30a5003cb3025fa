/*-------------------------------------------------------------------------
 *
 * pmh_modify.c
 *	  Insert and delete entries in a published segment.
 *
 * The caller holds the shard's writer lock, so there is one writer per
 * segment; lock-free readers may be probing it.  Every change follows one
 * order: write the slot, flush it, fence; then store the commit word with
 * the new valid bits and the next sequence number, flush it, fence.  A
 * reader that overlaps a change sees the sequence move and reads again; a
 * crash leaves either the old or the new commit word, never a torn slot.
 *
 * An entry goes to the first free slot of its run (the buckets from its
 * home bucket to the first bucket whose overflow bit is clear).  If the run
 * is full, the entry extends it by at most PMH_MAX_PROBE buckets, setting the
 * overflow bit of every full bucket it passes before it commits itself, so a
 * lookup can never stop short of a committed entry.  Deleted slots are free
 * at once; overflow bits are cleared only by rebuilding the shard.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/core/pmh_modify.c
 *
 *-------------------------------------------------------------------------
 */
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
	int			corrupt;
} RunScan;

/* Walk the run of hash from its home bucket. */
static void
scan_run(const PmhSegment *seg, uint32_t hash, int want_chain, RunScan *rs)
{
	uint32_t	nbuckets = seg->nbuckets;
	uint32_t	b = pmh_home_bucket(hash, seg->shard_bits, nbuckets);

	rs->free_bucket = NO_BUCKET;
	rs->end_bucket = NO_BUCKET;
	rs->end_distance = 0;
	rs->chain = NULL;
	rs->chain_bucket = NULL;
	rs->corrupt = 0;
	for (uint32_t dist = 0; dist < nbuckets; dist++)
	{
		PmhBucket  *bucket = pmh_bucket(seg, b);
		uint64_t	c = bucket->commit;
		uint32_t	valid = (uint32_t) (c & PMH_VALID_MASK);

		if (rs->free_bucket == NO_BUCKET && valid != PMH_VALID_MASK)
			rs->free_bucket = b;
		if (want_chain && rs->chain == NULL)
		{
			uint32_t	mask = pmh_match_hashes(bucket->hash, hash) & valid;

			while (mask)
			{
				int			i = __builtin_ctz(mask);

				mask &= mask - 1;
				if (pmh_is_chain_ref(bucket->tid[i]))
				{
					rs->chain = pmh_chain_first(seg, bucket->tid[i], hash);
					rs->chain_bucket = bucket;
					if (rs->chain == NULL)
						rs->corrupt = 1;
					break;
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

/* Write an entry into a free slot of a bucket and commit it. */
static void
commit_slot(PmhBucket *bucket, uint32_t hash, PmhTid tid, uint64_t lsn,
			const PmhPersist *persist)
{
	uint64_t	c = bucket->commit;
	int			i = __builtin_ctzll(~c & PMH_VALID_MASK);

	bucket->hash[i] = hash;
	bucket->tid[i] = tid;
	pmh_flush(persist, &bucket->hash[i], sizeof(uint32_t));
	pmh_flush(persist, &bucket->tid[i], sizeof(PmhTid));
	pmh_drain(persist);
	if (lsn > bucket->lsn)
		bucket->lsn = lsn;
	pmh_store_release(&bucket->commit, (c | (UINT64_C(1) << i)) + PMH_SEQ_ONE);
	pmh_flush(persist, &bucket->commit, 3 * sizeof(uint64_t));
	pmh_drain(persist);
}

/*
 * Place an entry in the first free slot of its run, or extend the run by up
 * to max_extend buckets.  PMH_FULL when neither works.
 */
static PmhStatus
place_entry(const PmhSegment *seg, const RunScan *rs, uint32_t hash, PmhTid tid,
			uint64_t lsn, const PmhPersist *persist, uint32_t max_extend)
{
	uint32_t	nbuckets = seg->nbuckets;
	uint32_t	target = NO_BUCKET;
	uint32_t	b;

	if (rs->free_bucket != NO_BUCKET)
	{
		commit_slot(pmh_bucket(seg, rs->free_bucket), hash, tid, lsn, persist);
		return PMH_OK;
	}
	if (rs->end_bucket == NO_BUCKET)
		return PMH_FULL;

	b = rs->end_bucket;
	for (uint32_t d = 1; d <= max_extend && rs->end_distance + d < nbuckets; d++)
	{
		b = pmh_next_bucket(b, nbuckets);
		if ((pmh_bucket(seg, b)->commit & PMH_VALID_MASK) != PMH_VALID_MASK)
		{
			target = b;
			break;
		}
	}
	if (target == NO_BUCKET)
		return PMH_FULL;

	/* mark the passed buckets before the entry becomes visible */
	for (b = rs->end_bucket; b != target; b = pmh_next_bucket(b, nbuckets))
	{
		PmhBucket  *passed = pmh_bucket(seg, b);

		pmh_store_release(&passed->commit,
						  (passed->commit | PMH_OVERFLOW_BIT) + PMH_SEQ_ONE);
		pmh_flush(persist, &passed->commit, sizeof(uint64_t));
	}
	commit_slot(pmh_bucket(seg, target), hash, tid, lsn, persist);
	return PMH_OK;
}

/* Append a TID to a posting chain; 0 if the chain is full. */
static int
chain_append(PmhPosting *first, PmhTid tid, const PmhPersist *persist)
{
	for (uint32_t j = first->cursor; j < first->nblocks; j++)
	{
		PmhPosting *blk = first + j;
		uint64_t	c = blk->commit;
		uint64_t	free_bits = ~c & PMH_POSTING_VALID_MASK;
		int			i;

		if (free_bits == 0)
			continue;
		i = __builtin_ctzll(free_bits);
		blk->tid[i] = tid;
		pmh_flush(persist, &blk->tid[i], sizeof(PmhTid));
		pmh_drain(persist);
		pmh_store_release(&blk->commit, (c | (UINT64_C(1) << i)) + PMH_POSTING_SEQ_ONE);
		pmh_flush(persist, &blk->commit, sizeof(uint64_t));
		pmh_drain(persist);
		first->cursor = (uint16_t) j;
		return 1;
	}
	first->cursor = first->nblocks;
	return 0;
}

/*
 * Insert an entry.  PMH_FULL asks the caller to rebuild the shard with the
 * entry; PMH_CORRUPT reports a chain reference that does not fit.
 */
PmhStatus
pmh_insert(const PmhSegment *seg, uint32_t hash, PmhTid tid, uint64_t lsn,
		   const PmhPersist *persist, int *used_slot)
{
	RunScan		rs;

	*used_slot = 0;
	if (seg->nbuckets == 0)
		return PMH_FULL;
	scan_run(seg, hash, 1, &rs);
	if (rs.corrupt)
		return PMH_CORRUPT;
	if (rs.chain)
	{
		/* stamp the reference's bucket first, so recovery finds the entry */
		if (lsn > rs.chain_bucket->lsn)
		{
			rs.chain_bucket->lsn = lsn;
			pmh_flush(persist, &rs.chain_bucket->lsn, sizeof(uint64_t));
		}
		if (chain_append(rs.chain, tid, persist))
			return PMH_OK;
	}
	*used_slot = 1;
	return place_entry(seg, &rs, hash, tid, lsn, persist, PMH_MAX_PROBE);
}

/*
 * Place an entry into a segment image that nobody else can see yet, however
 * far its run must extend.  The image must have a free slot somewhere.
 */
void
pmh_image_place(const PmhSegment *seg, uint32_t hash, PmhTid tid, uint64_t lsn)
{
	RunScan		rs;

	scan_run(seg, hash, 0, &rs);
	(void) place_entry(seg, &rs, hash, tid, lsn, NULL, seg->nbuckets);
}

/* Remove a TID from a posting chain; 1 if it was there. */
static int
chain_remove(PmhPosting *first, PmhTid tid, const PmhPersist *persist, int remove)
{
	for (uint32_t j = 0; j < first->nblocks; j++)
	{
		PmhPosting *blk = first + j;
		uint64_t	valid = blk->commit & PMH_POSTING_VALID_MASK;

		while (valid)
		{
			int			i = __builtin_ctzll(valid);

			valid &= valid - 1;
			if (!pmh_tid_equal(blk->tid[i], tid))
				continue;
			if (remove)
			{
				pmh_store_release(&blk->commit,
								  (blk->commit & ~(UINT64_C(1) << i)) + PMH_POSTING_SEQ_ONE);
				pmh_flush(persist, &blk->commit, sizeof(uint64_t));
				pmh_drain(persist);
				if (j < first->cursor)
					first->cursor = (uint16_t) j;
			}
			return 1;
		}
	}
	return 0;
}

/* Find (hash, tid) along its run; remove it when asked.  1 if found. */
static int
find_entry(const PmhSegment *seg, uint32_t hash, PmhTid tid, uint64_t lsn,
		   const PmhPersist *persist, int remove)
{
	uint32_t	nbuckets = seg->nbuckets;
	uint32_t	b;

	if (nbuckets == 0)
		return 0;
	b = pmh_home_bucket(hash, seg->shard_bits, nbuckets);
	for (uint32_t step = 0; step < nbuckets; step++)
	{
		PmhBucket  *bucket = pmh_bucket(seg, b);
		uint64_t	c = bucket->commit;
		uint32_t	mask = pmh_match_hashes(bucket->hash, hash) & (uint32_t) c;

		while (mask)
		{
			int			i = __builtin_ctz(mask);
			PmhTid		slot = bucket->tid[i];

			mask &= mask - 1;
			if (pmh_is_chain_ref(slot))
			{
				PmhPosting *first = pmh_chain_first(seg, slot, hash);

				if (first && chain_remove(first, tid, persist, remove))
				{
					if (remove && lsn > bucket->lsn)
						bucket->lsn = lsn;
					return 1;
				}
			}
			else if (pmh_tid_equal(slot, tid))
			{
				if (remove)
				{
					if (lsn > bucket->lsn)
						bucket->lsn = lsn;
					pmh_store_release(&bucket->commit,
									  (c & ~(UINT64_C(1) << i)) + PMH_SEQ_ONE);
					pmh_flush(persist, &bucket->commit, 3 * sizeof(uint64_t));
					pmh_drain(persist);
				}
				return 1;
			}
		}
		if (!(c & PMH_OVERFLOW_BIT))
			return 0;
		b = pmh_next_bucket(b, nbuckets);
	}
	return 0;
}

/* Delete one entry if present; 1 if it was deleted. */
int
pmh_delete(const PmhSegment *seg, uint32_t hash, PmhTid tid, uint64_t lsn,
		   const PmhPersist *persist)
{
	return find_entry(seg, hash, tid, lsn, persist, 1);
}

/* Whether the segment holds the entry (hash, tid). */
int
pmh_contains(const PmhSegment *seg, uint32_t hash, PmhTid tid)
{
	return find_entry(seg, hash, tid, 0, NULL, 0);
}

/*
 * Delete every entry whose TID the callback reports dead, with one commit
 * store per changed bucket or posting block and one fence at the end.
 * Returns the number deleted; *remaining gets what is left.
 */
uint64_t
pmh_bulk_delete(const PmhSegment *seg, PmhDeadFn dead, void *arg, uint64_t lsn,
				const PmhPersist *persist, PmhCounts *remaining)
{
	uint64_t	removed = 0;
	uint64_t	kept = 0;
	uint64_t	slots = 0;
	uint64_t	max_lsn = 0;
	uint32_t	nposting = pmh_segment_nposting(seg);

	for (uint32_t b = 0; b < seg->nbuckets; b++)
	{
		PmhBucket  *bucket = pmh_bucket(seg, b);
		uint64_t	c = bucket->commit;
		uint64_t	valid = c & PMH_VALID_MASK;
		uint64_t	gone = 0;

		while (valid)
		{
			int			i = __builtin_ctzll(valid);

			valid &= valid - 1;
			slots++;
			if (pmh_is_chain_ref(bucket->tid[i]))
				continue;
			if (dead(arg, bucket->tid[i]))
				gone |= UINT64_C(1) << i;
			else
				kept++;
		}
		if (gone)
		{
			removed += __builtin_popcountll(gone);
			slots -= __builtin_popcountll(gone);
			if (lsn > bucket->lsn)
				bucket->lsn = lsn;
			pmh_store_release(&bucket->commit, (c & ~gone) + PMH_SEQ_ONE);
			pmh_flush(persist, &bucket->commit, 3 * sizeof(uint64_t));
		}
		if (bucket->lsn > max_lsn)
			max_lsn = bucket->lsn;
	}
	for (uint32_t j = 0, head = 0; j < nposting; j++)
	{
		PmhPosting *blk = pmh_posting(seg, (uint64_t) seg->nbuckets + 1 + j);
		PmhPosting *first = pmh_posting(seg, (uint64_t) seg->nbuckets + 1 + head);
		uint64_t	c = blk->commit;
		uint64_t	valid = c & PMH_POSTING_VALID_MASK;
		uint64_t	gone = 0;

		if (blk->nblocks > 0)
		{
			head = j;
			first = blk;
		}
		while (valid)
		{
			int			i = __builtin_ctzll(valid);

			valid &= valid - 1;
			if (dead(arg, blk->tid[i]))
				gone |= UINT64_C(1) << i;
			else
				kept++;
		}
		if (gone)
		{
			removed += __builtin_popcountll(gone);
			pmh_store_release(&blk->commit, (c & ~gone) + PMH_POSTING_SEQ_ONE);
			pmh_flush(persist, &blk->commit, sizeof(uint64_t));
			/* let appends reuse the freed slots */
			if (j - head < first->cursor)
				first->cursor = (uint16_t) (j - head);
		}
	}
	pmh_drain(persist);
	remaining->entries = kept;
	remaining->slots = slots;
	remaining->max_lsn = max_lsn;
	return removed;
}
