/*-------------------------------------------------------------------------
 *
 * test_rebuild.c
 *	  Core tests of rebuilds and splits (src/core/pmh_rebuild.c): the sort
 *	  of their entries, the shard map (pmh_format.h) and where a split divides
 *	  a shard.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/core/test_rebuild.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

/*
 * pmh_sort_entries matches qsort plus a merge of exact duplicates (kept
 * verified if either copy was), whatever the spread of the hashes: whole
 * range, one shard, a few values, one value, in order, reversed.
 */
void
test_sort(void)
{
	enum
	{
		N = 20000
	};
	static const char *const shapes[] = {
		"random", "one shard", "few hashes", "one hash", "ascending", "descending", "clusters"
	};
	PmhEntry   *in = malloc(N * sizeof(PmhEntry));
	PmhEntry   *want = malloc(N * sizeof(PmhEntry));
	PmhEntry   *scratch = malloc(N * sizeof(PmhEntry));

	for (int shape = 0; shape < 7 && !test_failed; shape++)
	{
		for (uint64_t count = 0; count <= N && !test_failed; count = count * 3 + 1)
		{
			uint64_t	nwant = 0;
			uint64_t	n;

			for (uint64_t i = 0; i < count; i++)
			{
				uint32_t	r = (uint32_t) rnd();

				switch (shape)
				{
					case 0: in[i].hash = r; break;
					case 1: in[i].hash = (0x1A5u << 23) | (r >> 9); break;
					case 2: in[i].hash = mix(r % 5); break;
					case 3: in[i].hash = 0xDEADBEEF; break;
					case 4: in[i].hash = (uint32_t) (i * 2654435u); break;
					case 5: in[i].hash = (uint32_t) ((count - i) * 2654435u); break;
					default: in[i].hash = mix(r % 7) + (r >> 26); break;
				}
				in[i].tid = pmh_tid_make((uint32_t) (rnd() % 50), (uint16_t) (1 + rnd() % 20));
				in[i].flags = rnd() % 3 == 0 ? PMH_ENTRY_UNVERIFIED : 0;
				/* every tenth entry repeats an earlier one, maybe with other flags */
				if (i > 0 && rnd() % 10 == 0)
				{
					in[i] = in[rnd() % i];
					in[i].flags = rnd() % 2 ? PMH_ENTRY_UNVERIFIED : 0;
				}
			}
			memcpy(want, in, count * sizeof(PmhEntry));
			qsort(want, count, sizeof(PmhEntry), pmh_entry_cmp);
			for (uint64_t i = 0; i < count; i++)
			{
				if (nwant > 0 && pmh_entry_cmp(&want[i], &want[nwant - 1]) == 0)
					want[nwant - 1].flags &= want[i].flags;
				else
					want[nwant++] = want[i];
			}

			n = pmh_sort_entries(in, count, scratch);
			CHECK(n == nwant, "%s, %llu entries: %llu kept, %llu expected", shapes[shape],
				  (unsigned long long) count, (unsigned long long) n, (unsigned long long) nwant);
			for (uint64_t i = 0; i < n && i < nwant && !test_failed; i++)
				CHECK(in[i].hash == want[i].hash && pmh_tid_equal(in[i].tid, want[i].tid) &&
					  in[i].flags == want[i].flags, "%s, %llu entries: entry %llu differs",
					  shapes[shape], (unsigned long long) count, (unsigned long long) i);
		}
	}
	free(in);
	free(want);
	free(scratch);
}

/*
 * The shard map: a map word gives back its level, split pointer and
 * descriptor unit; every hash maps to a slot below 2^level + split whose
 * depth and shard (top bits) are the hash's own; splitting slot p moves
 * exactly the keys of slot p whose next bit is 1 to slot p + 2^level, and
 * no other key; at split 0 every slot of a level is a shard of that level.
 */
void
test_shard_map(void)
{
	uint32_t	hashes[4096];

	for (int i = 0; i < 4096; i++)
		hashes[i] = (uint32_t) rnd();
	for (uint32_t level = 0; level <= PMH_MAX_SHARD_BITS && !test_failed; level++)
	{
		uint32_t	splits = UINT32_C(1) << level;

		for (uint32_t split = 0; split < splits && !test_failed;
			 split += 1 + split / 7 + (level > 12 ? splits / 64 : 0))
		{
			uint64_t	unit = (rnd() & PMH_DESC_UNIT_MASK) | 1;
			uint64_t	map = pmh_map_make(level, split, unit);
			uint64_t	next = pmh_map_make(level, split + 1, unit);

			CHECK(pmh_map_level(map) == level && pmh_map_split(map) == split &&
				  pmh_map_desc_unit(map) == unit && pmh_map_slots(map) == splits + split,
				  "map word of level %u split %u unit %llu", level, split,
				  (unsigned long long) unit);
			for (int i = 0; i < 4096 && !test_failed; i++)
			{
				uint32_t	depth;
				uint32_t	next_depth;
				uint32_t	slot = pmh_map_slot(hashes[i], map, &depth);
				uint32_t	next_slot = pmh_map_slot(hashes[i], next, &next_depth);
				uint32_t	moves = slot == split && level < 32 &&
					(hashes[i] >> (31 - level) & 1);

				CHECK(slot < pmh_map_slots(map) &&
					  depth == (slot < split || slot >= splits ? level + 1 : level) &&
					  pmh_slot_shard(slot, depth) == pmh_shard_of(hashes[i], depth),
					  "hash %08x, level %u split %u: slot %u depth %u", hashes[i], level,
					  split, slot, depth);
				CHECK(next_slot == (moves ? slot + splits : slot) &&
					  next_depth == (slot == split ? level + 1 : depth),
					  "hash %08x, level %u: split %u moved it from slot %u to %u", hashes[i],
					  level, split, slot, next_slot);
				if (split == 0)
					CHECK(slot == pmh_reverse_bits(pmh_shard_of(hashes[i], level)) >>
						  (32 - level) % 32 && (level > 0 || slot == 0),
						  "hash %08x, level %u: slot %u", hashes[i], level, slot);
			}
		}
	}
}

/*
 * pmh_split_point divides sorted entries of a shard between its halves:
 * every entry before the point has its next bit 0, every one from it on 1,
 * whatever the share of each half (none, all, or random).
 */
void
test_split_point(void)
{
	PmhEntry   *entries = malloc(5000 * sizeof(PmhEntry));
	PmhEntry   *scratch = malloc(5000 * sizeof(PmhEntry));

	for (uint32_t depth = 9; depth <= PMH_MAX_SHARD_BITS && !test_failed; depth++)
	{
		for (int round = 0; round < 40 && !test_failed; round++)
		{
			uint32_t	shard = (uint32_t) rnd() & ((UINT32_C(1) << depth) - 1);
			uint32_t	bit = UINT32_C(1) << (31 - depth);
			uint64_t	count = rnd() % 5000;
			int			shape = round % 4;	/* 0: random, 1: all low, 2: all high, 3: few */
			uint64_t	point;

			for (uint64_t i = 0; i < count; i++)
			{
				uint32_t	rest = (uint32_t) rnd() >> depth;

				if (shape == 1)
					rest &= ~bit;
				else if (shape == 2)
					rest |= bit;
				else if (shape == 3)
					rest = rest % 3 == 0 ? rest | bit : rest & ~bit;
				entries[i].hash = (shard << (32 - depth)) | rest;
				entries[i].tid = tid_of(i);
				entries[i].flags = 0;
			}
			count = pmh_sort_entries(entries, count, scratch);
			point = pmh_split_point(entries, count, depth);
			CHECK(point <= count, "depth %u: point %llu of %llu", depth,
				  (unsigned long long) point, (unsigned long long) count);
			for (uint64_t i = 0; i < count && !test_failed; i++)
				CHECK(((entries[i].hash & bit) != 0) == (i >= point),
					  "depth %u, shape %d: entry %llu of %llu on the wrong side of %llu",
					  depth, shape, (unsigned long long) i, (unsigned long long) count,
					  (unsigned long long) point);
		}
	}
	free(entries);
	free(scratch);
}
