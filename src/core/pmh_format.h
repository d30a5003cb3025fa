/*-------------------------------------------------------------------------
 *
 * pmh_format.h
 *	  On-file layout of a pmhash index file.
 *
 * A pmhash file is an array of 256-byte units, addressed by unit number,
 * never by pointer, because every process maps the file at its own address.
 *
 *	 units 0..15   file header (identity, geometry, checksum)
 *	 units 16..    descriptors: one 8 bytes per shard, in slot order
 *	 then          segments, allocated and freed as shards are rebuilt
 *
 * A shard is the set of keys whose hash has a given value in its top
 * shard_bits bits; its descriptor is that of its slot, those bits read
 * backwards (the shard map, below).  Each shard owns at most one segment:
 *
 *	 unit 0        segment header
 *	 units 1..n    n buckets of 28 (hash code, TID) slots, linear probing
 *	 units n+1..   posting blocks holding the TIDs of heavily duplicated keys
 *
 * Changes become visible, and crash-atomic, through single aligned 8-byte
 * stores: a bucket's commit word publishes its slots, a descriptor
 * publishes a whole segment.  Data is always written and persisted before the
 * word that publishes it.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/core/pmh_format.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef PMH_FORMAT_H
#define PMH_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define PMH_UNIT_SIZE			256
#define PMH_HEADER_UNITS		16
#define PMH_FORMAT_VERSION		3
#define PMH_FILE_MAGIC			UINT64_C(0x3148534148504d50)	/* "PMPHASH1" */
#define PMH_SEGMENT_MAGIC		UINT64_C(0x544e454d47455350)	/* "PSEGMENT" */

#define PMH_BUCKET_SLOTS		28
#define PMH_POSTING_SLOTS		37
#define PMH_MAX_SHARD_BITS		16
#define PMH_MAX_SEGMENT_BUCKETS ((UINT32_C(1) << 24) - 1)
#define PMH_MAX_SEGMENT_POSTING ((UINT32_C(1) << 24) - 1)
#define PMH_MAX_CHAIN_BLOCKS	UINT16_MAX

/* bucket commit word: valid bits, overflow bit, sequence number */
#define PMH_VALID_MASK			((UINT64_C(1) << PMH_BUCKET_SLOTS) - 1)
#define PMH_OVERFLOW_BIT		(UINT64_C(1) << PMH_BUCKET_SLOTS)
#define PMH_SEQ_SHIFT			32
#define PMH_SEQ_ONE				(UINT64_C(1) << PMH_SEQ_SHIFT)

/* posting block commit word: valid bits and sequence number */
#define PMH_POSTING_VALID_MASK	((UINT64_C(1) << PMH_POSTING_SLOTS) - 1)
#define PMH_POSTING_SEQ_ONE		(UINT64_C(1) << PMH_POSTING_SLOTS)

/* descriptor: segment unit (40 bits) and bucket count (24 bits) */
#define PMH_DESC_UNIT_BITS		40
#define PMH_DESC_UNIT_MASK		((UINT64_C(1) << PMH_DESC_UNIT_BITS) - 1)

/*
 * A bucket slot keeps 23 bits of its entry's hash, its code: the bits below
 * the shard bits, which every entry of a segment shares.  With 9 or more
 * shard bits that is the whole hash; with fewer, the lowest 9 - shard_bits
 * bits of the hash are dropped, and the segment stores the hash with them
 * clear (its canonical form).  The code's low 16 bits form the slot's tag,
 * which lookups compare 16 slots at a time; its high 7 bits, which mostly
 * repeat what the home bucket says, share a 16-bit field with the TID's
 * offset, which needs 9 bits.
 */
#define PMH_CODE_BITS			23
#define PMH_TAG_BITS			16
#define PMH_OFFSET_BITS			9
#define PMH_OFFSET_MASK			((UINT16_C(1) << PMH_OFFSET_BITS) - 1)
#define PMH_MAX_OFFSET			PMH_OFFSET_MASK

/*
 * A heap TID, laid out exactly as PostgreSQL's ItemPointerData (block number
 * as two 16-bit halves, then the line pointer offset).  Offset 0 never occurs
 * in a heap TID; a bucket slot whose offset is 0 is a chain reference whose
 * block field is the unit, relative to the segment, of a posting chain.
 */
typedef struct PmhTid
{
	uint16_t	block_hi;
	uint16_t	block_lo;
	uint16_t	offset;
} PmhTid;

typedef struct PmhBucket
{
	uint64_t	commit;			/* valid bits, overflow bit, sequence */
	uint64_t	unverified;		/* slots to check against the heap */
	uint64_t	lsn;			/* WAL position of the last logged change */
	uint32_t	tag_checksum;	/* of the valid bits and tags (PMH_FILE_CHECKSUMS) */
	uint32_t	tid_checksum;	/* of the valid slots' TID fields (PMH_FILE_CHECKSUMS) */
	uint16_t	tag[PMH_BUCKET_SLOTS];	/* low 16 bits of each slot's code */
	PmhTid		slot[PMH_BUCKET_SLOTS]; /* TID; code's high 7 bits atop the
										 * offset */
} PmhBucket;

/*
 * A posting block holds up to 37 TIDs of a single hash code.  The blocks of
 * one chain are contiguous; the first records the chain length and a
 * writer-only hint of the first block that may have a free slot.
 */
typedef struct PmhPosting
{
	uint64_t	commit;			/* valid bits (37) and sequence (27) */
	uint64_t	unverified;		/* slots to check against the heap */
	uint64_t	lsn;			/* WAL position of the last logged change */
	uint32_t	hash;
	uint16_t	nblocks;		/* first block only: blocks in the chain */
	uint16_t	cursor;			/* first block only: first block with room */
	PmhTid		tid[PMH_POSTING_SLOTS];
	uint16_t	checksum;		/* of the valid TIDs (PMH_FILE_CHECKSUMS) */
} PmhPosting;

typedef struct PmhSegmentHeader
{
	uint64_t	magic;
	uint64_t	file_generation;	/* build generation of the owning file */
	uint64_t	generation;		/* bumped by every rebuild of this shard */
	uint64_t	max_lsn;		/* highest WAL position applied to the segment */
	uint32_t	shard;
	uint32_t	shard_bits;
	uint32_t	nbuckets;
	uint32_t	nposting;
	uint32_t	checksum;		/* CRC-32C of the fields above */
	uint32_t	pad;
	uint8_t		unused[PMH_UNIT_SIZE - 56];
} PmhSegmentHeader;

typedef struct PmhFileHeader
{
	uint64_t	magic;
	uint32_t	version;
	uint32_t	header_units;
	/* identity of the index this file belongs to */
	uint32_t	spc_oid;
	uint32_t	db_oid;
	uint32_t	rel_node;
	int32_t		backend;		/* owning backend for temporary indexes, else -1 */
	uint64_t	build_generation;	/* random; also stored in the metapage */
	/* geometry */
	uint32_t	shard_bits;
	uint32_t	flags;
	uint64_t	desc_unit;		/* first unit of the descriptors */
	uint64_t	data_unit;		/* first unit available to segments */
	uint32_t	checksum;		/* CRC-32C of the fields above */
	uint32_t	pad;
	/* mutable area, not covered by the checksum */
	uint64_t	state;			/* PMH_STATE_* bits */
	uint64_t	redo_lsn;		/* recovery changes are durable up to here */
	uint64_t	creator_xid;	/* 64-bit id of the transaction that created
								 * the file, until it is known to have
								 * committed; 0 if none */
	uint8_t		redo_boot[16];	/* the operating system's boot in which
								 * REDO_DIRTY was set; zeros if unknown */
	uint64_t	shard_map;		/* level, split pointer, descriptor unit */
	uint8_t		unused[PMH_HEADER_UNITS * PMH_UNIT_SIZE - 120];
} PmhFileHeader;

#define PMH_FILE_UNLOGGED		0x0001
#define PMH_FILE_TEMP			0x0002
#define PMH_FILE_CHECKSUMS		0x0004	/* buckets and posting blocks carry checksums */

/* mutable state bits of the file header */
#define PMH_STATE_NEEDS_REBUILD	UINT64_C(0x0001)	/* rebuild from the heap on open */
#define PMH_STATE_REDO_DIRTY	UINT64_C(0x0002)	/* recovery changed it since redo_lsn */
#define PMH_STATE_BUILDING		UINT64_C(0x0004)	/* a rebuild from the heap has not finished */

_Static_assert(sizeof(PmhTid) == 6, "PmhTid must match ItemPointerData");
_Static_assert(sizeof(PmhBucket) == PMH_UNIT_SIZE, "bucket must be one unit");
_Static_assert(sizeof(PmhPosting) == PMH_UNIT_SIZE, "posting block must be one unit");
_Static_assert(sizeof(PmhSegmentHeader) == PMH_UNIT_SIZE, "segment header must be one unit");
_Static_assert(sizeof(PmhFileHeader) == PMH_HEADER_UNITS * PMH_UNIT_SIZE, "file header size");
_Static_assert(offsetof(PmhFileHeader, checksum) == 64, "header checksum position");
_Static_assert(offsetof(PmhSegmentHeader, checksum) == 48, "segment checksum position");

/* Segment unit recorded in a descriptor (0: the shard is empty). */
static inline uint64_t
pmh_desc_unit(uint64_t desc)
{
	return desc & PMH_DESC_UNIT_MASK;
}

/* Bucket count recorded in a descriptor. */
static inline uint32_t
pmh_desc_nbuckets(uint64_t desc)
{
	return (uint32_t) (desc >> PMH_DESC_UNIT_BITS);
}

/* Build a descriptor. */
static inline uint64_t
pmh_desc_make(uint64_t unit, uint32_t nbuckets)
{
	return (unit & PMH_DESC_UNIT_MASK) | ((uint64_t) nbuckets << PMH_DESC_UNIT_BITS);
}

/* Shard that a hash code belongs to. */
static inline uint32_t
pmh_shard_of(uint32_t hash, uint32_t shard_bits)
{
	return shard_bits == 0 ? 0 : hash >> (32 - shard_bits);
}

/*
 * The shard map of a file whose shards split one at a time (linear hashing
 * over the top bits of the hash): level b and split pointer p, with the
 * unit of the descriptors, in one 8-byte word that one store publishes.
 * Shards are numbered by slot.  Slot j < 2^b holds the keys whose top b
 * bits, read backwards, are j (depth b); a split of slot p leaves in it the
 * keys whose next bit is 0 and moves those whose next bit is 1 to slot
 * p + 2^b, both at depth b + 1, and advances p.  Numbering slots by the
 * reversed prefix makes every split add the next slot, so the descriptors
 * only ever grow at their end; when p reaches 2^b, b grows by one and p
 * starts again at 0.
 */
#define PMH_MAP_LEVEL_BITS		5
#define PMH_MAP_SPLIT_BITS		17
#define PMH_MAP_UNIT_SHIFT		(PMH_MAP_LEVEL_BITS + PMH_MAP_SPLIT_BITS)

/* The map word of level, split pointer and descriptor unit. */
static inline uint64_t
pmh_map_make(uint32_t level, uint32_t split, uint64_t desc_unit)
{
	return (uint64_t) level | ((uint64_t) split << PMH_MAP_LEVEL_BITS) |
		((desc_unit & PMH_DESC_UNIT_MASK) << PMH_MAP_UNIT_SHIFT);
}

/* Level of a map word. */
static inline uint32_t
pmh_map_level(uint64_t map)
{
	return (uint32_t) (map & ((UINT64_C(1) << PMH_MAP_LEVEL_BITS) - 1));
}

/* Split pointer of a map word. */
static inline uint32_t
pmh_map_split(uint64_t map)
{
	return (uint32_t) ((map >> PMH_MAP_LEVEL_BITS) & ((UINT64_C(1) << PMH_MAP_SPLIT_BITS) - 1));
}

/* Descriptor unit of a map word. */
static inline uint64_t
pmh_map_desc_unit(uint64_t map)
{
	return map >> PMH_MAP_UNIT_SHIFT;
}

/* Number of slots a map word has: 2^level + split. */
static inline uint32_t
pmh_map_slots(uint64_t map)
{
	return (UINT32_C(1) << pmh_map_level(map)) + pmh_map_split(map);
}

/* A 32-bit value with its bits in the opposite order. */
static inline uint32_t
pmh_reverse_bits(uint32_t x)
{
	x = ((x >> 1) & UINT32_C(0x55555555)) | ((x & UINT32_C(0x55555555)) << 1);
	x = ((x >> 2) & UINT32_C(0x33333333)) | ((x & UINT32_C(0x33333333)) << 2);
	x = ((x >> 4) & UINT32_C(0x0F0F0F0F)) | ((x & UINT32_C(0x0F0F0F0F)) << 4);
	return __builtin_bswap32(x);
}

/* Depth of the shard of a slot below pmh_map_slots(map). */
static inline uint32_t
pmh_map_depth(uint64_t map, uint32_t slot)
{
	uint32_t	level = pmh_map_level(map);

	return slot < pmh_map_split(map) || slot >= (UINT32_C(1) << level) ? level + 1 : level;
}

/* The map word after the split of its split pointer's slot. */
static inline uint64_t
pmh_map_next(uint64_t map)
{
	uint32_t	level = pmh_map_level(map);
	uint32_t	split = pmh_map_split(map) + 1;

	if (split == (UINT32_C(1) << level))
		return pmh_map_make(level + 1, 0, pmh_map_desc_unit(map));
	return pmh_map_make(level, split, pmh_map_desc_unit(map));
}

/*
 * The low slot of the last split of a map word, in a file built with
 * 2^shard_bits shards; UINT32_MAX if nothing was split.
 */
static inline uint32_t
pmh_map_last_split(uint64_t map, uint32_t shard_bits)
{
	uint32_t	level = pmh_map_level(map);

	if (pmh_map_split(map) > 0)
		return pmh_map_split(map) - 1;
	return level > shard_bits ? (UINT32_C(1) << (level - 1)) - 1 : UINT32_MAX;
}

/*
 * Descriptor slots the array of a map word has room for: those of its
 * level and the next (a split that ends a level moves the descriptors to
 * an array of twice the room).
 */
static inline uint32_t
pmh_map_room(uint64_t map)
{
	uint32_t	level = pmh_map_level(map);

	return UINT32_C(1) << (level < PMH_MAX_SHARD_BITS ? level + 1 : level);
}

/*
 * Descriptor slots a file built with 2^shard_bits shards has room for:
 * twice as many, which splits fill, up to 2^PMH_MAX_SHARD_BITS.
 */
static inline uint32_t
pmh_slot_room(uint32_t shard_bits)
{
	return UINT32_C(1) << (shard_bits < PMH_MAX_SHARD_BITS ? shard_bits + 1 : shard_bits);
}

/* Slot of a hash among 2^shard_bits shards of one depth (split pointer 0). */
static inline uint32_t
pmh_slot_of(uint32_t hash, uint32_t shard_bits)
{
	return pmh_reverse_bits(hash) & ((UINT32_C(1) << shard_bits) - 1);
}

/* Slot of a hash in a map word's shards; its depth goes to *depth. */
static inline uint32_t
pmh_map_slot(uint32_t hash, uint64_t map, uint32_t *depth)
{
	uint32_t	level = pmh_map_level(map);
	uint32_t	reversed = pmh_reverse_bits(hash);
	uint32_t	slot = reversed & ((UINT32_C(1) << level) - 1);

	*depth = level;
	if (slot < pmh_map_split(map))
	{
		slot = reversed & ((UINT32_C(2) << level) - 1);
		*depth = level + 1;
	}
	return slot;
}

/*
 * Depth of a slot's shard when the slot came to be, in a file built with
 * 2^shard_bits shards: its slots split from it since are those above it by
 * multiples of 2^depth.
 */
static inline uint32_t
pmh_slot_first_depth(uint32_t slot, uint32_t shard_bits)
{
	uint32_t	bits = slot == 0 ? 0 : 32 - (uint32_t) __builtin_clz(slot);

	return bits > shard_bits ? bits : shard_bits;
}

/* The top depth bits of the hashes a slot of that depth holds (its shard). */
static inline uint32_t
pmh_slot_shard(uint32_t slot, uint32_t depth)
{
	return depth == 0 ? 0 : pmh_reverse_bits(slot) >> (32 - depth);
}

/* The 23 bits of a hash below its shard bits that a bucket slot keeps. */
static inline uint32_t
pmh_hash_code(uint32_t hash, uint32_t shard_bits)
{
	return (hash << shard_bits) >> (32 - PMH_CODE_BITS);
}

/* The hash a slot's code stands for in a shard (the canonical hash). */
static inline uint32_t
pmh_code_hash(uint32_t code, uint32_t shard, uint32_t shard_bits)
{
	uint32_t	rest = (code << (32 - PMH_CODE_BITS)) >> shard_bits;

	return shard_bits == 0 ? rest : (shard << (32 - shard_bits)) | rest;
}

/* A hash as a segment of a file with these shard bits stores it. */
static inline uint32_t
pmh_canonical_hash(uint32_t hash, uint32_t shard_bits)
{
	return pmh_code_hash(pmh_hash_code(hash, shard_bits), pmh_shard_of(hash, shard_bits),
						 shard_bits);
}

/*
 * Home bucket of a hash code: the code scaled to the bucket count by a
 * multiply and shift, so that any bucket count works and home buckets are
 * ordered like hash codes within a shard.
 */
static inline uint32_t
pmh_home_bucket(uint32_t code, uint32_t nbuckets)
{
	return (uint32_t) (((uint64_t) code * nbuckets) >> PMH_CODE_BITS);
}

/* The code of the entry in slot i of a bucket. */
static inline uint32_t
pmh_slot_code(const PmhBucket *bucket, int i)
{
	return (uint32_t) bucket->tag[i] |
		((uint32_t) (bucket->slot[i].offset >> PMH_OFFSET_BITS) << PMH_TAG_BITS);
}

/* The TID (or chain reference) in slot i of a bucket. */
static inline PmhTid
pmh_slot_tid(const PmhBucket *bucket, int i)
{
	PmhTid		tid = bucket->slot[i];

	tid.offset &= PMH_OFFSET_MASK;
	return tid;
}

/* A slot's TID field for an entry: the TID with the code's high bits added. */
static inline PmhTid
pmh_slot_value(uint32_t code, PmhTid tid)
{
	tid.offset |= (uint16_t) ((code >> PMH_TAG_BITS) << PMH_OFFSET_BITS);
	return tid;
}

/* Write an entry's code and TID into slot i of a bucket. */
static inline void
pmh_slot_set(PmhBucket *bucket, int i, uint32_t code, PmhTid tid)
{
	bucket->tag[i] = (uint16_t) code;
	bucket->slot[i] = pmh_slot_value(code, tid);
}

/* TID block number. */
static inline uint32_t
pmh_tid_block(PmhTid tid)
{
	return ((uint32_t) tid.block_hi << 16) | tid.block_lo;
}

/* Build a TID from block and offset. */
static inline PmhTid
pmh_tid_make(uint32_t block, uint16_t offset)
{
	PmhTid		tid;

	tid.block_hi = (uint16_t) (block >> 16);
	tid.block_lo = (uint16_t) block;
	tid.offset = offset;
	return tid;
}

/* Whether two TIDs are equal. */
static inline int
pmh_tid_equal(PmhTid a, PmhTid b)
{
	return a.block_hi == b.block_hi && a.block_lo == b.block_lo && a.offset == b.offset;
}

/* Order TIDs like heap order. */
static inline int
pmh_tid_cmp(PmhTid a, PmhTid b)
{
	uint32_t	ba = pmh_tid_block(a);
	uint32_t	bb = pmh_tid_block(b);

	if (ba != bb)
		return ba < bb ? -1 : 1;
	if (a.offset != b.offset)
		return a.offset < b.offset ? -1 : 1;
	return 0;
}

#endif							/* PMH_FORMAT_H */
