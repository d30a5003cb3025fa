/*-------------------------------------------------------------------------
 *
 * pmh_checksum.c
 *	  Checksums of buckets and posting blocks, for files that keep them.
 *
 * A bucket's checksum covers its valid and overflow bits and the code and
 * TID of every valid slot; a posting block's covers its valid bits, hash,
 * chain length and valid TIDs.  Neither covers what changes in place
 * without a commit (unverified bits, stamps, the append cursor) nor the
 * stale contents of free slots, so that writers only reseal after a commit
 * and a lock-free reader sees a stable checksum between two equal commit
 * words, except in the instant between a commit store and its seal.  Each
 * checksum is seeded with the file's build generation, the shard and the
 * unit's place in the segment, so that a unit from another file, shard or
 * place fails it.  CRC-32C, with the SSE4.2 instruction where the CPU has
 * it, chosen once at first use.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/core/pmh_checksum.c
 *
 *-------------------------------------------------------------------------
 */
#include "pmh_internal.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

typedef uint32_t (*WordCrc) (uint32_t crc, uint64_t word);
typedef uint32_t (*BucketSum) (const PmhSegment *seg, const PmhBucket *bucket, uint32_t b,
							   uint64_t commit);
typedef uint32_t (*PostingSum) (const PmhSegment *seg, const PmhPosting *blk,
								uint64_t rel_unit, uint64_t commit);

/* Extend a CRC-32C by one 64-bit word, a byte at a time. */
static inline uint32_t
word_crc_soft(uint32_t crc, uint64_t word)
{
	return pmh_crc32c_extend(crc, &word, sizeof(word));
}

#if defined(__x86_64__)
/* Extend a CRC-32C by one 64-bit word with the SSE4.2 instruction. */
__attribute__((target("sse4.2")))
static inline uint32_t
word_crc_sse42(uint32_t crc, uint64_t word)
{
	return (uint32_t) _mm_crc32_u64(crc, word);
}
#endif

/* A slot's code and TID as one word. */
static inline uint64_t
slot_word(const PmhTid *tid, uint16_t tag)
{
	return (uint64_t) tag | (uint64_t) tid->block_hi << 16 |
		(uint64_t) tid->block_lo << 32 | (uint64_t) tid->offset << 48;
}

/* The seed of a unit's checksum: file, shard and place. */
static inline __attribute__((always_inline)) uint32_t
unit_seed(const PmhSegment *seg, uint64_t rel_unit, WordCrc word)
{
	return word(word(word(UINT32_C(0xFFFFFFFF), seg->checksum_seed), seg->shard), rel_unit);
}

/* A bucket's checksum, as of the given commit word. */
static inline __attribute__((always_inline)) uint32_t
bucket_sum(const PmhSegment *seg, const PmhBucket *bucket, uint32_t b, uint64_t commit,
		   WordCrc word)
{
	uint32_t	crc = word(unit_seed(seg, (uint64_t) b + 1, word),
						   commit & (PMH_VALID_MASK | PMH_OVERFLOW_BIT));

	for (uint64_t valid = commit & PMH_VALID_MASK; valid; valid &= valid - 1)
	{
		int			i = __builtin_ctzll(valid);

		crc = word(crc, slot_word(&bucket->slot[i], bucket->tag[i]));
	}
	return crc;
}

/* A posting block's checksum, as of the given commit word. */
static inline __attribute__((always_inline)) uint32_t
posting_sum(const PmhSegment *seg, const PmhPosting *blk, uint64_t rel_unit, uint64_t commit,
			WordCrc word)
{
	uint32_t	crc = word(unit_seed(seg, rel_unit, word), commit & PMH_POSTING_VALID_MASK);

	crc = word(crc, (uint64_t) blk->hash | (uint64_t) blk->nblocks << 32);
	for (uint64_t valid = commit & PMH_POSTING_VALID_MASK; valid; valid &= valid - 1)
		crc = word(crc, slot_word(&blk->tid[__builtin_ctzll(valid)], 0));
	return crc;
}

/* Bucket checksum, portable. */
static uint32_t
bucket_sum_soft(const PmhSegment *seg, const PmhBucket *bucket, uint32_t b, uint64_t commit)
{
	return bucket_sum(seg, bucket, b, commit, word_crc_soft);
}

/* Posting block checksum, portable. */
static uint32_t
posting_sum_soft(const PmhSegment *seg, const PmhPosting *blk, uint64_t rel_unit,
				 uint64_t commit)
{
	return posting_sum(seg, blk, rel_unit, commit, word_crc_soft);
}

#if defined(__x86_64__)
/* Bucket checksum with SSE4.2. */
__attribute__((target("sse4.2")))
static uint32_t
bucket_sum_sse42(const PmhSegment *seg, const PmhBucket *bucket, uint32_t b, uint64_t commit)
{
	return bucket_sum(seg, bucket, b, commit, word_crc_sse42);
}

/* Posting block checksum with SSE4.2. */
__attribute__((target("sse4.2")))
static uint32_t
posting_sum_sse42(const PmhSegment *seg, const PmhPosting *blk, uint64_t rel_unit,
				  uint64_t commit)
{
	return posting_sum(seg, blk, rel_unit, commit, word_crc_sse42);
}
#endif

static uint32_t bucket_sum_first(const PmhSegment *seg, const PmhBucket *bucket, uint32_t b,
								 uint64_t commit);
static uint32_t posting_sum_first(const PmhSegment *seg, const PmhPosting *blk,
								  uint64_t rel_unit, uint64_t commit);

static BucketSum bucket_sum_fn = bucket_sum_first;
static PostingSum posting_sum_fn = posting_sum_first;

/* Choose the implementations for this CPU. */
static void
checksum_select(void)
{
	BucketSum	bucket_fn = bucket_sum_soft;
	PostingSum	posting_fn = posting_sum_soft;

#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("sse4.2"))
	{
		bucket_fn = bucket_sum_sse42;
		posting_fn = posting_sum_sse42;
	}
#endif
	__atomic_store_n(&posting_sum_fn, posting_fn, __ATOMIC_RELAXED);
	__atomic_store_n(&bucket_sum_fn, bucket_fn, __ATOMIC_RELAXED);
}

/* First bucket checksum: choose, then compute. */
static uint32_t
bucket_sum_first(const PmhSegment *seg, const PmhBucket *bucket, uint32_t b, uint64_t commit)
{
	checksum_select();
	return bucket_sum_fn(seg, bucket, b, commit);
}

/* First posting block checksum: choose, then compute. */
static uint32_t
posting_sum_first(const PmhSegment *seg, const PmhPosting *blk, uint64_t rel_unit,
				  uint64_t commit)
{
	checksum_select();
	return posting_sum_fn(seg, blk, rel_unit, commit);
}

/* Checksum of bucket b of a segment, as of the given commit word. */
uint32_t
pmh_bucket_checksum(const PmhSegment *seg, const PmhBucket *bucket, uint32_t b, uint64_t commit)
{
	return bucket_sum_fn(seg, bucket, b, commit);
}

/* Checksum of the posting block at rel_unit of a segment, as of the given commit word. */
uint16_t
pmh_posting_checksum(const PmhSegment *seg, const PmhPosting *blk, uint64_t rel_unit,
					 uint64_t commit)
{
	uint32_t	crc = posting_sum_fn(seg, blk, rel_unit, commit);

	return (uint16_t) (crc ^ (crc >> 16));
}
