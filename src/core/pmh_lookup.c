/*-------------------------------------------------------------------------
 *
 * pmh_lookup.c
 *	  Lock-free lookup of every TID stored under a hash code.
 *
 * A lookup takes no lock.  For each bucket of the key's run it reads the
 * commit word, copies the matching slots, and reads the commit word again;
 * if it changed, a writer was at work and the bucket is read again.  Only
 * validated copies reach the caller's sink.  Chains of posting blocks are
 * read the same way, block by block.  A run ends at the first bucket whose
 * overflow bit is clear.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/core/pmh_lookup.c
 *
 *-------------------------------------------------------------------------
 */
#include "pmh_internal.h"

/* Deliver every valid TID of a posting chain to the sink. */
static PmhStatus
lookup_chain(const PmhPosting *first, PmhTidSink sink, void *arg)
{
	PmhTid		copy[PMH_POSTING_SLOTS];

	for (uint32_t j = 0; j < first->nblocks; j++)
	{
		const PmhPosting *blk = first + j;
		int			attempt = 0;
		uint64_t	unverified;
		int			n;

		for (;;)
		{
			uint64_t	c1 = pmh_load_acquire(&blk->commit);
			uint64_t	valid = c1 & PMH_POSTING_VALID_MASK;
			uint64_t	flags = blk->unverified;

			n = 0;
			unverified = 0;
			while (valid)
			{
				int			i = __builtin_ctzll(valid);

				valid &= valid - 1;
				unverified |= ((flags >> i) & 1) << n;
				copy[n++] = blk->tid[i];
			}
			if (pmh_reload(&blk->commit) == c1)
				break;
			if (++attempt > PMH_LOOKUP_RETRIES)
				return PMH_BUSY;
		}
		if (n > 0)
			sink(arg, copy, n, unverified);
	}
	return PMH_OK;
}

/*
 * Start loading the cache lines a lookup of hash will read first (commit
 * word, hash codes and the first TIDs of its home bucket), so that a caller
 * probing a batch of keys overlaps their memory latencies.
 */
void
pmh_prefetch(const PmhSegment *seg, uint32_t hash)
{
	const char *bucket;

	if (seg->nbuckets == 0)
		return;
	bucket = (const char *) pmh_bucket(seg, pmh_home_bucket(hash, seg->shard_bits, seg->nbuckets));
	__builtin_prefetch(bucket, 0, 3);
	__builtin_prefetch(bucket + 64, 0, 3);
	__builtin_prefetch(bucket + 128, 0, 3);
}

/* Find every TID stored under hash in a segment; deliver them to sink. */
PmhStatus
pmh_lookup(const PmhSegment *seg, uint32_t hash, PmhTidSink sink, void *arg)
{
	uint32_t	nbuckets = seg->nbuckets;
	uint32_t	b;

	if (nbuckets == 0)
		return PMH_OK;
	b = pmh_home_bucket(hash, seg->shard_bits, nbuckets);
	for (uint32_t step = 0; step < nbuckets; step++)
	{
		const PmhBucket *bucket = pmh_bucket(seg, b);
		PmhTid		copy[PMH_BUCKET_SLOTS];
		PmhTid		refs[PMH_BUCKET_SLOTS];
		int			ncopy;
		int			nrefs;
		int			attempt = 0;
		uint64_t	unverified;
		uint64_t	c1;

		/* most TIDs lie in the bucket's third line: load it meanwhile */
		__builtin_prefetch((const char *) bucket + 128, 0, 3);
		for (;;)
		{
			uint32_t	mask;
			uint64_t	flags;

			c1 = pmh_load_acquire(&bucket->commit);
			if (c1 & PMH_OVERFLOW_BIT)
				__builtin_prefetch(pmh_bucket(seg, pmh_next_bucket(b, nbuckets)), 0, 3);
			mask = pmh_match_hashes(bucket->hash, hash) & (uint32_t) c1;
			flags = bucket->unverified;
			ncopy = nrefs = 0;
			unverified = 0;
			while (mask)
			{
				int			i = __builtin_ctz(mask);
				PmhTid		tid = bucket->tid[i];

				mask &= mask - 1;
				if (pmh_is_chain_ref(tid))
					refs[nrefs++] = tid;
				else
				{
					unverified |= ((flags >> i) & 1) << ncopy;
					copy[ncopy++] = tid;
				}
			}
			if (pmh_reload(&bucket->commit) == c1)
				break;
			if (++attempt > PMH_LOOKUP_RETRIES)
				return PMH_BUSY;
		}
		if (ncopy > 0)
			sink(arg, copy, ncopy, unverified);
		for (int r = 0; r < nrefs; r++)
		{
			const PmhPosting *first = pmh_chain_first(seg, refs[r], hash);
			PmhStatus	st;

			if (first == NULL)
				return PMH_CORRUPT;
			st = lookup_chain(first, sink, arg);
			if (st != PMH_OK)
				return st;
		}
		if (!(c1 & PMH_OVERFLOW_BIT))
			return PMH_OK;
		b = pmh_next_bucket(b, nbuckets);
	}
	return PMH_OK;
}
