/*-------------------------------------------------------------------------
 *
 * fuzz_file.c
 *	  libFuzzer target: the core's file loader, verifier and lookups on an
 *	  index file image that may be anything.
 *
 * The input is a whole index file.  The target does what a backend does
 * with a file it maps: checks the header, attaches the table (checking
 * every descriptor and segment header, counting, building the free map),
 * verifies every segment, and looks keys up one at a time and in a batch,
 * with and without leniency; then flags unverified entries as recovery
 * does before replay.
 * Whatever the bytes, nothing may read outside the image (AddressSanitizer)
 * or loop without end (libFuzzer's timeout); a damaged file may only be
 * reported.  The core is PostgreSQL-free, so the target links it alone.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/fuzz/fuzz_file.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>

#include "../../src/core/pmh_core.h"

#define MAX_FUZZ_SHARD_BITS	10		/* larger geometries only cost time */
#define FUZZ_KEYS			32

typedef struct FuzzFile
{
	char	   *base;
	uint64_t	units;
	uint64_t	map;			/* the header's shard map */
	PmhShardMirror *mirror;
} FuzzFile;

/* Table callback: working memory. */
static void *
fuzz_alloc(void *arg, size_t size)
{
	(void) arg;
	return malloc(size ? size : 1);
}

/* Table callback: free working memory. */
static void
fuzz_free(void *arg, void *ptr)
{
	(void) arg;
	free(ptr);
}

/* Table callback: the image. */
static char *
fuzz_base(void *arg)
{
	return ((FuzzFile *) arg)->base;
}

/* Table callback: its length in units. */
static uint64_t
fuzz_units(void *arg)
{
	return ((FuzzFile *) arg)->units;
}

/* Attach callback: keep the checked descriptors, as shared memory does. */
static void
fuzz_visit(void *arg, uint32_t slot, const PmhPublication *pub, const PmhCounts *counts,
		   int broken)
{
	(void) counts;
	(void) broken;
	pmh_mirror_publish(&((FuzzFile *) arg)->mirror[slot], pub);
}

/* Lookup sink: touch what was delivered. */
static void
fuzz_sink(void *arg, const PmhTid *tids, int count, uint64_t unverified)
{
	uint64_t   *sum = arg;

	for (int i = 0; i < count; i++)
		*sum += pmh_tid_block(tids[i]) + tids[i].offset + (unverified & 1);
}

/* Verify every attached segment and look keys up in it. */
static void
fuzz_segments(const PmhTable *t, FuzzFile *f, const uint8_t *data, size_t size)
{
	uint32_t	nslots = pmh_map_slots(f->map);
	uint32_t	hashes[FUZZ_KEYS];
	uint64_t	sums[FUZZ_KEYS];
	void	   *args[FUZZ_KEYS];
	PmhSegment	segs[FUZZ_KEYS];
	PmhStatus	status[FUZZ_KEYS];
	uint32_t	slots[FUZZ_KEYS];
	PmhPublication pubs[FUZZ_KEYS];

	for (uint32_t s = 0; s < nslots; s++)
	{
		PmhPublication pub;
		PmhSegment	seg;
		PmhCounts	counts;
		uint64_t	live;
		char		msg[256];
		PmhEntry   *scratch;
		uint64_t	cap;

		if (!pmh_mirror_read(&f->mirror[s], &pub) || pub.desc == 0)
			continue;
		pmh_table_segment(t, s, &pub, &seg);
		pmh_segment_count(&seg, &counts);
		cap = counts.entries + counts.slots + 1;
		scratch = malloc(cap * sizeof(PmhEntry));
		(void) pmh_segment_verify(&seg, t->file_generation, f->units, scratch, cap, &live,
								  msg, sizeof(msg));
		free(scratch);
	}
	/* keys: hashes taken from the input, spread over the shards */
	for (int k = 0; k < FUZZ_KEYS; k++)
	{
		uint32_t	h = (uint32_t) k * UINT32_C(0x9E3779B9);
		uint32_t	depth;

		if (size >= (size_t) (k + 1) * 4)
			memcpy(&h, data + (size - (size_t) (k + 1) * 4), 4);
		hashes[k] = h;
		slots[k] = pmh_map_slot(h, f->map, &depth);
		if (!pmh_mirror_read(&f->mirror[slots[k]], &pubs[k]))
			pubs[k] = (PmhPublication) {0, 0, depth};
		sums[k] = 0;
		args[k] = &sums[k];
	}
	pmh_table_segments(t, slots, pubs, FUZZ_KEYS, segs);
	for (int k = 0; k < FUZZ_KEYS; k++)
		(void) pmh_lookup(&segs[k], hashes[k], fuzz_sink, &sums[k]);
	pmh_lookup_batch(segs, hashes, FUZZ_KEYS, fuzz_sink, args, status);
}

/* libFuzzer entry point: one file image. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FuzzFile	f;
	PmhFileHeader hdr;
	PmhTableOps ops = {fuzz_alloc, fuzz_free, NULL, NULL, NULL, NULL, NULL, NULL, fuzz_base,
	fuzz_units, NULL, NULL};
	PmhTable	t;
	PmhFreeMap	map;
	PmhExtent  *extents;
	uint32_t	nslots;
	char		msg[256];

	f.units = size / PMH_UNIT_SIZE;
	if (f.units < PMH_HEADER_UNITS)
		return 0;
	/* an exact copy, so that AddressSanitizer sees the end of the file */
	f.base = malloc(f.units * PMH_UNIT_SIZE);
	memcpy(f.base, data, f.units * PMH_UNIT_SIZE);
	memcpy(&hdr, f.base, sizeof(hdr));
	if (pmh_header_check(&hdr, f.units) != NULL || hdr.shard_bits > MAX_FUZZ_SHARD_BITS)
	{
		free(f.base);
		return 0;
	}
	f.map = hdr.shard_map;
	nslots = pmh_map_slots(f.map);
	ops.arg = &f;
	pmh_table_init(&t, &hdr, &ops, NULL);
	extents = malloc((nslots + 2) * sizeof(PmhExtent));
	for (int lenient = 0; lenient <= 1; lenient++)
	{
		f.mirror = calloc(nslots, sizeof(PmhShardMirror));
		pmh_freemap_init(&map, extents, nslots + 2);
		if (pmh_table_attach(&t, f.map, f.units, &map, lenient, fuzz_visit, &f, msg,
							 sizeof(msg)) == NULL)
			fuzz_segments(&t, &f, data, size);
		free(f.mirror);
	}
	/* what recovery does to a file before replay, at a redo point from the input */
	(void) pmh_file_flag_unverified(f.base, f.units, hdr.build_generation ^ size, NULL);
	free(extents);
	free(f.base);
	return 0;
}
