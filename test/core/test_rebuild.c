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
 * A slot's first depth is at most its depth, and the slots split from it
 * lie above it by multiples of 2^first depth.
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
				/* the slot's first depth (built with 9 bits): its later slots by 2^first */
				{
					uint32_t	built = level < 9 ? level : 9;
					uint32_t	first = pmh_slot_first_depth(slot, built);
					uint32_t	mask = (UINT32_C(1) << first) - 1;

					CHECK(first >= built && first <= depth &&
						  slot == pmh_slot_of(hashes[i], first) &&
						  (next_slot & mask) == slot,
						  "hash %08x, level %u split %u: slot %u first depth %u", hashes[i],
						  level, split, slot, first);
				}
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

/* What the map hook of a split checks when the map moves. */
typedef struct SplitWatch
{
	uint32_t	low_slot;
	uint32_t	high_slot;
	uint64_t	old_desc;		/* the low slot's descriptor before the split */
	uint32_t	depth;			/* the shard's depth before the split */
	int			upper;			/* whether the upper half has entries */
	int			calls;
	int			in_order;		/* the upper half was out, the old segment still in */
} SplitWatch;

/* Map hook: where the map moves, the upper half is published and the old segment still is. */
static void
split_watch(MemTable *mt)
{
	SplitWatch *w = mt->hook_arg;
	PmhPublication low;
	PmhPublication high;

	pmh_mirror_read(&mt->mirror[w->low_slot], &low);
	pmh_mirror_read(&mt->mirror[w->high_slot], &high);
	w->calls++;
	w->in_order = low.desc == w->old_desc && (high.desc != 0) == w->upper &&
		high.depth == w->depth + 1 && low.depth == w->depth &&
		((PmhFileHeader *) mt->live)->shard_map == mt->map;
}

/* TIDs a lookup delivers. */
typedef struct TidList
{
	PmhTid		tids[4096];
	int			n;
} TidList;

/* Lookup sink: keep the TIDs. */
static void
list_tids(void *arg, const PmhTid *tids, int count, uint64_t unverified)
{
	TidList    *l = arg;

	(void) unverified;
	for (int i = 0; i < count && l->n < 4096; i++)
		l->tids[l->n++] = tids[i];
}

/* The segment a slot of a table publishes, which must be of that shard and depth. */
static void
slot_segment(MemTable *mt, uint32_t slot, uint32_t shard, uint32_t depth, PmhSegment *seg)
{
	memtable_segment(mt, slot, seg);
	CHECK(seg->shard == shard && seg->shard_bits == depth,
		  "slot %u publishes shard %u of depth %u, not %u of depth %u", slot, seg->shard,
		  seg->shard_bits, shard, depth);
}

/*
 * Replay of a REBUILD record of a shard of depth bits (slot 0) from before
 * its split, onto each half, as crash recovery does when the file's map is
 * past the split: each half takes only its own part of the record's
 * entries, verifies, and keeps its count.
 */
static void
replay_old_rebuild(MemTable *mt, const Model *m, uint32_t shard, uint32_t bits, const char *shape)
{
	uint32_t	slots[2] = {0, UINT32_C(1) << bits};
	PmhEntry   *record = malloc((m->n + 1) * sizeof(PmhEntry));
	uint64_t	n = 0;

	for (uint64_t j = 0; j < m->n; j++)
		if (pmh_shard_of(m->hash[j], bits) == shard)
			record[n++] = (PmhEntry) {m->hash[j], tid_of(j), 0};
	for (int h = 0; h < 2 && !test_failed; h++)
	{
		PmhSegment	seg;
		PmhCounts	before = mt->counts[slots[h]];
		PmhCounts	found;
		PmhEntry   *scratch;
		uint64_t	live = 0;
		char		msg[256];
		const char *err;

		memtable_segment(mt, slots[h], &seg);
		CHECK(pmh_table_rebuild(&mt->table, &seg, record, n, 1, PMH_REBUILD_FILL, ++mt->lsn,
								&mt->counts[slots[h]]) == PMH_OK,
			  "%s: replay of the old rebuild onto half %d failed", shape, h);
		memtable_segment(mt, slots[h], &seg);
		if (seg.unit == 0)
		{
			CHECK(before.entries == 0, "%s: half %d lost its %llu entries", shape, h,
				  (unsigned long long) before.entries);
			continue;
		}
		pmh_segment_count(&seg, &found);
		scratch = malloc((found.slots + found.entries + 1) * sizeof(PmhEntry));
		err = pmh_segment_verify(&seg, 42, mt->units, scratch, found.slots + found.entries + 1,
								 &live, msg, sizeof(msg));
		free(scratch);
		CHECK(err == NULL && found.entries == before.entries,
			  "%s: half %d after the old rebuild: %s, %llu entries, %llu before", shape, h,
			  err ? err : "sound", (unsigned long long) found.entries,
			  (unsigned long long) before.entries);
	}
	free(record);
}

/*
 * pmh_table_split divides the shard at the split pointer between its
 * halves one bit deeper: each key's TIDs are found in its own half, none
 * in the other, both halves verify and hold as many entries as the shard
 * did, the upper half is published before the map moves (in the file and
 * for readers) and the old segment replaced after; keys of other shards
 * are untouched.  Shapes: distinct keys, keys with posting chains, an
 * empty upper half.  A REBUILD of the shard from before the split,
 * replayed onto each half, leaves it as it was.  A shard of fewer than 9
 * bits does not split (its hashes are not whole).
 */
void
test_split(void)
{
	const uint32_t bits = 10;
	const char *shapes[] = {"distinct keys", "posting chains", "empty upper half"};

	for (int shape = 0; shape < 3 && !test_failed; shape++)
	{
		MemTable   *mt = memtable_create(bits, 1024, 0);
		Model		m = {0};
		uint32_t	slot = 0;
		uint32_t	shard = pmh_slot_shard(slot, bits);
		uint32_t	high_slot = slot + (UINT32_C(1) << bits);
		uint32_t	next_bit = UINT32_C(1) << (31 - bits);
		SplitWatch	watch = {slot, high_slot, 0, bits, 0, 0, 0};
		PmhSegment	half[2];
		PmhCounts	counts[2];
		PmhPublication before;
		uint64_t	in_shard = 0;
		uint64_t	in_upper = 0;
		PmhStatus	st;

		for (int i = 0; i < 3000; i++)
		{
			uint32_t	rest = (uint32_t) rnd() >> bits;
			uint32_t	bystander;

			if (shape == 1)
				rest = (uint32_t) mix(i % 40) >> bits;
			if (shape == 2)
				rest &= ~next_bit;
			add(mt, &m, (shard << (32 - bits)) | rest);
			/* a bystander in another shard */
			bystander = (uint32_t) rnd();
			if (pmh_shard_of(bystander, bits) == shard)
				bystander ^= UINT32_C(1) << (32 - bits);
			add(mt, &m, bystander);
		}
		for (uint64_t i = 0; i < m.n; i++)
		{
			in_shard += pmh_shard_of(m.hash[i], bits) == shard;
			in_upper += pmh_shard_of(m.hash[i], bits + 1) == ((shard << 1) | 1);
		}
		watch.upper = in_upper > 0;
		pmh_mirror_read(&mt->mirror[slot], &before);
		watch.old_desc = before.desc;
		mt->map_hook = split_watch;
		mt->hook_arg = &watch;
		st = memtable_split(mt);
		mt->map_hook = NULL;
		CHECK(st == PMH_OK && watch.calls == 1 && watch.in_order &&
			  mt->map == pmh_map_make(bits, 1, PMH_HEADER_UNITS),
			  "%s: split status %d, %d map moves, in order %d", shapes[shape], st, watch.calls,
			  watch.in_order);
		slot_segment(mt, slot, shard << 1, bits + 1, &half[0]);
		slot_segment(mt, high_slot, (shard << 1) | 1, bits + 1, &half[1]);
		counts[0] = mt->counts[slot];
		counts[1] = mt->counts[high_slot];
		CHECK(counts[0].entries + counts[1].entries == in_shard &&
			  counts[1].entries == in_upper && (half[1].unit != 0) == (in_upper > 0),
			  "%s: halves of %llu and %llu entries, %llu and %llu in the model", shapes[shape],
			  (unsigned long long) counts[0].entries, (unsigned long long) counts[1].entries,
			  (unsigned long long) (in_shard - in_upper), (unsigned long long) in_upper);
		CHECK(shape != 2 || in_upper == 0, "the upper half is not empty");
		for (int h = 0; h < 2 && !test_failed; h++)
		{
			PmhCounts	found;
			uint64_t	live = 0;
			PmhEntry   *scratch;
			char		msg[256];
			const char *err = NULL;

			if (half[h].unit == 0)
				continue;
			pmh_segment_count(&half[h], &found);
			scratch = malloc((found.slots + found.entries + 1) * sizeof(PmhEntry));
			err = pmh_segment_verify(&half[h], 42, mt->units, scratch,
									 found.slots + found.entries + 1, &live, msg, sizeof(msg));
			free(scratch);
			CHECK(err == NULL && found.entries == counts[h].entries && live == found.entries,
				  "%s: half %d: %s, %llu entries counted, %llu reported", shapes[shape], h,
				  err ? err : "sound", (unsigned long long) found.entries,
				  (unsigned long long) counts[h].entries);
		}
		for (uint64_t i = 0; i < m.n && !test_failed; i++)
		{
			uint32_t	hash = m.hash[i];
			int			h = (hash & next_bit) != 0;
			TidList		got = {.n = 0};
			TidList		other = {.n = 0};
			PmhTid		want[4096];
			int			nwant = 0;

			if (pmh_shard_of(hash, bits) != shard)
				continue;
			for (uint64_t j = 0; j < m.n; j++)
				if (m.hash[j] == hash && nwant < 4096)
					want[nwant++] = tid_of(j);
			CHECK(half[h].unit != 0 &&
				  pmh_lookup(&half[h], hash, list_tids, &got) == PMH_OK &&
				  (half[1 - h].unit == 0 ||
				   pmh_lookup(&half[1 - h], hash, list_tids, &other) == PMH_OK),
				  "%s: lookup of %08x failed", shapes[shape], hash);
			/* the other half may hold keys of the same code, not this key's entries */
			for (int k = 0; k < other.n; k++)
				CHECK(m.hash[index_of(other.tids[k])] != hash,
					  "%s: %08x found in the other half", shapes[shape], hash);
			check_found("split half", hash, got.tids, got.n, want, nwant);
		}
		/* every key, the bystanders' too, through the map; and after attaching again */
		check_table(mt, &m);
		CHECK(memtable_attach(mt) == NULL && mt->map == pmh_map_make(bits, 1, PMH_HEADER_UNITS),
			  "%s: attach after the split", shapes[shape]);
		replay_old_rebuild(mt, &m, shard, bits, shapes[shape]);
		check_and_free(mt, &m);
	}

	/* fewer than 9 shard bits: no split, nothing changed */
	{
		MemTable   *mt = memtable_create(8, 1024, 0);
		Model		m = {0};

		for (int i = 0; i < 500; i++)
			add(mt, &m, (uint32_t) rnd() >> 8);
		CHECK(memtable_split(mt) == PMH_FULL && mt->map == pmh_map_make(8, 0, PMH_HEADER_UNITS),
			  "a shard of 8 bits split");
		check_and_free(mt, &m);
	}
}

/*
 * Splitting every shard of two levels, one at a time with inserts between
 * them, takes the table from 2^9 slots to 2^11: the split that ends each
 * level, and only it, moves the descriptors to a new array of twice the
 * room; every key is found through the map all along and after attaching
 * again, and the file verifies.
 */
void
test_split_level(void)
{
	const uint32_t bits = 9;
	MemTable   *mt = memtable_create(bits, 8192, 0);
	Model		m = {0};
	uint64_t	key = 0;
	uint64_t	dir_unit = PMH_HEADER_UNITS;

	for (; key < 20000; key++)
		add(mt, &m, mix(key));
	for (uint32_t level = bits; level < bits + 2 && !test_failed; level++)
	{
		for (uint32_t s = 0; s < (UINT32_C(1) << level) && !test_failed; s++)
		{
			PmhStatus	st = memtable_split(mt);

			CHECK(st == PMH_OK, "level %u split %u: status %d", level, s, st);
			CHECK(pmh_map_desc_unit(mt->map) == dir_unit ||
				  s == (UINT32_C(1) << level) - 1,
				  "level %u split %u moved the descriptors", level, s);
			for (int i = 0; i < 20; i++)
				add(mt, &m, mix(key++));
			if (s % 256 == 255)
				check_table(mt, &m);
		}
		/* the split that ended the level moved the descriptors to twice the room */
		CHECK(pmh_map_level(mt->map) == level + 1 && pmh_map_split(mt->map) == 0 &&
			  pmh_map_desc_unit(mt->map) != dir_unit &&
			  pmh_map_desc_unit(mt->map) >= PMH_HEADER_UNITS,
			  "map after level %u: level %u split %u descriptors at %llu", level,
			  pmh_map_level(mt->map), pmh_map_split(mt->map),
			  (unsigned long long) pmh_map_desc_unit(mt->map));
		dir_unit = pmh_map_desc_unit(mt->map);
		check_table(mt, &m);
		{
			uint64_t	map = mt->map;
			uint64_t	live;
			const char *err = memtable_attach(mt);

			CHECK(err == NULL && mt->map == map, "attach after level %u: %s", level,
				  err ? err : "map changed");
			err = memtable_verify(mt, &live);
			CHECK(err == NULL && live == m.n, "verify after level %u: %s, %llu of %llu",
				  level, err ? err : "sound", (unsigned long long) live,
				  (unsigned long long) m.n);
		}
	}
	CHECK(memtable_split(mt) == PMH_FULL, "a split past the test table's room");
	check_and_free(mt, &m);
}
