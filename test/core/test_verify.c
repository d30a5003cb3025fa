/*-------------------------------------------------------------------------
 *
 * test_verify.c
 *	  Core tests of damage detection (src/core/pmh_verify.c,
 *	  src/core/pmh_checksum.c): damaged segments, and buckets and posting
 *	  blocks whose checksums no longer match.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/core/test_verify.c
 *
 *-------------------------------------------------------------------------
 */
#include <string.h>

#include "test_util.h"

/* Damage in a segment is reported by verification and never crashes lookups. */
void
test_damage(void)
{
	const char *what[] = {"segment header", "chain reference", "overflow bit", "descriptor"};

	for (int kind = 0; kind < 4 && !test_failed; kind++)
	{
		MemTable   *mt = memtable_create(0, 64, 0);
		Model		m = {0};
		PmhSegment	seg;
		uint64_t	live;
		const char *err;
		PmhTid		got[4096];
		int			ngot;

		for (uint64_t k = 0; k < 3000; k++)
			add(mt, &m, k % 3 == 0 ? mix(5) : mix(k));
		/* more distinct codes with one home bucket than it has slots */
		for (uint32_t k = 0; k < 2 * PMH_BUCKET_SLOTS; k++)
			add(mt, &m, UINT32_C(0x40000000) + (k << (32 - PMH_CODE_BITS)));
		memtable_segment(mt, 0, &seg);
		if (kind == 0)
			pmh_segment_header(&seg)->nposting++;
		else if (kind == 1 || kind == 2)
		{
			for (uint32_t b = 0; b < seg.nbuckets; b++)
			{
				PmhBucket  *bk = pmh_bucket(&seg, b);
				uint64_t	valid = bk->commit & PMH_VALID_MASK;
				int			hit = 0;

				for (int i = 0; i < PMH_BUCKET_SLOTS && kind == 1; i++)
				{
					if ((valid >> i & 1) && pmh_slot_tid(bk, i).offset == 0)
					{
						pmh_slot_set(bk, i, pmh_slot_code(bk, i), pmh_tid_make(UINT32_C(0x7fffffff), 0));
						hit = 1;
					}
				}
				if (kind == 2 && (bk->commit & PMH_OVERFLOW_BIT))
				{
					bk->commit &= ~PMH_OVERFLOW_BIT;
					hit = 1;
				}
				if (hit)
					break;
			}
		}
		else
		{
			uint64_t   *dir = pmh_table_descriptors(&mt->table);

			dir[0] = pmh_desc_make(mt->units + 5, 3);
		}
		if (kind == 3)
			err = memtable_attach(mt);
		else
			err = memtable_verify(mt, &live);
		CHECK(err != NULL, "damaged %s not reported", what[kind]);
		if (kind != 3)
		{
			for (uint64_t k = 0; k < m.n; k++)
				memtable_lookup(mt, m.hash[k], got, &ngot, 4096);
		}
		free_table(mt, &m);
	}
}

/* Overwrite the bytes [from, to) of a unit with a pattern. */
static void
scribble(void *unit, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		((uint8_t *) unit)[i] ^= (uint8_t) (0x5A + i);
}

/*
 * In a file with checksums, a damaged bucket or posting block is refused by
 * every reader and writer: lookups keep returning PMH_BUSY (which a caller
 * holding the shard lock reports as damage), inserts, bulk deletes and
 * rebuilds PMH_CORRUPT without changing it, verification names it; a damaged
 * free slot changes nothing.
 */
void
test_checksums(void)
{
	memtable_checksums = 1;
	for (int kind = 0; kind < 3 && !test_failed; kind++)
	{
		MemTable   *mt = memtable_create(0, 64, 0);
		Model		m = {0};
		PmhSegment	seg;
		PmhBucket  *bucket = NULL;
		uint32_t	victim = 0;
		uint64_t	live;
		const char *err;
		PmhTid		got[4096];
		int			ngot;
		PmhCounts	counts;
		PmhStatus	st;

		for (uint64_t k = 0; k < 3000; k++)
			add(mt, &m, k % 3 == 0 ? mix(5) : mix(k));
		memtable_segment(mt, 0, &seg);
		CHECK(seg.nposting > 0, "the duplicates have a posting chain");
		if (kind == 2)
		{
			/* a TID of the chain of mix(5) */
			scribble(&pmh_posting(&seg, (uint64_t) seg.nbuckets + 1)->tid[0], 0, 6);
			victim = mix(5);
		}
		else
		{
			/* the home bucket of some entry, in a valid slot or a free one */
			victim = m.hash[1];
			bucket = pmh_bucket(&seg, pmh_home_bucket(pmh_hash_code(victim, 0), seg.nbuckets));
			for (int i = 0; i < PMH_BUCKET_SLOTS; i++)
			{
				int			valid = (bucket->commit >> i) & 1;

				if (valid == (kind == 0))
				{
					scribble(&bucket->slot[i], 0, sizeof(PmhTid));
					break;
				}
			}
		}
		err = memtable_verify(mt, &live);
		if (kind == 1)
		{
			CHECK(err == NULL, "a damaged free slot: verify says %s", err);
			CHECK(memtable_lookup(mt, victim, got, &ngot, 4096) == PMH_OK,
				  "a damaged free slot: lookup status");
			CHECK(memtable_insert(mt, victim, tid_of(model_add(&m, victim))) == PMH_OK,
				  "a damaged free slot: insert status");
		}
		else
		{
			CHECK(err != NULL && strstr(err, "checksum mismatch") != NULL,
				  "kind %d: verify says %s", kind, err ? err : "nothing");
			CHECK(memtable_lookup(mt, victim, got, &ngot, 4096) == PMH_BUSY,
				  "kind %d: lookup of the damaged unit", kind);
			/* an append to a chain may pass a damaged block by */
			st = memtable_insert(mt, victim, tid_of(model_add(&m, victim)));
			CHECK(st == PMH_CORRUPT || (kind == 2 && st == PMH_OK),
				  "kind %d: insert into the damaged unit: status %d", kind, st);
			CHECK(delete_dead(mt, &m) == UINT64_MAX, "kind %d: bulk delete", kind);
			memtable_segment(mt, 0, &seg);
			CHECK(pmh_table_rebuild(&mt->table, &seg, NULL, 0, 0, PMH_REBUILD_FILL, ++mt->lsn,
									&counts) == PMH_CORRUPT, "kind %d: rebuild", kind);
			err = memtable_verify(mt, &live);
			CHECK(err != NULL, "kind %d: the damage is still there", kind);
		}
		free_table(mt, &m);
	}
}
