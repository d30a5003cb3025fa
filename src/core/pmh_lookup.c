/*-------------------------------------------------------------------------
 *
 * pmh_lookup.c
 *	  Lock-free lookup of every TID stored under a hash code.
 *
 * A lookup takes no lock.  For each bucket of the key's run it reads the
 * commit word, copies the matching slots, and reads the commit word again;
 * if it changed, a writer was at work and the bucket is read again.  In a
 * file with checksums what it read must also agree with the bucket's
 * checksums as of that commit word (the tags always, the TID fields when a
 * tag matched); a disagreement is read again too, since a writer seals
 * just after its commit, and after PMH_LOOKUP_RETRIES attempts the lookup
 * returns PMH_BUSY, so that the caller retries with writers locked out,
 * where a disagreement can only be damage.  Only
 * validated copies reach the caller's sink.  Chains of posting blocks are
 * read the same way, block by block.  A run ends at the first bucket whose
 * overflow bit is clear.
 *
 * A batched lookup overlaps the memory latencies of many keys in three
 * stages: it loads the tags of a key's home bucket, then compares them and
 * loads the matching slots and the next bucket of an overflowing run, then
 * copies, validates and follows the run.  A key whose bucket changed
 * between the stages or refers to a posting chain is looked up again from
 * the start.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/core/pmh_lookup.c
 *
 *-------------------------------------------------------------------------
 */
#include "pmh_internal.h"

/* What a lookup copied out of one bucket. */
typedef struct BucketCopy
{
	PmhTid		tids[PMH_BUCKET_SLOTS];
	PmhTid		refs[PMH_BUCKET_SLOTS];	/* chain references */
	int			ntids;
	int			nrefs;
	uint64_t	unverified;		/* bit i: tids[i] is flagged */
} BucketCopy;

#define PMH_LOOKUP_DISTANCE 12		/* keys between two stages of a batch */
#define PMH_LOOKUP_RING		32		/* > 2 * PMH_LOOKUP_DISTANCE, a power of 2 */

/* One key of a batched lookup between its stages. */
typedef struct BatchKey
{
	const PmhBucket *bucket;	/* home bucket, NULL if the shard is empty */
	uint32_t	home;			/* its number */
	uint32_t	code;			/* the key's hash code in its segment */
	uint64_t	commit;			/* commit word the comparison saw */
	uint32_t	mask;			/* valid slots with the key's tag */
} BatchKey;

/*
 * Whether what a lookup read of a bucket agrees with its checksums: the
 * tags, and the TID fields if a tag matched (a TID field also holds the
 * high code bits that decide whether the slot holds the key).
 */
static inline int
bucket_read_sound(const PmhSegment *seg, const PmhBucket *bucket, uint64_t commit,
				  uint32_t tag_mask, uint64_t sums)
{
	uint32_t	b;

	if (seg->checksum_seed == 0)
		return 1;
	b = pmh_bucket_number(seg, bucket);
	return (uint32_t) sums == pmh_bucket_tag_checksum(seg, bucket, b, commit) &&
		(tag_mask == 0 || (uint32_t) (sums >> 32) == pmh_bucket_tid_checksum(seg, bucket, b,
																		  commit));
}

/*
 * A bucket's two checksums, read before its commit word is read again, so
 * that a writer's later seals cannot make an unchanged bucket look damaged.
 */
static inline uint64_t
bucket_sums(const PmhBucket *bucket)
{
	return (uint64_t) bucket->tag_checksum | (uint64_t) bucket->tid_checksum << 32;
}

/* Deliver every valid TID of a posting chain to the sink. */
static PmhStatus
lookup_chain(const PmhSegment *seg, const PmhPosting *first, PmhTidSink sink, void *arg)
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
			if (pmh_reload(&blk->commit) == c1 && pmh_posting_sound(seg, blk, c1))
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
 * Copy the TIDs of the slots in tag_mask that hold the code; chain references
 * go apart.
 */
static inline void
copy_slots(const PmhBucket *bucket, uint32_t tag_mask, uint32_t code, BucketCopy *out)
{
	uint64_t	flags = bucket->unverified;
	uint32_t	mask = pmh_filter_code(bucket, tag_mask, code);

	out->ntids = out->nrefs = 0;
	out->unverified = 0;
	while (mask)
	{
		int			i = __builtin_ctz(mask);
		PmhTid		tid = pmh_slot_tid(bucket, i);

		mask &= mask - 1;
		if (pmh_is_chain_ref(tid))
			out->refs[out->nrefs++] = tid;
		else
		{
			out->unverified |= ((flags >> i) & 1) << out->ntids;
			out->tids[out->ntids++] = tid;
		}
	}
}

/*
 * Deliver every TID stored under a hash code from bucket b to the end of its
 * run of overflowing buckets, visiting at most nsteps buckets (a run whose
 * every bucket overflows goes round the segment once).
 */
static PmhStatus
lookup_from(const PmhSegment *seg, uint32_t code, uint32_t b, uint32_t nsteps,
			PmhTidSink sink, void *arg)
{
	uint32_t	nbuckets = seg->nbuckets;
	uint16_t	tag = (uint16_t) code;

	for (uint32_t step = 0; step < nsteps; step++)
	{
		const PmhBucket *bucket = pmh_bucket(seg, b);
		BucketCopy	copy;
		int			attempt = 0;
		uint64_t	c1;

		/* most TIDs lie in the bucket's third line: load it meanwhile */
		__builtin_prefetch((const char *) bucket + 128, 0, 3);
		for (;;)
		{
			uint32_t	tag_mask;
			uint64_t	sums;

			c1 = pmh_load_acquire(&bucket->commit);
			if (c1 & PMH_OVERFLOW_BIT)
				__builtin_prefetch(pmh_bucket(seg, pmh_next_bucket(b, nbuckets)), 0, 3);
			tag_mask = pmh_match_tags(bucket->tag, tag) & (uint32_t) c1;
			copy_slots(bucket, tag_mask, code, &copy);
			sums = bucket_sums(bucket);
			if (pmh_reload(&bucket->commit) == c1 &&
				bucket_read_sound(seg, bucket, c1, tag_mask, sums))
				break;
			if (++attempt > PMH_LOOKUP_RETRIES)
				return PMH_BUSY;
		}
		if (copy.ntids > 0)
			sink(arg, copy.tids, copy.ntids, copy.unverified);
		for (int r = 0; r < copy.nrefs; r++)
		{
			const PmhPosting *first = pmh_chain_first(seg, copy.refs[r], code);
			PmhStatus	st;

			if (first == NULL)
				return PMH_CORRUPT;
			st = lookup_chain(seg, first, sink, arg);
			if (st != PMH_OK)
				return st;
		}
		if (!(c1 & PMH_OVERFLOW_BIT))
			return PMH_OK;
		b = pmh_next_bucket(b, nbuckets);
	}
	return PMH_OK;
}

/* Find every TID stored under hash in a segment; deliver them to sink. */
PmhStatus
pmh_lookup(const PmhSegment *seg, uint32_t hash, PmhTidSink sink, void *arg)
{
	uint32_t	code = pmh_hash_code(hash, seg->shard_bits);

	if (seg->nbuckets == 0)
		return PMH_OK;
	return lookup_from(seg, code, pmh_home_bucket(code, seg->nbuckets), seg->nbuckets,
					   sink, arg);
}

/* Batched lookup, first stage: start loading the key's home bucket. */
static inline void
stage_load(BatchKey *key, const PmhSegment *seg, uint32_t hash)
{
	const char *bucket;

	key->bucket = NULL;
	if (seg->nbuckets == 0)
		return;
	key->code = pmh_hash_code(hash, seg->shard_bits);
	key->home = pmh_home_bucket(key->code, seg->nbuckets);
	bucket = (const char *) pmh_bucket(seg, key->home);
	__builtin_prefetch(bucket, 0, 3);
	__builtin_prefetch(bucket + 64, 0, 3);
	key->bucket = (const PmhBucket *) bucket;
}

/*
 * Batched lookup, second stage: compare the tags, and start loading the
 * slots that match and the next bucket of an overflowing run.
 */
static inline void
stage_compare(BatchKey *key, const PmhSegment *seg)
{
	const PmhBucket *bucket = key->bucket;
	uint32_t	mask;

	if (bucket == NULL)
		return;
	key->commit = pmh_load_acquire(&bucket->commit);
	mask = pmh_match_tags(bucket->tag, (uint16_t) key->code) &
		(uint32_t) key->commit;
	key->mask = mask;
	if (mask)
	{
		__builtin_prefetch(&bucket->slot[__builtin_ctz(mask)], 0, 3);
		__builtin_prefetch(&bucket->slot[31 - __builtin_clz(mask)], 0, 3);
	}
	if (key->commit & PMH_OVERFLOW_BIT)
	{
		const char *next = (const char *) pmh_bucket(seg, pmh_next_bucket(key->home,
																		  seg->nbuckets));

		__builtin_prefetch(next, 0, 3);
		__builtin_prefetch(next + 64, 0, 3);
	}
}

/*
 * Batched lookup, last stage: copy, validate and deliver the home bucket's
 * TIDs and follow an overflowing run.  A bucket that changed since the
 * comparison, or that refers to a posting chain, is looked up again from
 * the start.
 */
static inline PmhStatus
stage_deliver(const BatchKey *key, const PmhSegment *seg, uint32_t hash,
			  PmhTidSink sink, void *arg)
{
	const PmhBucket *bucket = key->bucket;
	BucketCopy	copy;
	uint64_t	sums;

	if (bucket == NULL)
		return PMH_OK;
	copy_slots(bucket, key->mask, key->code, &copy);
	sums = bucket_sums(bucket);
	if (copy.nrefs > 0 || pmh_reload(&bucket->commit) != key->commit ||
		!bucket_read_sound(seg, bucket, key->commit, key->mask, sums))
		return pmh_lookup(seg, hash, sink, arg);
	if (copy.ntids > 0)
		sink(arg, copy.tids, copy.ntids, copy.unverified);
	if (key->commit & PMH_OVERFLOW_BIT)
		return lookup_from(seg, key->code, pmh_next_bucket(key->home, seg->nbuckets),
						   seg->nbuckets - 1, sink, arg);
	return PMH_OK;
}

/*
 * Look up n keys, key k's hash in segs[k]; deliver key k's TIDs to sink with
 * args[k] and its status to status[k].  The three stages run as a software
 * pipeline, PMH_LOOKUP_DISTANCE keys apart, so that the cache misses of
 * about twice that many keys are in flight at any time.
 */
void
pmh_lookup_batch(const PmhSegment *segs, const uint32_t *hashes, int n,
				 PmhTidSink sink, void *const *args, PmhStatus *status)
{
	BatchKey	ring[PMH_LOOKUP_RING];
	const int	d = PMH_LOOKUP_DISTANCE;

	for (int t = 0; t < n + 2 * d; t++)
	{
		int			c = t - d;
		int			f = t - 2 * d;

		if (t < n)
			stage_load(&ring[t % PMH_LOOKUP_RING], &segs[t], hashes[t]);
		if (c >= 0 && c < n)
			stage_compare(&ring[c % PMH_LOOKUP_RING], &segs[c]);
		if (f >= 0)
			status[f] = stage_deliver(&ring[f % PMH_LOOKUP_RING], &segs[f], hashes[f],
									  sink, args[f]);
	}
}
