/*-------------------------------------------------------------------------
 *
 * pmh_checksum.c
 *	  Checksums of buckets and posting blocks, for files that keep them.
 *
 * A bucket has two: one of its valid and overflow bits and the tags of its
 * valid slots (the first two cache lines, all that a lookup matching no tag
 * reads), one of the TID fields of its valid slots (which carry the codes'
 * high bits); a posting block's covers its valid bits, hash, chain length
 * and valid TIDs.  Neither covers what changes in place
 * without a commit (unverified bits, stamps, the append cursor) nor the
 * stale contents of free slots (they count as zero), so that writers only
 * reseal after a commit and a lock-free reader sees a stable checksum
 * between two equal commit words, except in the instant between a commit
 * store and its seal.  Each checksum is seeded with the file's build
 * generation, the shard and the unit's place in the segment, so that a
 * unit from another file, shard or place fails it.
 *
 * The function is a multiply-xor hash over every slot, free slots masked to
 * zero, in four independent lanes so that the multiplications overlap, and
 * a final mix; it runs on the probe path, where a CRC's one dependent chain
 * cost a third of a probe.  Any change of a covered bit changes one lane
 * through bijective steps, so it escapes detection only if the 32 bits kept
 * of the mixed result collide.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/core/pmh_checksum.c
 *
 *-------------------------------------------------------------------------
 */
#include <string.h>

#include "pmh_internal.h"

#define LANE_MULTIPLIER UINT64_C(0x9E3779B97F4A7C15)	/* odd: a bijection */

/* the masks of TID bytes below assume little-endian words, as libpmem does */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "little-endian CPU");

/* Fold one word into a lane. */
static inline uint64_t
lane_step(uint64_t lane, uint64_t word)
{
	return (lane ^ word) * LANE_MULTIPLIER;
}

/* Combine four lanes into one well-mixed value. */
static inline uint64_t
lanes_finish(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
	uint64_t	x = a ^ ((b << 16) | (b >> 48)) ^ ((c << 32) | (c >> 32)) ^ ((d << 48) | (d >> 16));

	x ^= x >> 33;
	x *= UINT64_C(0xff51afd7ed558ccd);
	x ^= x >> 33;
	x *= UINT64_C(0xc4ceb9fe1a85ec53);
	x ^= x >> 33;
	return x;
}

/* All ones if the low bit of bits is set, else zero. */
static inline uint64_t
ones_if(uint64_t bits)
{
	return UINT64_C(0) - (bits & 1);
}

/* A TID field as one word; 0 unless the low bit of valid is set. */
static inline uint64_t
tid_word(const PmhTid *tid, uint64_t valid)
{
	uint64_t	word = (uint64_t) tid->block_hi | (uint64_t) tid->block_lo << 16 |
		(uint64_t) tid->offset << 32;

	return word & ones_if(valid);
}

/* Bit i of nibble n spread over the 16-bit lane i: masks of four tags. */
static const uint64_t tag_masks[16] = {
	0, UINT64_C(0xFFFF), UINT64_C(0xFFFF0000), UINT64_C(0xFFFFFFFF),
	UINT64_C(0xFFFF00000000), UINT64_C(0xFFFF0000FFFF), UINT64_C(0xFFFFFFFF0000),
	UINT64_C(0xFFFFFFFFFFFF), UINT64_C(0xFFFF000000000000), UINT64_C(0xFFFF00000000FFFF),
	UINT64_C(0xFFFF0000FFFF0000), UINT64_C(0xFFFF0000FFFFFFFF), UINT64_C(0xFFFFFFFF00000000),
	UINT64_C(0xFFFFFFFF0000FFFF), UINT64_C(0xFFFFFFFFFFFF0000), UINT64_C(0xFFFFFFFFFFFFFFFF)
};

/*
 * Checksum of the valid and overflow bits and the valid slots' tags of
 * bucket b, as of the given commit word: all a lookup reads when no tag
 * matches, in the bucket's first two cache lines.
 */
uint32_t
pmh_bucket_tag_checksum(const PmhSegment *seg, const PmhBucket *bucket, uint32_t b,
						uint64_t commit)
{
	uint64_t	valid = commit & PMH_VALID_MASK;
	uint64_t	l0 = lane_step(seg->checksum_seed, seg->shard);
	uint64_t	l1 = lane_step((uint64_t) b + 1, commit & (PMH_VALID_MASK | PMH_OVERFLOW_BIT));
	uint64_t	l2 = LANE_MULTIPLIER;
	uint64_t	l3 = ~LANE_MULTIPLIER;
	uint64_t	words[PMH_BUCKET_SLOTS / 4];

	_Static_assert(PMH_BUCKET_SLOTS == 28, "seven words of four tags");
	memcpy(words, bucket->tag, sizeof(words));
	for (int j = 0; j < PMH_BUCKET_SLOTS / 4; j++)
		words[j] &= tag_masks[(valid >> (4 * j)) & 15];
	l0 = lane_step(lane_step(l0, words[0]), words[4]);
	l1 = lane_step(lane_step(l1, words[1]), words[5]);
	l2 = lane_step(lane_step(l2, words[2]), words[6]);
	l3 = lane_step(l3, words[3]);
	return (uint32_t) lanes_finish(l0, l1, l2, l3);
}

/*
 * Checksum of the TID fields (heap TIDs or chain references, and the high
 * code bits they carry) of the valid slots of bucket b, as of the given
 * commit word.  The fields of four slots fill three words exactly; the
 * bytes of free slots are masked off.
 */
uint32_t
pmh_bucket_tid_checksum(const PmhSegment *seg, const PmhBucket *bucket, uint32_t b,
						uint64_t commit)
{
	uint64_t	valid = commit & PMH_VALID_MASK;
	uint64_t	l0 = lane_step(~seg->checksum_seed, seg->shard);
	uint64_t	l1 = lane_step((uint64_t) b + 1, valid);
	uint64_t	l2 = LANE_MULTIPLIER;
	uint64_t	l3 = ~LANE_MULTIPLIER;
	uint64_t	words[PMH_BUCKET_SLOTS / 4 * 3];

	_Static_assert(sizeof(PmhTid) * 4 == 3 * sizeof(uint64_t), "four TIDs fill three words");
	_Static_assert(offsetof(PmhBucket, slot) % sizeof(uint64_t) == 0, "TIDs start on a word");
	memcpy(words, bucket->slot, sizeof(words));
	for (int g = 0; g < PMH_BUCKET_SLOTS / 4; g++)
	{
		uint64_t	v = valid >> (4 * g);
		uint64_t   *w = &words[3 * g];

		w[0] &= (ones_if(v) & UINT64_C(0x0000FFFFFFFFFFFF)) |
			(ones_if(v >> 1) & UINT64_C(0xFFFF000000000000));
		w[1] &= (ones_if(v >> 1) & UINT64_C(0x00000000FFFFFFFF)) |
			(ones_if(v >> 2) & UINT64_C(0xFFFFFFFF00000000));
		w[2] &= (ones_if(v >> 2) & UINT64_C(0x000000000000FFFF)) |
			(ones_if(v >> 3) & UINT64_C(0xFFFFFFFFFFFF0000));
		l0 = lane_step(l0, w[0]);
		l1 = lane_step(l1, w[1]);
		l2 = lane_step(l2, w[2]);
	}
	return (uint32_t) lanes_finish(l0, l1, l2, l3);
}

/* Checksum of the posting block at rel_unit of a segment, as of the given commit word. */
uint16_t
pmh_posting_checksum(const PmhSegment *seg, const PmhPosting *blk, uint64_t rel_unit,
					 uint64_t commit)
{
	uint64_t	valid = commit & PMH_POSTING_VALID_MASK;
	uint64_t	l0 = lane_step(seg->checksum_seed, seg->shard);
	uint64_t	l1 = lane_step(rel_unit, valid);
	uint64_t	l2 = lane_step(LANE_MULTIPLIER, (uint64_t) blk->hash | (uint64_t) blk->nblocks << 32);
	uint64_t	l3 = ~LANE_MULTIPLIER;
	uint64_t	x;
	int			i;

	for (i = 0; i + 4 <= PMH_POSTING_SLOTS; i += 4)
	{
		l0 = lane_step(l0, tid_word(&blk->tid[i], valid >> i));
		l1 = lane_step(l1, tid_word(&blk->tid[i + 1], valid >> (i + 1)));
		l2 = lane_step(l2, tid_word(&blk->tid[i + 2], valid >> (i + 2)));
		l3 = lane_step(l3, tid_word(&blk->tid[i + 3], valid >> (i + 3)));
	}
	for (; i < PMH_POSTING_SLOTS; i++)
		l0 = lane_step(l0, tid_word(&blk->tid[i], valid >> i));
	x = lanes_finish(l0, l1, l2, l3);
	return (uint16_t) (x ^ (x >> 16) ^ (x >> 32) ^ (x >> 48));
}
