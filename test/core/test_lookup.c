/*-------------------------------------------------------------------------
 *
 * test_lookup.c
 *	  Core tests of lookups (src/core/pmh_lookup.c): unique keys and growth,
 *	  hashes sharing a code or a home bucket, and a lock-free reader racing
 *	  a writer.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/core/test_lookup.c
 *
 *-------------------------------------------------------------------------
 */
#include <pthread.h>
#include <stdlib.h>

#include "test_util.h"
#include "../../src/core/pmh_internal.h"

/* Unique keys: every one is found, absent keys are not, growth works. */
void
test_unique_keys(void)
{
	MemTable   *mt = memtable_create(3, 64, 0);
	Model		m = {0};

	for (uint64_t k = 0; k < 200000 && !test_failed; k++)
		add(mt, &m, mix(k));
	check_and_free(mt, &m);
}

/*
 * Slots keep every bit of a hash when the file has 9 or more shard bits;
 * with fewer, hashes that differ only in the dropped low bits share a code,
 * and the segment gives back their canonical hash.  Keys differ either in
 * their lowest bits (the tag) or in the bits of the code's high part.
 */
void
test_codes(void)
{
	const uint32_t base = 0x5a5a5a00;

	for (int part = 0; part < 2; part++)
	{
		for (uint32_t shard_bits = 0; shard_bits <= 12 && !test_failed; shard_bits += 3)
		{
			MemTable   *mt = memtable_create(shard_bits, 64, 0);
			uint32_t	dropped = shard_bits >= 9 ? 0 : 9 - shard_bits;
			uint32_t	shift = part == 0 ? 0 : 32 - PMH_CODE_BITS + PMH_TAG_BITS - shard_bits;
			uint32_t	hashes[64];
			PmhEntry	entries[64];
			PmhSegment	seg;
			uint64_t	n;
			uint64_t	max_lsn;

			for (uint32_t k = 0; k < 64; k++)
			{
				hashes[k] = base ^ (k << shift);
				CHECK(memtable_insert(mt, hashes[k], tid_of(k)) == PMH_OK, "insert %u", k);
			}
			for (uint32_t k = 0; k < 64 && !test_failed; k++)
			{
				PmhTid		got[64];
				PmhTid		want[64];
				int			ngot;
				int			nwant = 0;

				for (uint32_t j = 0; j < 64; j++)
					if (hashes[j] >> dropped == hashes[k] >> dropped)
						want[nwant++] = tid_of(j);
				CHECK(memtable_lookup(mt, hashes[k], got, &ngot, 64) == PMH_OK, "lookup status");
				check_found("lookup", hashes[k], got, ngot, want, nwant);
			}
			memtable_segment(mt, pmh_slot_of(base, shard_bits), &seg);
			n = pmh_segment_collect(&seg, entries, 64, &max_lsn);
			CHECK(n == 64, "%d shard bits: collected %llu entries", (int) shard_bits,
				  (unsigned long long) n);
			for (uint64_t i = 0; i < n && !test_failed; i++)
			{
				uint32_t	hash = hashes[index_of(entries[i].tid)];

				CHECK(entries[i].hash == (hash >> dropped << dropped) &&
					  entries[i].hash == pmh_canonical_hash(hash, shard_bits),
					  "%d shard bits: hash %08x came back as %08x", (int) shard_bits, hash,
					  entries[i].hash);
			}
			memtable_destroy(mt);
		}
	}
}

/* Hashes that all land in one home bucket still work. */
void
test_clustered_hashes(void)
{
	MemTable   *mt = memtable_create(0, 64, 0);
	Model		m = {0};

	for (uint64_t k = 0; k < 5000 && !test_failed; k++)
		add(mt, &m, 0x12345600u + (uint32_t) (k % 97));
	for (uint64_t k = 0; k < 5000 && !test_failed; k++)
		add(mt, &m, mix(k));
	check_and_free(mt, &m);
}

/*
 * Overflow bits only make lookups walk further: with every bucket's bit set
 * (a run going round the whole segment, which deletes can leave behind a
 * full shard until its next rebuild), single and batched lookups still
 * find each entry once, and inserts still work.
 */
void
test_overflow_ring(void)
{
	MemTable   *mt = memtable_create(2, 64, 0);
	Model		m = {0};
	uint32_t	nshards = UINT32_C(1) << mt->table.shard_bits;

	for (uint64_t k = 0; k < 3000; k++)
		add(mt, &m, k % 7 == 0 ? mix(k % 5) : mix(k));
	for (uint32_t s = 0; s < nshards; s++)
	{
		PmhSegment	seg;

		memtable_segment(mt, s, &seg);
		for (uint32_t b = 0; b < seg.nbuckets; b++)
		{
			PmhBucket  *bucket = pmh_bucket(&seg, b);

			bucket->commit = (bucket->commit | PMH_OVERFLOW_BIT) + PMH_SEQ_ONE;
			pmh_bucket_seal(&seg, bucket);
		}
	}
	check_table(mt, &m);
	for (uint64_t k = 3000; k < 3500 && !test_failed; k++)
		add(mt, &m, mix(k));
	check_and_free(mt, &m);
}

/* What the writer and the reader of the race share. */
typedef struct RaceState
{
	MemTable   *mt;
	volatile int stop;
	uint64_t	bad;
	uint64_t	lookups;
} RaceState;

#define RACE_STABLE 2000		/* entries that are never deleted */
#define RACE_KEYS	64			/* hashes of the churning entries */

/* Hash of a race entry: stable entries spread, churning ones crowd together. */
static uint32_t
race_hash(uint64_t idx)
{
	if (idx < RACE_STABLE)
		return mix(idx);
	return 0x40000000u + ((uint32_t) ((idx - RACE_STABLE) % RACE_KEYS) << (32 - PMH_CODE_BITS));
}

/* A race lookup of key k found got: count it, and whether it was wrong. */
static void
race_check(RaceState *rs, uint64_t k, const PmhTid *got, int ngot, int cap)
{
	uint32_t	h = race_hash(k);
	int			found = 0;

	for (int g = 0; g < ngot && g < cap; g++)
	{
		uint64_t	idx = index_of(got[g]);

		if (pmh_canonical_hash(race_hash(idx), rs->mt->table.shard_bits) !=
			pmh_canonical_hash(h, rs->mt->table.shard_bits))
			rs->bad++;
		found |= idx == k;
	}
	if (k < RACE_STABLE && !found)
		rs->bad++;
	rs->lookups++;
}

#define RACE_BATCH	4			/* keys of a reader's batched lookup */
#define RACE_CAP	1024		/* TIDs a reader keeps per key */

/*
 * Reader thread: stable entries are always found, no TID is torn; lookups
 * go one key at a time and in batches, by turns.
 */
static void *
race_reader(void *arg)
{
	RaceState  *rs = arg;
	PmhTid	   *got = malloc(RACE_BATCH * RACE_CAP * sizeof(PmhTid));

	for (int turn = 0; !rs->stop; turn++)
	{
		uint64_t	keys[RACE_BATCH];
		uint32_t	hashes[RACE_BATCH];
		int			counts[RACE_BATCH];

		/* half the lookups hit the churning hashes */
		for (int i = 0; i < RACE_BATCH; i++)
		{
			keys[i] = rnd() % 2 ? rnd() % RACE_STABLE : RACE_STABLE + rnd() % RACE_KEYS;
			hashes[i] = race_hash(keys[i]);
		}
		if (turn % 2)
			memtable_lookup_batch(rs->mt, hashes, RACE_BATCH, got, RACE_CAP, counts);
		else
			for (int i = 0; i < RACE_BATCH; i++)
				memtable_lookup(rs->mt, hashes[i], got + i * RACE_CAP, &counts[i], RACE_CAP);
		for (int i = 0; i < RACE_BATCH; i++)
			race_check(rs, keys[i], got + i * RACE_CAP, counts[i], RACE_CAP);
	}
	free(got);
	return NULL;
}

/* Segments are never reused during the race, so readers stay safe. */
static void
leak_space(void *arg, uint64_t unit, uint64_t units)
{
	(void) arg;
	(void) unit;
	(void) units;
}

/*
 * A lock-free reader races a writer that keeps deleting and reusing slots in
 * the buckets the reader probes, and sometimes rebuilds the shard.
 */
void
test_reader_race(void)
{
	MemTable   *mt = memtable_create(0, 1 << 20, 0);
	RaceState	rs = {mt, 0, 0, 0};
	pthread_t	reader;
	uint64_t	next = RACE_STABLE;

	/* the writer may lose its CPU between a commit word and its seal */
	mt->busy_patience_ns = UINT64_C(10) * 1000 * 1000 * 1000;

	mt->ops.free_space = leak_space;
	for (uint64_t k = 0; k < RACE_STABLE; k++)
		memtable_insert(mt, race_hash(k), tid_of(k));
	pthread_create(&reader, NULL, race_reader, &rs);
	for (int round = 0; round < 20000; round++)
	{
		uint64_t	first = next;	/* the churn: entries from here on are dead */
		PmhDeleteOps ops = {entry_from, NULL, NULL, &first};
		PmhSegment	seg;
		uint64_t	removed;

		for (int j = 0; j < 40; j++, next++)
			memtable_insert(mt, race_hash(next), tid_of(next));
		memtable_segment(mt, 0, &seg);
		CHECK(pmh_bulk_delete(&seg, &ops, ++mt->lsn, &mt->persist, &mt->counts[0],
							  &removed) == PMH_OK, "race: bulk delete status");
		if (round % 2000 == 1999)
			pmh_table_rebuild(&mt->table, &seg, NULL, 0, 0, PMH_REBUILD_FILL, ++mt->lsn,
							  &mt->counts[0]);
	}
	rs.stop = 1;
	pthread_join(reader, NULL);
	CHECK(rs.lookups > 1000, "reader made only %llu lookups", (unsigned long long) rs.lookups);
	CHECK(rs.bad == 0, "%llu bad lookups out of %llu", (unsigned long long) rs.bad,
		  (unsigned long long) rs.lookups);
	memtable_destroy(mt);
}
