/*-------------------------------------------------------------------------
 *
 * pmh_core.h
 *	  The pmhash table core: probe, insert, delete, rebuild, allocate and
 *	  verify segments of a mapped pmhash file.  No PostgreSQL dependencies.
 *
 * Callers own all concurrency control.  Lookups are lock-free and may run
 * while one writer changes the same segment; every writing function assumes
 * the caller holds the shard's writer lock.  Persistence goes through
 * PmhPersist, so the same code runs on DAX (flush and fence), on ordinary
 * files (msync) and under the test shim that simulates lost cache lines.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/core/pmh_core.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef PMH_CORE_H
#define PMH_CORE_H

#include "pmh_format.h"

/* Tuning of the table; the rationale is in the README's design section. */
#define PMH_MAX_PROBE			8		/* buckets an insert may extend a run */
#define PMH_CHAIN_THRESHOLD		16		/* more copies of a hash go to a chain */
#define PMH_MAX_BUILD_FILL		0.88	/* bulk builds leave room before growth */
#define PMH_GROW_FILL			0.90	/* fill that triggers growth */
#define PMH_REBUILD_FILL		0.45	/* fill after growth or shrinking */
#define PMH_SHRINK_FILL			0.20	/* fill below which a shard shrinks */
#define PMH_LOOKUP_RETRIES		1000	/* torn-read retries before PMH_BUSY */

typedef enum PmhStatus
{
	PMH_OK = 0,
	PMH_PRESENT,				/* the entry was there already */
	PMH_FULL,					/* no room within reach: rebuild the shard */
	PMH_BUSY,					/* a bucket kept changing, or disagreeing with its
								 * checksum: retry under lock */
	PMH_CORRUPT					/* the segment contradicts its own format or
								 * checksums */
} PmhStatus;

/*
 * How an insert treats an entry that may already be stored.  A new entry
 * is compared only with unverified entries (left by a crash); replayed WAL
 * also with entries of buckets stamped at or after a given position (the
 * earliest stamp the entries of its record can have got).
 */
typedef enum PmhInsertMode
{
	PMH_INSERT_NEW,
	PMH_INSERT_IF_ABSENT
} PmhInsertMode;

/* what an insert did, besides its status */
#define PMH_USED_SLOT			0x0001	/* took a bucket slot */
#define PMH_CONFIRMED			0x0002	/* confirmed an unverified entry */

/*
 * Persistence: flush writes a range back towards the persistence domain,
 * drain orders it before later stores (per-entry changes), persist makes
 * one range durable now (structural changes: rebuilds, descriptor stores),
 * leaving flushed ranges alone, and order makes one range of a unit durable
 * before any later store to the same unit where the medium could keep the
 * unit's cache lines apart (a TID across two lines, or over another TID
 * that a crash left in a free slot, before the commit word that makes it
 * valid, a commit word before the TIDs of the slots it frees are blanked,
 * a posting block's first line before its seal).
 * Any may be NULL, meaning nothing to do; a NULL persist or order falls
 * back to flush and drain.  The access method records flushes as dirty
 * ranges, has no drain (it makes per-entry changes durable at commit, or
 * leaves them to the syncer), persists with flush and fence or msync, and
 * orders with flush and fence on DAX only (an ordinary file writes a unit
 * within one sector); the core tests drain at every change to simulate
 * crashes at each fence (see src/README, Persistence paths).
 */
typedef struct PmhPersist
{
	void		(*flush) (void *arg, const void *addr, size_t len);
	void		(*drain) (void *arg);
	void		(*persist) (void *arg, const void *addr, size_t len);
	void		(*order) (void *arg, const void *addr, size_t len);
	void	   *arg;
} PmhPersist;

/* One (hash, TID) entry, as gathered for rebuilds and builds. */
typedef struct PmhEntry
{
	uint32_t	hash;
	PmhTid		tid;
	uint16_t	flags;			/* PMH_ENTRY_* */
} PmhEntry;

/* the entry may be a phantom of a crash: check its TID before trusting it */
#define PMH_ENTRY_UNVERIFIED	0x0001

/* Live content of a segment: TIDs, and bucket slots they occupy. */
typedef struct PmhCounts
{
	uint64_t	entries;		/* live TIDs, in buckets and chains */
	uint64_t	slots;			/* occupied bucket slots, chain references included */
	uint64_t	unverified;		/* live TIDs still to check against the heap */
	uint64_t	max_lsn;		/* highest bucket LSN seen */
} PmhCounts;

/*
 * What a bulk delete asks about entries: dead says whether an entry (its
 * hash, as its segment keeps it, and TID) is to go, as VACUUM reports its
 * TID dead or a replayed deletion names it; phantom, for unverified
 * entries, whether the entry stands for
 * no row of the heap (PMH_VERDICT_PHANTOM: remove, PMH_VERDICT_REAL: keep and mark
 * verified, PMH_VERDICT_UNDECIDED: keep unverified); removed is told of every entry
 * removed.  Any may be NULL.
 */
typedef enum PmhPhantomVerdict
{
	PMH_VERDICT_REAL = 0,
	PMH_VERDICT_PHANTOM = 1,
	PMH_VERDICT_UNDECIDED = 2
} PmhPhantomVerdict;

typedef struct PmhDeleteOps
{
	int			(*dead) (void *arg, uint32_t hash, PmhTid tid);
	PmhPhantomVerdict (*phantom) (void *arg, uint32_t hash, PmhTid tid);
	void		(*removed) (void *arg, uint32_t hash, PmhTid tid);
	void	   *arg;
} PmhDeleteOps;

/*
 * A published segment as mapped by the calling process.  Its geometry comes
 * from the caller's mirror, which holds only values validated when
 * the segment was written or the file attached; the core never takes it
 * from the segment's header, which the file may have damaged since.
 */
typedef struct PmhSegment
{
	char	   *base;			/* address of the segment header unit */
	uint64_t	unit;			/* its unit in the file; 0: the shard is empty */
	uint32_t	slot;			/* where the shard's descriptor is */
	uint32_t	shard;			/* the top shard_bits bits of its hashes */
	uint32_t	shard_bits;
	uint32_t	nbuckets;
	uint32_t	nposting;
	uint64_t	limit;			/* units mapped from base on (bounds chain reads) */
	uint64_t	checksum_seed;	/* nonzero: buckets and posting blocks carry checksums */
} PmhSegment;

/*
 * What a slot publishes: its segment's descriptor (0 if the shard is
 * empty), posting block count, and the shard's depth (its number of top
 * hash bits), which a split changes.
 */
typedef struct PmhPublication
{
	uint64_t	desc;
	uint32_t	nposting;
	uint32_t	depth;
} PmhPublication;

/*
 * A mirror entry, which lock-free readers use instead of the file's
 * descriptors: the segment's descriptor, and stored before it an extent
 * word (segment unit and posting block count) and a shape word (segment
 * unit and depth).  A reader that finds an extent or shape naming another
 * unit than the descriptor raced with a publication.
 */
typedef struct PmhShardMirror
{
	uint64_t	desc;
	uint64_t	extent;
	uint64_t	shape;
} PmhShardMirror;

/* Geometry of a segment to be written by pmh_segment_write. */
typedef struct PmhLayout
{
	uint32_t	nbuckets;
	uint32_t	nposting;
	uint64_t	nentries;		/* distinct entries to store */
	uint64_t	nslots;			/* bucket slots they take, chain references included */
	uint64_t	nunverified;	/* entries flagged unverified */
} PmhLayout;

/* Structural statistics gathered by pmh_segment_stats. */
typedef struct PmhStats
{
	uint64_t	segments;
	uint64_t	entries;
	uint64_t	chained_entries;
	uint64_t	chains;
	uint64_t	buckets;
	uint64_t	posting_blocks;
	uint64_t	overflow_buckets;
	uint64_t	probe_sum;		/* sum over plain entries of buckets probed */
	uint64_t	probe_count;
	uint32_t	max_probe;		/* longest run a lookup walks, in buckets */
} PmhStats;

/* A free-space map of the file, kept by the caller in shared memory. */
typedef struct PmhExtent
{
	uint64_t	unit;
	uint64_t	count;
} PmhExtent;

typedef struct PmhFreeMap
{
	PmhExtent  *extents;		/* sorted by unit, never adjacent */
	uint32_t	count;
	uint32_t	capacity;
	uint64_t	lost_units;		/* freed space that did not fit in the map */
} PmhFreeMap;

/*
 * What a caller provides to the shard-level operations of pmh_table.c.
 * alloc_space returns the first unit of free file space (growing the file,
 * which may move the mapping) or 0 on failure; free_space takes back a
 * segment once no reader can see it; publish shows a new descriptor to
 * readers, publish_map a new shard map (pmh_table_split); base and mapped_units describe the current mapping; log_rebuild,
 * if set, writes the full content of a rebuilt shard to the WAL, after the
 * shard is published, and log_split that of a split shard, after both
 * halves are.
 */
typedef struct PmhTableOps
{
	void	   *(*alloc_memory) (void *arg, size_t size);
	void		(*free_memory) (void *arg, void *ptr);
	uint64_t	(*alloc_space) (void *arg, uint64_t units);
	void		(*free_space) (void *arg, uint64_t unit, uint64_t units);
	void		(*publish) (void *arg, uint32_t slot, const PmhPublication *pub);
	void		(*publish_map) (void *arg, uint64_t map);
	/* writers of the descriptor array: shared to store one, exclusive to move it */
	void		(*lock_descriptors) (void *arg, int exclusive);
	void		(*unlock_descriptors) (void *arg);
	char	   *(*base) (void *arg);
	uint64_t	(*mapped_units) (void *arg);
	void		(*log_rebuild) (void *arg, uint32_t shard, const PmhEntry *entries,
								uint64_t count, double fill);
	void		(*log_split) (void *arg, uint32_t slot, uint64_t map, const PmhEntry *entries,
							  uint64_t count);
	void	   *arg;
} PmhTableOps;

typedef struct PmhTable
{
	const PmhTableOps *ops;
	const PmhPersist *persist;
	uint32_t	shard_bits;
	uint64_t	file_generation;
	int			checksums;		/* the file keeps checksums (PMH_FILE_CHECKSUMS) */
} PmhTable;

/* Show readers of a mirror entry a new publication. */
static inline void
pmh_mirror_publish(PmhShardMirror *m, const PmhPublication *p)
{
	uint64_t	unit = pmh_desc_unit(p->desc);
	uint64_t	extent = unit | ((uint64_t) p->nposting << PMH_DESC_UNIT_BITS);
	uint64_t	shape = unit | ((uint64_t) p->depth << PMH_DESC_UNIT_BITS);

	__atomic_store_n(&m->extent, p->desc ? extent : 0, __ATOMIC_RELEASE);
	__atomic_store_n(&m->shape, shape, __ATOMIC_RELEASE);
	__atomic_store_n(&m->desc, p->desc, __ATOMIC_RELEASE);
}

/*
 * Read a mirror entry: 1 and its publication, or 0 if a publication was
 * under way (never under the shard's writer lock).
 */
static inline int
pmh_mirror_read(const PmhShardMirror *m, PmhPublication *p)
{
	uint64_t	d = __atomic_load_n(&m->desc, __ATOMIC_ACQUIRE);
	uint64_t	extent = __atomic_load_n(&m->extent, __ATOMIC_ACQUIRE);
	uint64_t	shape = __atomic_load_n(&m->shape, __ATOMIC_ACQUIRE);

	p->desc = d;
	p->nposting = d == 0 ? 0 : (uint32_t) (extent >> PMH_DESC_UNIT_BITS);
	p->depth = (uint32_t) (shape >> PMH_DESC_UNIT_BITS);
	return (extent & PMH_DESC_UNIT_MASK) == pmh_desc_unit(d) &&
		(shape & PMH_DESC_UNIT_MASK) == pmh_desc_unit(d);
}

/* Address of a bucket of a segment. */
static inline PmhBucket *
pmh_bucket(const PmhSegment *seg, uint32_t bucket)
{
	return (PmhBucket *) (seg->base + (uint64_t) (bucket + 1) * PMH_UNIT_SIZE);
}

/* Address of a posting block, by unit relative to the segment start. */
static inline PmhPosting *
pmh_posting(const PmhSegment *seg, uint64_t rel_unit)
{
	return (PmhPosting *) (seg->base + rel_unit * PMH_UNIT_SIZE);
}

/* Address of a segment's header unit. */
static inline PmhSegmentHeader *
pmh_segment_header(const PmhSegment *seg)
{
	return (PmhSegmentHeader *) seg->base;
}

/* Lookup output: bit i of unverified marks tids[i] as possibly a phantom. */
typedef void (*PmhTidSink) (void *arg, const PmhTid *tids, int count, uint64_t unverified);

/* pmh_codec.c */
extern size_t pmh_encoded_max(uint64_t count);
extern size_t pmh_encode_entries(const PmhEntry *entries, uint64_t count, int with_hash,
								 uint8_t *out);
extern int	pmh_decode_entries(const uint8_t *data, size_t len, uint64_t count, int with_hash,
							   PmhEntry *out);

/* pmh_checksum.c */
extern uint32_t pmh_bucket_tag_checksum(const PmhSegment *seg, const PmhBucket *bucket,
										uint32_t b, uint64_t commit);
extern uint32_t pmh_bucket_tid_checksum(const PmhSegment *seg, const PmhBucket *bucket,
										uint32_t b, uint64_t commit);
extern uint16_t pmh_posting_checksum(const PmhSegment *seg, const PmhPosting *blk,
									 uint64_t rel_unit, uint64_t commit);

/* pmh_crc32c.c */
extern uint32_t pmh_crc32c(const void *data, size_t len);

/* pmh_match.c */
extern uint32_t pmh_match_tags(const uint16_t *tags, uint16_t tag);
extern const char *pmh_match_impl(void);
extern int	pmh_match_use(const char *name);

/* pmh_file.c */
extern uint64_t pmh_descriptor_units(uint32_t shard_bits);
extern uint64_t pmh_map_descriptor_units(uint64_t map);
extern int	pmh_map_fits(uint64_t map, uint32_t shard_bits, uint64_t file_units);
extern void pmh_header_init(PmhFileHeader *hdr, uint32_t spc_oid, uint32_t db_oid,
							uint32_t rel_node, int32_t backend, uint64_t build_generation,
							uint32_t shard_bits, uint32_t flags);
extern uint32_t pmh_header_checksum(const PmhFileHeader *hdr);
extern const char *pmh_header_check(const PmhFileHeader *hdr, uint64_t file_units);
extern const char pmh_older_format[];
extern uint32_t pmh_segment_checksum(const PmhSegmentHeader *hdr);

/* pmh_lookup.c */
extern PmhStatus pmh_lookup(const PmhSegment *seg, uint32_t hash,
							PmhTidSink sink, void *arg);
extern void pmh_lookup_batch(const PmhSegment *segs, const uint32_t *hashes, int n,
							 PmhTidSink sink, void *const *args, PmhStatus *status);

/* pmh_modify.c */
extern PmhStatus pmh_insert(const PmhSegment *seg, uint32_t hash, PmhTid tid,
							uint64_t lsn, const PmhPersist *persist, PmhInsertMode mode,
							uint64_t since, unsigned *effects);
extern PmhStatus pmh_bulk_delete(const PmhSegment *seg, const PmhDeleteOps *ops,
								 uint64_t lsn, const PmhPersist *persist,
								 PmhCounts *remaining, uint64_t *removed);
extern uint64_t pmh_flag_unverified(const PmhSegment *seg, uint64_t after_lsn,
									const PmhPersist *persist);

/* pmh_rebuild.c */
extern void pmh_segment_count(const PmhSegment *seg, PmhCounts *counts);
extern uint64_t pmh_segment_capacity(const PmhSegment *seg);
#define PMH_COLLECT_DAMAGED		UINT64_MAX	/* pmh_segment_collect: checksum mismatch */
extern uint64_t pmh_segment_collect(const PmhSegment *seg, PmhEntry *out, uint64_t capacity,
									uint64_t *max_lsn);
extern int	pmh_entry_cmp(const void *a, const void *b);
extern uint64_t pmh_sort_entries(PmhEntry *entries, uint64_t count, PmhEntry *scratch);
extern PmhLayout pmh_plan_layout(const PmhEntry *sorted, uint64_t count, double fill);
extern uint64_t pmh_layout_units(const PmhLayout *layout);
extern void pmh_segment_write(char *dst, const PmhLayout *layout, const PmhEntry *sorted,
							  uint64_t count, uint32_t shard, uint32_t shard_bits,
							  uint64_t file_generation, uint64_t checksum_seed,
							  uint64_t generation, uint64_t lsn);
extern int	pmh_needs_growth(uint64_t slots, uint32_t nbuckets);
extern uint64_t pmh_split_point(const PmhEntry *sorted, uint64_t count, uint32_t shard_bits);
extern int	pmh_needs_shrink(const PmhCounts *counts, const PmhSegment *seg);

/* pmh_alloc.c */
extern void pmh_freemap_init(PmhFreeMap *map, PmhExtent *extents, uint32_t capacity);
extern uint64_t pmh_freemap_alloc(PmhFreeMap *map, uint64_t units);
extern int	pmh_freemap_release(PmhFreeMap *map, uint64_t unit, uint64_t units);
extern uint64_t pmh_freemap_total(const PmhFreeMap *map);

/* pmh_table.c */
extern void pmh_table_init(PmhTable *t, const PmhFileHeader *hdr, const PmhTableOps *ops,
						   const PmhPersist *persist);
extern void pmh_table_segment(const PmhTable *t, uint32_t slot, const PmhPublication *pub,
							  PmhSegment *seg);
extern void pmh_table_segments(const PmhTable *t, const uint32_t *slots,
							   const PmhPublication *pubs, int n, PmhSegment *segs);
extern PmhStatus pmh_table_rebuild(const PmhTable *t, const PmhSegment *seg,
								   const PmhEntry *extra, uint64_t nextra, int replace,
								   double fill, uint64_t lsn, PmhCounts *counts);
extern PmhStatus pmh_table_split(const PmhTable *t, const PmhSegment *seg, uint64_t map,
								 uint64_t lsn, PmhCounts *low, PmhCounts *high);
extern PmhStatus pmh_table_finish_split(const PmhTable *t, const PmhSegment *seg, uint64_t lsn,
										PmhCounts *counts);
extern PmhStatus pmh_table_insert(const PmhTable *t, const PmhSegment *seg,
								  PmhCounts *counts, uint32_t hash, PmhTid tid,
								  uint64_t lsn, PmhInsertMode mode, uint64_t since);
extern uint64_t *pmh_table_descriptors(const PmhTable *t);
extern const char *pmh_table_attach(const PmhTable *t, uint64_t shard_map, uint64_t file_units,
									PmhFreeMap *map, int lenient,
									void (*visit) (void *arg, uint32_t slot,
												   const PmhPublication *pub,
												   const PmhCounts *counts, int broken),
									void *arg, char *msg, size_t msglen);
extern uint64_t pmh_file_flag_unverified(char *base, uint64_t file_units, uint64_t after_lsn,
										 const PmhPersist *persist);

/* pmh_verify.c */
extern const char *pmh_segment_verify(const PmhSegment *seg, uint64_t file_generation,
									  uint64_t file_units, PmhEntry *scratch,
									  uint64_t scratch_capacity, uint64_t *live,
									  char *msg, size_t msglen);
extern void pmh_segment_stats(const PmhSegment *seg, PmhStats *stats);

#endif							/* PMH_CORE_H */
