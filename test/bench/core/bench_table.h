/*-------------------------------------------------------------------------
 *
 * bench_table.h
 *	  A pmhash file mapped with libpmem, driven by several threads, for the
 *	  core-level benchmark.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/bench/core/bench_table.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef BENCH_TABLE_H
#define BENCH_TABLE_H

#include <pthread.h>

#include "../../../src/core/pmh_core.h"

/* How an insert is made durable. */
typedef enum BenchDurability
{
	BENCH_DURABLE_EACH,			/* flush and fence inside every change */
	BENCH_DURABLE_BATCH			/* flushes recorded, one fence per batch */
} BenchDurability;

/* Writer state of a shard, one cache line each. */
typedef struct BenchShard
{
	pthread_spinlock_t lock;	/* the core's one writer per shard */
	uint32_t	pad0;
	PmhCounts	counts;			/* content counters, under the lock */
	uint8_t		pad[64 - 8 - sizeof(PmhCounts)];
} __attribute__((aligned(64))) BenchShard;

/* A segment unpublished by a rebuild, waiting for the end of the phase. */
typedef struct BenchRetired
{
	uint64_t	unit;
	uint64_t	units;
} BenchRetired;

/* The mapped file and the state every thread shares. */
typedef struct BenchFile
{
	char	   *base;			/* mapping; never moves */
	uint64_t	units;			/* size of the file */
	int			is_pmem;
	uint32_t	shard_bits;
	PmhShardMirror *mirror;		/* descriptors as readers see them */
	BenchShard *shards;
	pthread_mutex_t alloc_lock;	/* free map, retired list, high-water mark */
	PmhFreeMap	freemap;
	PmhExtent  *extents;
	uint32_t	max_extents;
	BenchRetired *retired;
	uint64_t	nretired;
	uint64_t	max_retired;
	uint64_t	high_water;		/* highest unit allocated so far */
	uint64_t	rebuilds;		/* segments allocated in this phase */
	int			alloc_failed;
	PmhTableOps ops;
} BenchFile;

/* What one thread needs to change or probe the table. */
typedef struct BenchWorker
{
	BenchFile  *file;
	PmhTable	table;			/* shares ops, has its own persistence */
	PmhPersist	persist;
	BenchDurability durability;
	uint64_t   *dirty;			/* recorded ranges: start, end offsets */
	int			ndirty;
	int			max_dirty;
	uint64_t	fences;			/* fences issued by this worker */
} BenchWorker;

extern BenchFile *bench_file_open(const char *path, uint64_t bytes, int prefault);
extern void bench_file_reset(BenchFile *bf, uint32_t shard_bits);
extern void bench_file_end_phase(BenchFile *bf);
extern void bench_file_close(BenchFile *bf);
extern void bench_worker_init(BenchWorker *w, BenchFile *bf, BenchDurability durability);
extern void bench_worker_free(BenchWorker *w);
extern void bench_worker_sync(BenchWorker *w);
extern PmhStatus bench_insert(BenchWorker *w, uint32_t hash, PmhTid tid, uint64_t lsn);
extern const char *bench_verify(BenchFile *bf, uint64_t *live);

/*
 * The slot of hash's shard and what its mirror entry says, as a lock-free
 * reader sees it (desc 0: empty); waits out a publication under way.
 */
static inline uint32_t
bench_mirror_read(const BenchWorker *w, uint32_t hash, PmhPublication *pub)
{
	uint32_t	slot = pmh_slot_of(hash, w->table.shard_bits);

	while (!pmh_mirror_read(&w->file->mirror[slot], pub))
		;
	return slot;
}

/*
 * The published segment of hash's shard, as a lock-free reader sees it;
 * 0 if the shard is empty.
 */
static inline int
bench_segment(const BenchWorker *w, uint32_t hash, PmhSegment *seg)
{
	PmhPublication pub;
	uint32_t	slot = bench_mirror_read(w, hash, &pub);

	pmh_table_segment(&w->table, slot, &pub, seg);
	return pub.desc != 0;
}

/*
 * Start loading what inserting hash will touch: its shard's lock and
 * counters, and all of its home bucket (for writing).  The bucket's
 * prefetches stay in this function, which also calls out of line: GCC
 * finds a function that only prefetches const and drops calls to it.
 */
static inline void
bench_prefetch_insert(const BenchWorker *w, uint32_t hash)
{
	PmhSegment	seg;
	const char *bucket;

	__builtin_prefetch(&w->file->shards[pmh_shard_of(hash, w->table.shard_bits)], 1, 3);
	if (!bench_segment(w, hash, &seg) || seg.nbuckets == 0)
		return;
	bucket = (const char *) pmh_bucket(&seg, pmh_home_bucket(pmh_hash_code(hash, seg.shard_bits),
															 seg.nbuckets));
	for (int line = 0; line < PMH_UNIT_SIZE; line += 64)
		__builtin_prefetch(bucket + line, 1, 3);
}

#endif							/* BENCH_TABLE_H */
