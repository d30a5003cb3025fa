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
fuzz_visit(void *arg, uint32_t shard, uint64_t desc, uint32_t nposting,
		   const PmhCounts *counts, int broken)
{
	(void) counts;
	(void) broken;
	pmh_mirror_publish(&((FuzzFile *) arg)->mirror[shard], desc, nposting);
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
	uint32_t	nshards = UINT32_C(1) << t->shard_bits;
	uint32_t	hashes[FUZZ_KEYS];
	uint64_t	sums[FUZZ_KEYS];
	void	   *args[FUZZ_KEYS];
	PmhSegment	segs[FUZZ_KEYS];
	PmhStatus	status[FUZZ_KEYS];
	uint32_t	shards[FUZZ_KEYS];
	uint64_t	descs[FUZZ_KEYS];
	uint32_t	npostings[FUZZ_KEYS];

	for (uint32_t s = 0; s < nshards; s++)
	{
		uint64_t	desc;
		uint32_t	nposting;
		PmhSegment	seg;
		PmhCounts	counts;
		uint64_t	live;
		char		msg[256];
		PmhEntry   *scratch;
		uint64_t	cap;

		pmh_mirror_read(&f->mirror[s], &desc, &nposting);
		if (desc == 0)
			continue;
		pmh_table_segment(t, s, desc, nposting, &seg);
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

		if (size >= (size_t) (k + 1) * 4)
			memcpy(&h, data + (size - (size_t) (k + 1) * 4), 4);
		hashes[k] = h;
		shards[k] = pmh_shard_of(h, t->shard_bits);
		pmh_mirror_read(&f->mirror[shards[k]], &descs[k], &npostings[k]);
		sums[k] = 0;
		args[k] = &sums[k];
	}
	pmh_table_segments(t, shards, descs, npostings, FUZZ_KEYS, segs);
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
	PmhTableOps ops = {fuzz_alloc, fuzz_free, NULL, NULL, NULL, fuzz_base, fuzz_units, NULL, NULL};
	PmhTable	t;
	PmhFreeMap	map;
	PmhExtent  *extents;
	uint32_t	nshards;
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
	nshards = UINT32_C(1) << hdr.shard_bits;
	ops.arg = &f;
	pmh_table_init(&t, &hdr, &ops, NULL);
	extents = malloc((nshards + 1) * sizeof(PmhExtent));
	for (int lenient = 0; lenient <= 1; lenient++)
	{
		f.mirror = calloc(nshards, sizeof(PmhShardMirror));
		pmh_freemap_init(&map, extents, nshards + 1);
		if (pmh_table_attach(&t, f.units, &map, lenient, fuzz_visit, &f, msg, sizeof(msg)) == NULL)
			fuzz_segments(&t, &f, data, size);
		free(f.mirror);
	}
	/* what recovery does to a file before replay, at a redo point from the input */
	(void) pmh_file_flag_unverified(f.base, f.units, hdr.build_generation ^ size, NULL);
	free(extents);
	free(f.base);
	return 0;
}
