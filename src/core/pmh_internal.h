/*-------------------------------------------------------------------------
 *
 * pmh_internal.h
 *	  Helpers shared by the core's source files only.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/core/pmh_internal.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef PMH_INTERNAL_H
#define PMH_INTERNAL_H

#include "pmh_core.h"

/* A cache line: the unit in which stores reach the medium. */
#define PMH_LINE_SIZE			64

/* Load a commit word, ordering later reads after it. */
static inline uint64_t
pmh_load_acquire(const uint64_t *word)
{
	return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}

/* Re-read a commit word after the data it guards (seqlock validation). */
static inline uint64_t
pmh_reload(const uint64_t *word)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return __atomic_load_n(word, __ATOMIC_RELAXED);
}

/* Publish a commit word after the data it guards. */
static inline void
pmh_store_release(uint64_t *word, uint64_t value)
{
	__atomic_store_n(word, value, __ATOMIC_RELEASE);
}

/* Bucket after b, wrapping around the segment. */
static inline uint32_t
pmh_next_bucket(uint32_t b, uint32_t nbuckets)
{
	return b + 1 == nbuckets ? 0 : b + 1;
}

/* Whether a slot's TID is a chain reference rather than a heap TID. */
static inline int
pmh_is_chain_ref(PmhTid tid)
{
	return tid.offset == 0;
}

/* Flush a range without waiting. */
static inline void
pmh_flush(const PmhPersist *p, const void *addr, size_t len)
{
	if (p && p->flush)
		p->flush(p->arg, addr, len);
}

/* Wait for earlier flushes. */
static inline void
pmh_drain(const PmhPersist *p)
{
	if (p && p->drain)
		p->drain(p->arg);
}

/* Make one range durable with callback fn, or else by flush and drain. */
static inline void
pmh_durable_by(const PmhPersist *p, void (*fn) (void *, const void *, size_t),
			   const void *addr, size_t len)
{
	if (fn)
		fn(p->arg, addr, len);
	else
	{
		pmh_flush(p, addr, len);
		pmh_drain(p);
	}
}

/*
 * Make one range durable now (structural changes), leaving the flushed
 * ranges of single-entry changes to the caller's commit.
 */
static inline void
pmh_persist(const PmhPersist *p, const void *addr, size_t len)
{
	pmh_durable_by(p, p ? p->persist : NULL, addr, len);
}

/*
 * Make one range durable before any later store to its unit reaches the
 * medium (see PmhPersist).
 */
static inline void
pmh_order(const PmhPersist *p, const void *addr, size_t len)
{
	pmh_durable_by(p, p ? p->order : NULL, addr, len);
}

/*
 * Flush a TID of a bucket or posting block (unit) ahead of the commit word
 * that makes it valid.  One that straddles two of the unit's cache lines is
 * made durable first, since a crash keeping one of its lines could
 * otherwise join its new bytes with a freed slot's old ones into another
 * entry's TID.
 */
static inline void
pmh_flush_tid(const PmhPersist *p, const void *unit, const PmhTid *tid)
{
	size_t		start = (size_t) ((const char *) tid - (const char *) unit);

	if (start / PMH_LINE_SIZE != (start + sizeof(PmhTid) - 1) / PMH_LINE_SIZE)
		pmh_order(p, tid, sizeof(PmhTid));
	else
		pmh_flush(p, tid, sizeof(PmhTid));
}

/* Whether a slot's TID field is blank (never used, or freed and blanked). */
static inline int
pmh_tid_blank(PmhTid field)
{
	return field.block_hi == 0 && field.block_lo == 0 && field.offset == 0;
}

/*
 * Flush a new entry's slot (its tag, if key is not NULL, and its TID) and
 * order it before the commit word that will make it valid, as far as a
 * crash requires.  A tag in the unit's first cache line is left to the
 * caller, which flushes that line with the commit word stored after it.
 * Nothing needs ordering when the tag lies there and the TID field was
 * blank: a crash that keeps the commit word without the TID leaves a blank
 * TID (a chain reference to no chain, or a posting TID of offset 0), which
 * recovery clears (pmh_flag_unverified).  A TID field that was not blank
 * holds what an earlier crash left of an insert whose commit word it lost,
 * which must not show through: it is made durable first (order).  A tag in
 * another line is drained first where the caller drains (the core tests);
 * the access method lets a crash keep such a slot with its old tag and
 * flags it unverified like any entry of a unit stamped after the recovery
 * point.
 */
static inline void
pmh_flush_slot(const PmhPersist *p, const void *unit, const uint16_t *key,
			   const PmhTid *tid, int was_blank)
{
	int			key_apart = key &&
		(size_t) ((const char *) key - (const char *) unit) + sizeof(uint16_t) > PMH_LINE_SIZE;

	if (key_apart)
		pmh_flush(p, key, sizeof(uint16_t));
	if (was_blank)
		pmh_flush_tid(p, unit, tid);
	else
		pmh_order(p, tid, sizeof(PmhTid));
	if (key_apart)
		pmh_drain(p);
}

/* Number of a bucket within its segment. */
static inline uint32_t
pmh_bucket_number(const PmhSegment *seg, const PmhBucket *bucket)
{
	return (uint32_t) (((const char *) bucket - seg->base) / PMH_UNIT_SIZE - 1);
}

/* Unit of a posting block relative to its segment. */
static inline uint64_t
pmh_posting_unit(const PmhSegment *seg, const PmhPosting *blk)
{
	return (uint64_t) ((const char *) blk - seg->base) / PMH_UNIT_SIZE;
}

/*
 * Whether a bucket's valid bits and tags agree with their checksum as of a
 * commit word (always, in a file without checksums): what a lookup that
 * matches no tag reads.
 */
static inline int
pmh_bucket_tags_sound(const PmhSegment *seg, const PmhBucket *bucket, uint64_t commit)
{
	return seg->checksum_seed == 0 ||
		bucket->tag_checksum == pmh_bucket_tag_checksum(seg, bucket,
														 pmh_bucket_number(seg, bucket), commit);
}

/* Whether a bucket's TID fields agree with their checksum as of a commit word. */
static inline int
pmh_bucket_tids_sound(const PmhSegment *seg, const PmhBucket *bucket, uint64_t commit)
{
	return seg->checksum_seed == 0 ||
		bucket->tid_checksum == pmh_bucket_tid_checksum(seg, bucket,
														 pmh_bucket_number(seg, bucket), commit);
}

/* Whether all of a bucket agrees with its checksums as of a commit word. */
static inline int
pmh_bucket_sound(const PmhSegment *seg, const PmhBucket *bucket, uint64_t commit)
{
	return pmh_bucket_tags_sound(seg, bucket, commit) &&
		pmh_bucket_tids_sound(seg, bucket, commit);
}

/* Whether a posting block agrees with its checksum as of a commit word. */
static inline int
pmh_posting_sound(const PmhSegment *seg, const PmhPosting *blk, uint64_t commit)
{
	return seg->checksum_seed == 0 ||
		blk->checksum == pmh_posting_checksum(seg, blk, pmh_posting_unit(seg, blk), commit);
}

/* Store a bucket's checksums after a change (the caller flushes its first line). */
static inline void
pmh_bucket_seal(const PmhSegment *seg, PmhBucket *bucket)
{
	uint32_t	b = pmh_bucket_number(seg, bucket);

	if (seg->checksum_seed == 0)
		return;
	bucket->tag_checksum = pmh_bucket_tag_checksum(seg, bucket, b, bucket->commit);
	bucket->tid_checksum = pmh_bucket_tid_checksum(seg, bucket, b, bucket->commit);
}

/* Store a posting block's checksum after a change, and flush it. */
static inline void
pmh_posting_seal(const PmhSegment *seg, PmhPosting *blk, const PmhPersist *persist)
{
	if (seg->checksum_seed == 0)
		return;
	blk->checksum = pmh_posting_checksum(seg, blk, pmh_posting_unit(seg, blk), blk->commit);
	pmh_flush(persist, &blk->checksum, sizeof(uint16_t));
}

/* Bytes of a bucket's first line that a commit changes: commit word to checksums. */
#define PMH_BUCKET_COMMIT_BYTES (offsetof(PmhBucket, tid_checksum) + sizeof(uint32_t))

/* Keep the slots of tag_mask whose high code bits match too. */
static inline uint32_t
pmh_filter_code(const PmhBucket *bucket, uint32_t tag_mask, uint32_t code)
{
	uint32_t	mask = 0;

	for (uint32_t m = tag_mask; m; m &= m - 1)
	{
		int			i = __builtin_ctz(m);

		if ((uint32_t) (bucket->slot[i].offset >> PMH_OFFSET_BITS) == code >> PMH_TAG_BITS)
			mask |= UINT32_C(1) << i;
	}
	return mask;
}

/* Slots of a bucket (valid or not) that hold the code. */
static inline uint32_t
pmh_match_code(const PmhBucket *bucket, uint32_t code)
{
	return pmh_filter_code(bucket, pmh_match_tags(bucket->tag, (uint16_t) code), code);
}

/*
 * The chain a reference points to, or NULL if the reference does not fit the
 * segment's posting area or the chain belongs to another hash code.
 */
static inline PmhPosting *
pmh_chain_first(const PmhSegment *seg, PmhTid ref, uint32_t code)
{
	uint64_t	first_unit = (uint64_t) seg->nbuckets + 1;
	uint64_t	end_unit = first_unit + seg->nposting;
	uint64_t	unit = pmh_tid_block(ref);
	PmhPosting *first;

	if (end_unit > seg->limit)
		end_unit = seg->limit;
	if (unit < first_unit || unit >= end_unit)
		return NULL;
	first = pmh_posting(seg, unit);
	if (pmh_hash_code(first->hash, seg->shard_bits) != code || first->nblocks == 0 ||
		unit + first->nblocks > end_unit)
		return NULL;
	return first;
}

/* pmh_modify.c: place an entry into a segment image nobody can see yet */
extern void pmh_image_place_run(const PmhSegment *seg, uint32_t code, PmhTid tid,
								uint16_t flags, uint64_t lsn);

#endif							/* PMH_INTERNAL_H */
