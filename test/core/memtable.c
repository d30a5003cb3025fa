/*-------------------------------------------------------------------------
 *
 * memtable.c
 *	  An in-memory pmhash file for core tests, with a crash simulator.
 *
 * The shim keeps two images: the live one that code reads and writes, and a
 * durable one.  A flush marks cache lines; a drain copies the marked lines
 * to the durable image.  A simulated crash replaces the live image with the
 * durable one, after letting a random share of the other dirty lines through
 * as a cache eviction might.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/core/memtable.c
 *
 *-------------------------------------------------------------------------
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memtable.h"

#define LINE 64

/* Shim: mark the lines of a range as flushed. */
static void
shim_flush(void *arg, const void *addr, size_t len)
{
	MemTable   *mt = arg;
	uint64_t	start = (uint64_t) ((const char *) addr - mt->live) / LINE;
	uint64_t	end = (uint64_t) ((const char *) addr - mt->live + len + LINE - 1) / LINE;

	if (!mt->shim)
		return;
	for (uint64_t l = start; l < end; l++)
		mt->pending[l] = 1;
}

/* Shim: make flushed lines durable, unless the crash point has passed. */
static void
shim_drain(void *arg)
{
	MemTable   *mt = arg;
	uint64_t	nlines = mt->units * PMH_UNIT_SIZE / LINE;

	if (!mt->shim)
		return;
	mt->drains++;
	for (uint64_t l = 0; l < nlines; l++)
	{
		if (!mt->pending[l])
			continue;
		mt->pending[l] = 0;
		if (mt->drains <= mt->crash_at)
			memcpy(mt->durable + l * LINE, mt->live + l * LINE, LINE);
	}
}

/* Shim: make a range durable now, as a structural change is. */
static void
shim_persist(void *arg, const void *addr, size_t len)
{
	MemTable   *mt = arg;
	uint64_t	start = (uint64_t) ((const char *) addr - mt->live) / LINE;
	uint64_t	end = (uint64_t) ((const char *) addr - mt->live + len + LINE - 1) / LINE;

	for (uint64_t l = start; l < end; l++)
		memcpy(mt->durable + l * LINE, mt->live + l * LINE, LINE);
}

/* Allocate working memory. */
static void *
mem_alloc(void *arg, size_t size)
{
	(void) arg;
	return malloc(size);
}

/* Free working memory. */
static void
mem_free(void *arg, void *ptr)
{
	(void) arg;
	free(ptr);
}

/* Grow the images; the live image may move, as a remap would. */
static void
grow(MemTable *mt, uint64_t units)
{
	uint64_t	old = mt->units;

	mt->live = realloc(mt->live, units * PMH_UNIT_SIZE);
	memset(mt->live + old * PMH_UNIT_SIZE, 0, (units - old) * PMH_UNIT_SIZE);
	if (mt->shim)
	{
		mt->durable = realloc(mt->durable, units * PMH_UNIT_SIZE);
		memset(mt->durable + old * PMH_UNIT_SIZE, 0, (units - old) * PMH_UNIT_SIZE);
		mt->pending = realloc(mt->pending, units * PMH_UNIT_SIZE / LINE);
		memset(mt->pending + old * PMH_UNIT_SIZE / LINE, 0, (units - old) * PMH_UNIT_SIZE / LINE);
	}
	mt->units = units;
	pmh_freemap_release(&mt->freemap, old, units - old);
}

/* File space: best fit, else grow the file by half. */
static uint64_t
space_alloc(void *arg, uint64_t units)
{
	MemTable   *mt = arg;
	uint64_t	unit = pmh_freemap_alloc(&mt->freemap, units);

	if (unit == 0)
	{
		grow(mt, mt->units + (units > mt->units / 2 ? units : mt->units / 2));
		unit = pmh_freemap_alloc(&mt->freemap, units);
	}
	return unit;
}

/* Segments are freed at once: tests have no concurrent readers. */
static void
space_free(void *arg, uint64_t unit, uint64_t units)
{
	MemTable   *mt = arg;

	if (pmh_freemap_release(&mt->freemap, unit, units) != 0)
	{
		fprintf(stderr, "double free of unit %llu\n", (unsigned long long) unit);
		abort();
	}
}

/* Show a segment to readers. */
static void
publish(void *arg, uint32_t slot, const PmhPublication *pub)
{
	MemTable   *mt = arg;

	pmh_mirror_publish(&mt->mirror[slot], pub);
}

/* Show a new shard map to readers, and to the test's hook. */
static void
publish_map(void *arg, uint64_t map)
{
	MemTable   *mt = arg;

	__atomic_store_n(&mt->map, map, __ATOMIC_RELEASE);
	if (mt->map_hook)
		mt->map_hook(mt);
}

/* Current mapping. */
static char *
base(void *arg)
{
	return ((MemTable *) arg)->live;
}

/* Units of the image. */
static uint64_t
mapped_units(void *arg)
{
	return ((MemTable *) arg)->units;
}

/* Whether tables created from now on keep bucket and posting block checksums. */
int			memtable_checksums = 0;

/* Create an empty file of the given size with 2^shard_bits shards. */
MemTable *
memtable_create(uint32_t shard_bits, uint64_t units, int shim)
{
	MemTable   *mt = calloc(1, sizeof(MemTable));
	uint32_t	nshards = UINT32_C(1) << shard_bits;
	PmhFileHeader *hdr;

	mt->shim = shim;
	mt->crash_at = UINT64_MAX;
	mt->busy_patience_ns = 1000 * 1000;
	/* room for the slots that two levels of splits add */
	mt->room = 4 * nshards;
	mt->mirror = calloc(mt->room, sizeof(PmhShardMirror));
	for (uint32_t s = 0; s < mt->room; s++)
		pmh_mirror_publish(&mt->mirror[s], &(PmhPublication) {0, 0, shard_bits});
	mt->counts = calloc(mt->room, sizeof(PmhCounts));
	mt->extents = calloc(mt->room + 64, sizeof(PmhExtent));
	pmh_freemap_init(&mt->freemap, mt->extents, mt->room + 64);
	mt->ops = (PmhTableOps) {mem_alloc, mem_free, space_alloc, space_free, publish, publish_map,
		NULL, NULL, base, mapped_units, NULL, NULL, mt};
	mt->persist = (PmhPersist) {shim_flush, shim_drain, NULL, NULL, mt};

	hdr = calloc(1, sizeof(PmhFileHeader));
	pmh_header_init(hdr, 1663, 5, 16384, -1, 42, shard_bits,
					memtable_checksums ? PMH_FILE_CHECKSUMS : 0);
	if (units < hdr->data_unit + 1)
		units = hdr->data_unit + 1;
	mt->units = hdr->data_unit;
	grow(mt, units);
	/* grow cleared the data units; a new file's header and descriptors are zero too */
	memset(mt->live, 0, hdr->data_unit * PMH_UNIT_SIZE);
	if (shim)
	{
		memset(mt->durable, 0, hdr->data_unit * PMH_UNIT_SIZE);
		memset(mt->pending, 0, hdr->data_unit * PMH_UNIT_SIZE / LINE);
	}
	/* the header and descriptors are not free space */
	pmh_freemap_init(&mt->freemap, mt->extents, mt->room + 64);
	pmh_freemap_release(&mt->freemap, hdr->data_unit, units - hdr->data_unit);
	memcpy(mt->live, hdr, sizeof(PmhFileHeader));
	if (shim)
		memcpy(mt->durable, hdr, sizeof(PmhFileHeader));
	mt->table = (PmhTable) {&mt->ops, &mt->persist, shard_bits, 42, memtable_checksums};
	mt->map = hdr->shard_map;
	free(hdr);
	return mt;
}

/*
 * Persist as the access method does: changes of single entries are flushed
 * with no fence, and become durable only at the next memtable_commit (a
 * transaction's commit); rebuilds and descriptor stores persist at once,
 * and so do ordered ranges, as on DAX.
 */
void
memtable_defer_drains(MemTable *mt)
{
	mt->persist = (PmhPersist) {shim_flush, NULL, shim_persist, shim_persist, mt};
}

/* Make every flushed line durable, as the access method's commit does. */
void
memtable_commit(MemTable *mt)
{
	shim_drain(mt);
}

/* Free everything. */
void
memtable_destroy(MemTable *mt)
{
	free(mt->live);
	free(mt->durable);
	free(mt->pending);
	free(mt->mirror);
	free(mt->counts);
	free(mt->extents);
	free(mt);
}

/* The slot of hash's shard in the current map. */
uint32_t
memtable_slot(MemTable *mt, uint32_t hash)
{
	uint32_t	depth;

	return pmh_map_slot(hash, __atomic_load_n(&mt->map, __ATOMIC_ACQUIRE), &depth);
}

/*
 * The segment the shard of a slot publishes, as readers see it (of no
 * buckets if none);
 * waits out a publication under way.
 */
void
memtable_segment(MemTable *mt, uint32_t slot, PmhSegment *seg)
{
	PmhPublication pub;

	while (!pmh_mirror_read(&mt->mirror[slot], &pub))
		;
	pmh_table_segment(&mt->table, slot, &pub, seg);
}

/* Insert through the table layer, as the access method does; each change gets the next LSN. */
PmhStatus
memtable_insert(MemTable *mt, uint32_t hash, PmhTid tid)
{
	uint32_t	slot = memtable_slot(mt, hash);
	PmhSegment	seg;

	memtable_segment(mt, slot, &seg);
	return pmh_table_insert(&mt->table, &seg, &mt->counts[slot], hash, tid, ++mt->lsn,
							PMH_INSERT_NEW, 0);
}

/* Insert as WAL replay does: only if absent, for a record at lsn. */
PmhStatus
memtable_replay(MemTable *mt, uint32_t hash, PmhTid tid, uint64_t lsn)
{
	uint32_t	slot = memtable_slot(mt, hash);
	PmhSegment	seg;

	memtable_segment(mt, slot, &seg);
	return pmh_table_insert(&mt->table, &seg, &mt->counts[slot], hash, tid, lsn,
							PMH_INSERT_IF_ABSENT, lsn);
}

typedef struct CollectState
{
	PmhTid	   *out;
	int			n;
	int			cap;
	int			unverified;
} CollectState;

/* Lookup sink: append to an array, counting unverified TIDs. */
static void
collect(void *arg, const PmhTid *tids, int count, uint64_t unverified)
{
	CollectState *cs = arg;

	for (int i = 0; i < count; i++)
	{
		if (cs->n < cs->cap)
			cs->out[cs->n] = tids[i];
		cs->n++;
	}
	cs->unverified += __builtin_popcountll(unverified);
}

/* Nanoseconds on the monotonic clock. */
static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000000 + (uint64_t) ts.tv_nsec;
}

/*
 * Look up all TIDs of a hash.  A caller with the shard lock would retry a
 * busy lookup under it; this one has none, so it yields to the writer and
 * tries again, for a while (a damaged unit stays busy for good).
 */
PmhStatus
memtable_lookup(MemTable *mt, uint32_t hash, PmhTid *out, int *n, int cap)
{
	CollectState cs = {out, 0, cap, 0};
	PmhSegment	seg;
	PmhStatus	st;
	uint64_t	give_up = 0;

	for (;;)
	{
		cs.n = cs.unverified = 0;
		memtable_segment(mt, memtable_slot(mt, hash), &seg);
		st = pmh_lookup(&seg, hash, collect, &cs);
		if (st != PMH_BUSY)
			break;
		if (give_up == 0)
			give_up = now_ns() + mt->busy_patience_ns;
		else if (now_ns() > give_up)
			break;
		sched_yield();
	}
	*n = cs.n;
	return st;
}

/*
 * Look up n hashes with one batched lookup: the TIDs of key k go to
 * out[k * cap] on (at most cap of them), their number to counts[k].
 * Returns the first status other than PMH_OK, if any.
 */
PmhStatus
memtable_lookup_batch(MemTable *mt, const uint32_t *hashes, int n, PmhTid *out, int cap,
					  int *counts)
{
	PmhSegment *segs = calloc(n, sizeof(PmhSegment));
	CollectState *cs = malloc(n * sizeof(CollectState));
	void	  **args = calloc(n, sizeof(void *));
	PmhStatus  *status = malloc(n * sizeof(PmhStatus));
	PmhStatus	st = PMH_OK;

	for (int k = 0; k < n; k++)
	{
		memtable_segment(mt, memtable_slot(mt, hashes[k]), &segs[k]);
		cs[k] = (CollectState) {out + (size_t) k * cap, 0, cap, 0};
		args[k] = &cs[k];
	}
	pmh_lookup_batch(segs, hashes, n, collect, args, status);
	for (int k = 0; k < n; k++)
	{
		if (status[k] == PMH_BUSY)
			status[k] = memtable_lookup(mt, hashes[k], cs[k].out, &cs[k].n, cap);
		counts[k] = cs[k].n;
		if (st == PMH_OK)
			st = status[k];
	}
	free(segs);
	free(cs);
	free(args);
	free(status);
	return st;
}

/* Number of unverified TIDs a lookup of hash reports. */
int
memtable_lookup_unverified(MemTable *mt, uint32_t hash)
{
	CollectState cs = {NULL, 0, 0, 0};
	PmhSegment	seg;

	memtable_segment(mt, memtable_slot(mt, hash), &seg);
	pmh_lookup(&seg, hash, collect, &cs);
	return cs.unverified;
}

/* Flag entries changed after after_lsn, as recovery does; returns how many. */
uint64_t
memtable_flag_unverified(MemTable *mt, uint64_t after_lsn)
{
	uint32_t	nshards = pmh_map_slots(mt->map);
	uint64_t	flagged = 0;

	for (uint32_t s = 0; s < nshards; s++)
	{
		PmhSegment	seg;

		memtable_segment(mt, s, &seg);
		if (seg.unit == 0)
			continue;
		flagged += pmh_flag_unverified(&seg, after_lsn, &mt->persist);
		pmh_segment_count(&seg, &mt->counts[s]);
	}
	return flagged;
}

/*
 * Bulk delete over every shard, shrinking shards that became sparse;
 * UINT64_MAX if a shard is damaged.
 */
uint64_t
memtable_bulk_delete(MemTable *mt, const PmhDeleteOps *ops)
{
	uint64_t	removed = 0;
	uint32_t	nshards = pmh_map_slots(mt->map);

	for (uint32_t s = 0; s < nshards; s++)
	{
		PmhSegment	seg;
		uint64_t	gone;

		memtable_segment(mt, s, &seg);
		if (seg.unit == 0)
			continue;
		if (pmh_bulk_delete(&seg, ops, ++mt->lsn, &mt->persist, &mt->counts[s], &gone) !=
			PMH_OK)
			return UINT64_MAX;
		removed += gone;
		if (mt->counts[s].entries == 0 ||
			pmh_needs_shrink(&mt->counts[s], &seg))
			pmh_table_rebuild(&mt->table, &seg, NULL, 0, 0, PMH_REBUILD_FILL, ++mt->lsn,
							  &mt->counts[s]);
	}
	return removed;
}

/* Verify the header and every segment; NULL if sound. */
const char *
memtable_verify(MemTable *mt, uint64_t *live)
{
	static char msg[256];
	const char *err;
	uint32_t	nshards = pmh_map_slots(mt->map);

	*live = 0;
	err = pmh_header_check((PmhFileHeader *) mt->live, mt->units);
	if (err)
		return err;
	for (uint32_t s = 0; s < nshards; s++)
	{
		PmhSegment	seg;
		PmhCounts	counts;
		PmhEntry   *scratch;
		uint64_t	n;

		memtable_segment(mt, s, &seg);
		if (seg.unit == 0)
			continue;
		pmh_segment_count(&seg, &counts);
		if (counts.entries != mt->counts[s].entries || counts.slots != mt->counts[s].slots ||
			counts.unverified != mt->counts[s].unverified)
		{
			snprintf(msg, sizeof(msg), "shard %u: kept counts %llu/%llu/%llu (entries/slots/unverified), "
					 "segment holds %llu/%llu/%llu", s,
					 (unsigned long long) mt->counts[s].entries,
					 (unsigned long long) mt->counts[s].slots,
					 (unsigned long long) mt->counts[s].unverified,
					 (unsigned long long) counts.entries, (unsigned long long) counts.slots,
					 (unsigned long long) counts.unverified);
			return msg;
		}
		scratch = malloc((counts.slots + counts.entries + 1) * sizeof(PmhEntry));
		err = pmh_segment_verify(&seg, 42, mt->units, scratch,
								 counts.slots + counts.entries + 1, &n, msg, sizeof(msg));
		free(scratch);
		if (err)
			return err;
		*live += n;
	}
	return NULL;
}

/*
 * Simulate a crash: dirty lines reach the durable image with the given
 * probability, then the live image becomes the durable one.
 */
void
memtable_crash(MemTable *mt, double evict_probability, uint64_t seed)
{
	uint64_t	nlines = mt->units * PMH_UNIT_SIZE / LINE;

	for (uint64_t l = 0; l < nlines; l++)
	{
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		if ((double) (seed >> 11) / 9007199254740992.0 < evict_probability)
			memcpy(mt->durable + l * LINE, mt->live + l * LINE, LINE);
	}
	memcpy(mt->live, mt->durable, mt->units * PMH_UNIT_SIZE);
	memset(mt->pending, 0, nlines);
	mt->crash_at = UINT64_MAX;
}

/* Attach visitor: copy a slot's publication and counts. */
static void
attach_visit(void *arg, uint32_t slot, const PmhPublication *pub, const PmhCounts *counts,
			 int broken)
{
	(void) broken;
	MemTable   *mt = arg;

	pmh_mirror_publish(&mt->mirror[slot], pub);
	mt->counts[slot] = *counts;
}

/*
 * Rebuild the volatile state from the file, as attaching an index does,
 * and finish a split that a crash cut short.
 */
const char *
memtable_attach(MemTable *mt)
{
	static char msg[256];
	const char *err;
	uint32_t	last;

	mt->map = ((PmhFileHeader *) mt->live)->shard_map;
	err = pmh_table_attach(&mt->table, mt->map, mt->units, &mt->freemap, 0, attach_visit, mt,
						   msg, sizeof(msg));
	last = pmh_map_last_split(mt->map, mt->table.shard_bits);
	if (err == NULL && last != UINT32_MAX)
	{
		PmhSegment	seg;

		memtable_segment(mt, last, &seg);
		if (seg.shard_bits != pmh_map_depth(mt->map, last) &&
			pmh_table_finish_split(&mt->table, &seg, ++mt->lsn, &mt->counts[last]) != PMH_OK)
			err = "the split cut short cannot be finished";
	}
	return err;
}

/* Split the shard at the split pointer, as a growing index does. */
PmhStatus
memtable_split(MemTable *mt)
{
	uint32_t	slot = pmh_map_split(mt->map);
	uint32_t	high = slot + (UINT32_C(1) << pmh_map_level(mt->map));
	PmhSegment	seg;
	PmhCounts	counts[2];
	PmhStatus	st;

	if (high >= mt->room)
		return PMH_FULL;
	memtable_segment(mt, slot, &seg);
	st = pmh_table_split(&mt->table, &seg, mt->map, ++mt->lsn, &counts[0], &counts[1]);
	if (st == PMH_OK)
	{
		mt->counts[slot] = counts[0];
		mt->counts[high] = counts[1];
	}
	return st;
}
