/*-------------------------------------------------------------------------
 *
 * pmh_verify.c
 *	  Structural verification and statistics of a segment.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/core/pmh_verify.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>

#include "pmh_internal.h"

/* Whether every bucket from home up to (not including) b has its overflow bit. */
static int
reachable(const PmhSegment *seg, uint32_t code, uint32_t b)
{
	uint32_t	cur = pmh_home_bucket(code, seg->nbuckets);

	for (uint32_t step = 0; cur != b; step++)
	{
		if (step >= seg->nbuckets ||
			!(pmh_bucket(seg, cur)->commit & PMH_OVERFLOW_BIT))
			return 0;
		cur = pmh_next_bucket(cur, seg->nbuckets);
	}
	return 1;
}

/* Check the segment header against the mirror and the file. */
static const char *
verify_header(const PmhSegment *seg, uint64_t file_generation, uint64_t file_units,
			  char *msg, size_t msglen)
{
	const PmhSegmentHeader *hdr = pmh_segment_header(seg);

	if (hdr->magic != PMH_SEGMENT_MAGIC)
		snprintf(msg, msglen, "shard %u: segment at unit %llu has a wrong magic number",
				 seg->shard, (unsigned long long) seg->unit);
	else if (hdr->checksum != pmh_segment_checksum(hdr))
		snprintf(msg, msglen, "shard %u: segment header checksum mismatch", seg->shard);
	else if (hdr->shard != seg->shard || hdr->shard_bits != seg->shard_bits ||
			 hdr->nbuckets != seg->nbuckets || hdr->nposting != seg->nposting ||
			 hdr->file_generation != file_generation)
		snprintf(msg, msglen, "shard %u: segment header does not match its descriptor",
				 seg->shard);
	else if (seg->unit + 1 + (uint64_t) seg->nbuckets + seg->nposting > file_units)
		snprintf(msg, msglen, "shard %u: segment extends past the end of the file", seg->shard);
	else
		return NULL;
	return msg;
}

/* Check every bucket and posting block against its checksum, if the file keeps them. */
static const char *
verify_checksums(const PmhSegment *seg, char *msg, size_t msglen)
{
	for (uint32_t b = 0; b < seg->nbuckets; b++)
	{
		const PmhBucket *bucket = pmh_bucket(seg, b);

		if (!pmh_bucket_sound(seg, bucket, bucket->commit))
		{
			snprintf(msg, msglen, "shard %u bucket %u: checksum mismatch", seg->shard, b);
			return msg;
		}
	}
	for (uint32_t j = 0; j < seg->nposting; j++)
	{
		const PmhPosting *blk = pmh_posting(seg, (uint64_t) seg->nbuckets + 1 + j);

		if (!pmh_posting_sound(seg, blk, blk->commit))
		{
			snprintf(msg, msglen, "shard %u posting block %u: checksum mismatch", seg->shard, j);
			return msg;
		}
	}
	return NULL;
}

/* Check that posting chains tile the posting area; count them. */
static const char *
verify_chains(const PmhSegment *seg, uint32_t shard, uint64_t *nchains,
			  char *msg, size_t msglen)
{
	uint32_t	nposting = seg->nposting;

	*nchains = 0;
	for (uint32_t j = 0; j < nposting;)
	{
		const PmhPosting *first = pmh_posting(seg, (uint64_t) seg->nbuckets + 1 + j);

		if (first->nblocks == 0 || j + first->nblocks > nposting)
		{
			snprintf(msg, msglen, "shard %u: posting block %u does not start a chain that fits",
					 shard, j);
			return msg;
		}
		for (uint32_t k = 0; k < first->nblocks; k++)
		{
			const PmhPosting *blk = first + k;

			if (blk->hash != first->hash || (k > 0 && blk->nblocks != 0))
			{
				snprintf(msg, msglen, "shard %u: posting block %u is inconsistent with its chain",
						 shard, j + k);
				return msg;
			}
			if (pmh_shard_of(blk->hash, seg->shard_bits) != shard ||
				pmh_canonical_hash(blk->hash, seg->shard_bits) != blk->hash)
			{
				snprintf(msg, msglen, "shard %u: posting chain of hash %08x does not belong to the shard",
						 shard, blk->hash);
				return msg;
			}
		}
		(*nchains)++;
		j += first->nblocks;
	}
	return NULL;
}

/* Append an entry to the scratch list if it fits. */
static void
remember(PmhEntry *scratch, uint64_t capacity, uint64_t *n, uint32_t hash, PmhTid tid)
{
	if (*n < capacity)
	{
		scratch[*n].hash = hash;
		scratch[*n].tid = tid;
	}
	(*n)++;
}

/*
 * Verify every structural invariant of a published segment.  scratch must
 * hold an entry per live TID and chain reference.  Returns NULL if sound,
 * else msg describing the first damage.  *live gets the live TID count.
 */
const char *
pmh_segment_verify(const PmhSegment *seg, uint64_t file_generation, uint64_t file_units,
				   PmhEntry *scratch, uint64_t scratch_capacity, uint64_t *live,
				   char *msg, size_t msglen)
{
	uint32_t	shard = seg->shard;
	uint32_t	nposting = seg->nposting;
	uint64_t	nchains;
	uint64_t	nrefs = 0;
	uint64_t	n = 0;

	*live = 0;
	if (verify_header(seg, file_generation, file_units, msg, msglen) ||
		verify_checksums(seg, msg, msglen) ||
		verify_chains(seg, shard, &nchains, msg, msglen))
		return msg;

	for (uint32_t b = 0; b < seg->nbuckets; b++)
	{
		const PmhBucket *bucket = pmh_bucket(seg, b);
		uint64_t	valid = bucket->commit & PMH_VALID_MASK;

		if (bucket->commit & (PMH_SEQ_ONE - 1) & ~(PMH_VALID_MASK | PMH_OVERFLOW_BIT))
		{
			snprintf(msg, msglen, "shard %u bucket %u: reserved commit bits are set", shard, b);
			return msg;
		}
		if (bucket->unverified & ~valid)
		{
			snprintf(msg, msglen, "shard %u bucket %u: free slots are marked unverified", shard, b);
			return msg;
		}
		while (valid)
		{
			int			i = __builtin_ctzll(valid);
			uint32_t	code = pmh_slot_code(bucket, i);
			uint32_t	hash = pmh_code_hash(code, shard, seg->shard_bits);
			PmhTid		tid = pmh_slot_tid(bucket, i);

			valid &= valid - 1;
			if (!reachable(seg, code, b))
			{
				snprintf(msg, msglen,
						 "shard %u bucket %u slot %d: hash %08x is not reachable from its home bucket %u",
						 shard, b, i, hash, pmh_home_bucket(code, seg->nbuckets));
				return msg;
			}
			if (pmh_is_chain_ref(tid))
			{
				if (pmh_chain_first(seg, tid, code) == NULL)
				{
					snprintf(msg, msglen, "shard %u bucket %u slot %d: chain reference %u is invalid",
							 shard, b, i, pmh_tid_block(tid));
					return msg;
				}
				nrefs++;
			}
			else
				(*live)++;
			remember(scratch, scratch_capacity, &n, hash, tid);
		}
	}
	if (nrefs != nchains)
	{
		snprintf(msg, msglen, "shard %u: %llu chain references for %llu posting chains",
				 shard, (unsigned long long) nrefs, (unsigned long long) nchains);
		return msg;
	}
	for (uint32_t j = 0; j < nposting; j++)
	{
		const PmhPosting *blk = pmh_posting(seg, (uint64_t) seg->nbuckets + 1 + j);
		uint64_t	valid = blk->commit & PMH_POSTING_VALID_MASK;

		if (blk->unverified & ~valid)
		{
			snprintf(msg, msglen, "shard %u posting block %u: free slots are marked unverified",
					 shard, j);
			return msg;
		}
		while (valid)
		{
			int			i = __builtin_ctzll(valid);

			valid &= valid - 1;
			if (blk->tid[i].offset == 0)
			{
				snprintf(msg, msglen, "shard %u posting block %u slot %d: invalid TID", shard, j, i);
				return msg;
			}
			(*live)++;
			remember(scratch, scratch_capacity, &n, blk->hash, blk->tid[i]);
		}
	}
	if (n > scratch_capacity)
	{
		snprintf(msg, msglen, "shard %u: more entries than counted", shard);
		return msg;
	}
	qsort(scratch, n, sizeof(PmhEntry), pmh_entry_cmp);
	for (uint64_t k = 1; k < n; k++)
	{
		if (scratch[k].hash == scratch[k - 1].hash &&
			pmh_tid_equal(scratch[k].tid, scratch[k - 1].tid))
		{
			snprintf(msg, msglen, "shard %u: entry (hash %08x, TID (%u,%u)) is stored twice",
					 shard, scratch[k].hash, pmh_tid_block(scratch[k].tid), scratch[k].tid.offset);
			return msg;
		}
	}
	return NULL;
}

/* Longest run a lookup can walk in a segment, in buckets. */
static uint32_t
longest_run(const PmhSegment *seg)
{
	uint32_t	best = 0;
	uint32_t	streak = 0;

	/* two passes over the buckets cover runs that wrap around */
	for (uint64_t k = 0; k < 2 * (uint64_t) seg->nbuckets; k++)
	{
		const PmhBucket *bucket = pmh_bucket(seg, (uint32_t) (k % seg->nbuckets));

		if (bucket->commit & PMH_OVERFLOW_BIT)
		{
			if (++streak >= seg->nbuckets)
				return seg->nbuckets;
		}
		else
		{
			if (streak + 1 > best)
				best = streak + 1;
			streak = 0;
		}
	}
	return best;
}

/* Add a segment's structure to running statistics (writer side or quiet). */
void
pmh_segment_stats(const PmhSegment *seg, PmhStats *stats)
{
	uint32_t	nposting = seg->nposting;
	uint32_t	run = longest_run(seg);

	stats->segments++;
	stats->buckets += seg->nbuckets;
	stats->posting_blocks += nposting;
	if (run > stats->max_probe)
		stats->max_probe = run;
	for (uint32_t b = 0; b < seg->nbuckets; b++)
	{
		const PmhBucket *bucket = pmh_bucket(seg, b);
		uint64_t	valid = bucket->commit & PMH_VALID_MASK;

		if (bucket->commit & PMH_OVERFLOW_BIT)
			stats->overflow_buckets++;
		while (valid)
		{
			int			i = __builtin_ctzll(valid);
			uint32_t	home = pmh_home_bucket(pmh_slot_code(bucket, i), seg->nbuckets);
			uint32_t	dist = b >= home ? b - home : b + seg->nbuckets - home;

			valid &= valid - 1;
			if (pmh_is_chain_ref(pmh_slot_tid(bucket, i)))
			{
				stats->chains++;
				continue;
			}
			stats->entries++;
			stats->probe_sum += dist + 1;
			stats->probe_count++;
		}
	}
	for (uint32_t j = 0; j < nposting; j++)
	{
		const PmhPosting *blk = pmh_posting(seg, (uint64_t) seg->nbuckets + 1 + j);
		uint64_t	n = __builtin_popcountll(blk->commit & PMH_POSTING_VALID_MASK);

		stats->entries += n;
		stats->chained_entries += n;
	}
}
