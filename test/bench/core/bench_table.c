/*-------------------------------------------------------------------------
 *
 * bench_table.c
 *	  A pmhash file mapped with libpmem, driven by several threads, for the
 *	  core-level benchmark.
 *
 * The file is created at its final size and mapped once, so the mapping
 * never moves and no remap can race with lock-free readers.  It is unlinked
 * at once: the mapping keeps the memory, and nothing is left behind if the
 * benchmark is killed.
 *
 * Concurrency control is the caller's part of the core's contract: writers
 * take a spinlock per shard (the core assumes one writer per shard), file
 * space is handed out under one mutex, and readers take no lock at all.
 * Segments that a rebuild unpublishes are not freed at once but kept on a
 * retired list until the end of the phase: the benchmark never runs readers
 * and writers in the same phase, so once every thread of a phase has been
 * joined no reader can be inside a retired segment.  The file is sized for
 * a whole phase of growth without reuse.
 *
 * Persistence goes through libpmem: per change (flush and fence inside the
 * core, as the papers measure), or recorded and made durable with one fence
 * per batch (as the PostgreSQL glue does at commit).
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/bench/core/bench_table.c
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpmem.h>

#include "bench_table.h"

#define BENCH_GENERATION	42
#define DIRTY_GRANULE		64
#define MAX_DIRTY			4096	/* like the glue: sync when this many ranges wait */

/* Table callback: working memory. */
static void *
ops_alloc_memory(void *arg, size_t size)
{
	void	   *p = malloc(size);

	(void) arg;
	if (p == NULL)
	{
		fprintf(stderr, "bench_core: out of memory (%zu bytes)\n", size);
		exit(2);
	}
	return p;
}

/* Table callback: free working memory. */
static void
ops_free_memory(void *arg, void *ptr)
{
	(void) arg;
	free(ptr);
}

/* Table callback: file space for a new segment, from the preallocated file. */
static uint64_t
ops_alloc_space(void *arg, uint64_t units)
{
	BenchFile  *bf = arg;
	uint64_t	unit;

	pthread_mutex_lock(&bf->alloc_lock);
	unit = pmh_freemap_alloc(&bf->freemap, units);
	if (unit == 0)
		bf->alloc_failed = 1;
	else
	{
		if (unit + units > bf->high_water)
			bf->high_water = unit + units;
		bf->rebuilds++;
	}
	pthread_mutex_unlock(&bf->alloc_lock);
	return unit;
}

/* Table callback: an unpublished segment waits for the end of the phase. */
static void
ops_free_space(void *arg, uint64_t unit, uint64_t units)
{
	BenchFile  *bf = arg;

	pthread_mutex_lock(&bf->alloc_lock);
	if (bf->nretired == bf->max_retired)
	{
		bf->max_retired = bf->max_retired ? 2 * bf->max_retired : 4096;
		bf->retired = realloc(bf->retired, bf->max_retired * sizeof(BenchRetired));
		if (bf->retired == NULL)
		{
			fprintf(stderr, "bench_core: out of memory for the retired list\n");
			exit(2);
		}
	}
	bf->retired[bf->nretired].unit = unit;
	bf->retired[bf->nretired].units = units;
	bf->nretired++;
	pthread_mutex_unlock(&bf->alloc_lock);
}

/* Table callback: show a new segment to readers. */
static void
ops_publish(void *arg, uint32_t slot, const PmhPublication *pub)
{
	BenchFile  *bf = arg;

	pmh_mirror_publish(&bf->mirror[slot], pub);
}

/* Table callback: the mapping. */
static char *
ops_base(void *arg)
{
	return ((BenchFile *) arg)->base;
}

/* Table callback: units of the mapping. */
static uint64_t
ops_mapped_units(void *arg)
{
	return ((BenchFile *) arg)->units;
}

/*
 * Create the file at its final size on a file system that libpmem treats as
 * persistent memory, map it, unlink it, and optionally touch every page so
 * that page faults stay out of the measurements.
 */
BenchFile *
bench_file_open(const char *path, uint64_t bytes, int prefault)
{
	BenchFile  *bf = calloc(1, sizeof(BenchFile));
	size_t		len;
	int			is_pmem;

	bf->base = pmem_map_file(path, bytes, PMEM_FILE_CREATE | PMEM_FILE_EXCL, 0600,
							 &len, &is_pmem);
	if (bf->base == NULL)
	{
		fprintf(stderr, "bench_core: could not create and map \"%s\" (%llu bytes): %s\n",
				path, (unsigned long long) bytes, strerror(errno));
		exit(2);
	}
	if (unlink(path) != 0)
		fprintf(stderr, "bench_core: could not remove \"%s\": %s\n", path, strerror(errno));
	bf->units = len / PMH_UNIT_SIZE;
	bf->is_pmem = is_pmem;
	if (prefault)
	{
		long		page = sysconf(_SC_PAGESIZE);

		for (size_t off = 0; off < len; off += (size_t) page)
			((volatile char *) bf->base)[off] = 0;
	}
	pthread_mutex_init(&bf->alloc_lock, NULL);
	bf->ops = (PmhTableOps) {ops_alloc_memory, ops_free_memory, ops_alloc_space,
		ops_free_space, ops_publish, NULL, NULL, NULL, ops_base, ops_mapped_units, NULL, NULL, bf};
	return bf;
}

/*
 * Start an empty table of 2^shard_bits shards over the whole file, as a
 * fresh build would: header, zeroed descriptors, all the rest free.
 */
void
bench_file_reset(BenchFile *bf, uint32_t shard_bits)
{
	uint32_t	nshards = UINT32_C(1) << shard_bits;
	PmhFileHeader *hdr = (PmhFileHeader *) bf->base;

	if (bf->shards)
	{
		for (uint32_t s = 0; s < (UINT32_C(1) << bf->shard_bits); s++)
			pthread_spin_destroy(&bf->shards[s].lock);
	}
	free(bf->mirror);
	free(bf->shards);
	free(bf->extents);
	bf->shard_bits = shard_bits;
	bf->mirror = calloc(nshards, sizeof(PmhShardMirror));
	for (uint32_t s = 0; s < nshards; s++)
		pmh_mirror_publish(&bf->mirror[s], &(PmhPublication) {0, 0, shard_bits});
	bf->shards = aligned_alloc(64, nshards * sizeof(BenchShard));
	memset(bf->shards, 0, nshards * sizeof(BenchShard));
	for (uint32_t s = 0; s < nshards; s++)
		pthread_spin_init(&bf->shards[s].lock, PTHREAD_PROCESS_PRIVATE);

	pmh_header_init(hdr, 1663, 5, 16384, -1, BENCH_GENERATION, shard_bits, 0);
	memset(bf->base + hdr->desc_unit * PMH_UNIT_SIZE, 0,
		   pmh_descriptor_units(shard_bits) * PMH_UNIT_SIZE);
	pmem_persist(bf->base, hdr->data_unit * PMH_UNIT_SIZE);

	bf->max_extents = nshards + 1024;
	bf->extents = calloc(bf->max_extents, sizeof(PmhExtent));
	pmh_freemap_init(&bf->freemap, bf->extents, bf->max_extents);
	pmh_freemap_release(&bf->freemap, hdr->data_unit, bf->units - hdr->data_unit);
	bf->nretired = 0;
	bf->high_water = hdr->data_unit;
	bf->rebuilds = 0;
	bf->alloc_failed = 0;
}

/* End of a phase, every thread joined: no reader can see a retired segment. */
void
bench_file_end_phase(BenchFile *bf)
{
	for (uint64_t i = 0; i < bf->nretired; i++)
		pmh_freemap_release(&bf->freemap, bf->retired[i].unit, bf->retired[i].units);
	bf->nretired = 0;
}

/* Unmap the file (it was unlinked when created) and free the shared state. */
void
bench_file_close(BenchFile *bf)
{
	pmem_unmap(bf->base, bf->units * PMH_UNIT_SIZE);
	free(bf->mirror);
	free(bf->shards);
	free(bf->extents);
	free(bf->retired);
	free(bf);
}

/* Flush callback, per change: write the lines back now. */
static void
flush_now(void *arg, const void *addr, size_t len)
{
	(void) arg;
	pmem_flush(addr, len);
}

/* Drain callback, per change: fence. */
static void
drain_now(void *arg)
{
	((BenchWorker *) arg)->fences++;
	pmem_drain();
}

/*
 * Flush callback, per batch: remember the dirty range in cache lines,
 * merging it with the previous one when they touch (as the glue does).
 */
static void
record_dirty(void *arg, const void *addr, size_t len)
{
	BenchWorker *w = arg;
	uint64_t	off = (uint64_t) ((const char *) addr - w->file->base);
	uint64_t	start = off / DIRTY_GRANULE * DIRTY_GRANULE;
	uint64_t	end = (off + len + DIRTY_GRANULE - 1) / DIRTY_GRANULE * DIRTY_GRANULE;

	if (w->ndirty > 0)
	{
		uint64_t   *last = &w->dirty[2 * (w->ndirty - 1)];

		if (start >= last[0] && start <= last[1])
		{
			if (end > last[1])
				last[1] = end;
			return;
		}
	}
	if (w->ndirty == w->max_dirty)
		bench_worker_sync(w);
	w->dirty[2 * w->ndirty] = start;
	w->dirty[2 * w->ndirty + 1] = end;
	w->ndirty++;
}

/* Persist callback, per batch: structural changes are made durable at once. */
static void
persist_recorded(void *arg, const void *addr, size_t len)
{
	(void) arg;
	pmem_persist(addr, len);
}

/* Make every recorded range durable: flush each, then one fence. */
void
bench_worker_sync(BenchWorker *w)
{
	for (int i = 0; i < w->ndirty; i++)
		pmem_flush(w->file->base + w->dirty[2 * i], w->dirty[2 * i + 1] - w->dirty[2 * i]);
	if (w->ndirty > 0)
	{
		pmem_drain();
		w->fences++;
	}
	w->ndirty = 0;
}

/* Set up a thread's view of the table with the chosen durability. */
void
bench_worker_init(BenchWorker *w, BenchFile *bf, BenchDurability durability)
{
	memset(w, 0, sizeof(*w));
	w->file = bf;
	w->durability = durability;
	if (durability == BENCH_DURABLE_EACH)
		w->persist = (PmhPersist) {flush_now, drain_now, NULL, NULL, w};
	else
	{
		w->persist = (PmhPersist) {record_dirty, NULL, persist_recorded, NULL, w};
		w->max_dirty = MAX_DIRTY;
		w->dirty = malloc(2 * MAX_DIRTY * sizeof(uint64_t));
	}
	w->table.ops = &bf->ops;
	w->table.persist = &w->persist;
	w->table.shard_bits = bf->shard_bits;
	w->table.file_generation = BENCH_GENERATION;
	w->table.checksums = 0;
}

/* Release a thread's view, after making its recorded changes durable. */
void
bench_worker_free(BenchWorker *w)
{
	if (w->durability == BENCH_DURABLE_BATCH)
		bench_worker_sync(w);
	free(w->dirty);
	w->dirty = NULL;
}

/* Insert one entry under its shard's writer lock, growing the shard if needed. */
PmhStatus
bench_insert(BenchWorker *w, uint32_t hash, PmhTid tid, uint64_t lsn)
{
	BenchFile  *bf = w->file;
	uint32_t	slot = pmh_slot_of(hash, bf->shard_bits);
	BenchShard *sh = &bf->shards[slot];
	PmhSegment	seg;
	PmhStatus	st;

	pthread_spin_lock(&sh->lock);
	bench_segment(w, hash, &seg);
	st = pmh_table_insert(&w->table, &seg, &sh->counts, hash, tid, lsn, PMH_INSERT_NEW, 0);
	pthread_spin_unlock(&sh->lock);
	return st;
}

/*
 * Check every published segment with the core's verifier, and its counts
 * against the writers' counters.  NULL if sound; *live gets the entries.
 */
const char *
bench_verify(BenchFile *bf, uint64_t *live)
{
	static char msg[256];
	uint32_t	nshards = UINT32_C(1) << bf->shard_bits;
	const char *err;
	PmhTable	t = {&bf->ops, NULL, bf->shard_bits, BENCH_GENERATION, 0};

	*live = 0;
	err = pmh_header_check((const PmhFileHeader *) bf->base, bf->units);
	if (err)
		return err;
	for (uint32_t s = 0; s < nshards; s++)
	{
		PmhPublication pub;
		uint64_t	desc = pmh_mirror_read(&bf->mirror[s], &pub) ? pub.desc : UINT64_MAX;
		uint64_t   *dir = (uint64_t *) (bf->base + PMH_HEADER_UNITS * PMH_UNIT_SIZE);
		PmhSegment	seg;
		PmhCounts	counts;
		PmhEntry   *scratch;
		uint64_t	cap;
		uint64_t	n;

		if (dir[s] != desc)
		{
			snprintf(msg, sizeof(msg), "shard %u: file descriptor and mirror differ", s);
			return msg;
		}
		if (desc == 0)
			continue;
		pmh_table_segment(&t, s, &pub, &seg);
		pmh_segment_count(&seg, &counts);
		if (counts.entries != bf->shards[s].counts.entries ||
			counts.slots != bf->shards[s].counts.slots)
		{
			snprintf(msg, sizeof(msg), "shard %u: counters %llu/%llu, segment %llu/%llu", s,
					 (unsigned long long) bf->shards[s].counts.entries,
					 (unsigned long long) bf->shards[s].counts.slots,
					 (unsigned long long) counts.entries,
					 (unsigned long long) counts.slots);
			return msg;
		}
		cap = counts.slots + counts.entries + 1;
		scratch = malloc(cap * sizeof(PmhEntry));
		err = pmh_segment_verify(&seg, BENCH_GENERATION, bf->units, scratch, cap, &n,
								 msg, sizeof(msg));
		free(scratch);
		if (err)
			return err;
		*live += n;
	}
	return NULL;
}
