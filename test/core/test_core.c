/*-------------------------------------------------------------------------
 *
 * test_core.c
 *	  Unit tests of the PostgreSQL-free pmhash core.
 *
 * Each test compares the table with a model (every entry it was given),
 * verifies the structure, and is counted once as passed or failed.  The
 * crash tests stop the writer at a random persistence fence, let a random
 * share of unflushed lines reach the durable image, and check that every
 * completed change survived and nothing else appeared.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/core/test_core.c
 *
 *-------------------------------------------------------------------------
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memtable.h"

static int	passed;
static int	failed;
static int	test_failed;

#define CHECK(cond, ...) \
	do { \
		if (!(cond)) \
		{ \
			if (!test_failed) \
				fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__), \
				fprintf(stderr, __VA_ARGS__), fputc('\n', stderr); \
			test_failed = 1; \
		} \
	} while (0)

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

/* xorshift64* random numbers. */
static uint64_t
rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ULL;
}

/* A well-mixed 32-bit hash of a key. */
static uint32_t
mix(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ULL;
	k ^= k >> 33;
	return (uint32_t) k;
}

/* The TID given to the i-th entry of a test. */
static PmhTid
tid_of(uint64_t i)
{
	return pmh_tid_make((uint32_t) (i / 250), (uint16_t) (i % 250 + 1));
}

/* The entry number a TID was made from. */
static uint64_t
index_of(PmhTid tid)
{
	return (uint64_t) pmh_tid_block(tid) * 250 + tid.offset - 1;
}

/* The entries a test has inserted, and which of them are deleted. */
typedef struct Model
{
	uint32_t   *hash;
	uint8_t    *dead;
	uint64_t	n;
	uint64_t	cap;
} Model;

/* Record an entry in the model. */
static uint64_t
model_add(Model *m, uint32_t hash)
{
	if (m->n == m->cap)
	{
		m->cap = m->cap ? 2 * m->cap : 1024;
		m->hash = realloc(m->hash, m->cap * sizeof(uint32_t));
		m->dead = realloc(m->dead, m->cap);
	}
	m->hash[m->n] = hash;
	m->dead[m->n] = 0;
	return m->n++;
}

/* Release a model. */
static void
model_free(Model *m)
{
	free(m->hash);
	free(m->dead);
	memset(m, 0, sizeof(*m));
}

/* qsort comparator for entries by TID. */
static int
tid_cmp_entries(const void *a, const void *b)
{
	return pmh_tid_cmp(((const PmhEntry *) a)->tid, ((const PmhEntry *) b)->tid);
}

/* qsort comparator for TIDs. */
static int
tid_cmp(const void *a, const void *b)
{
	return pmh_tid_cmp(*(const PmhTid *) a, *(const PmhTid *) b);
}

static int
u64_cmp(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *) a;
	uint64_t	y = *(const uint64_t *) b;

	return x < y ? -1 : x > y;
}

/* Order entry numbers by their hash (for grouping). */
static const uint32_t *sort_hashes;
static int
by_hash(const void *a, const void *b)
{
	uint32_t	x = sort_hashes[*(const uint64_t *) a];
	uint32_t	y = sort_hashes[*(const uint64_t *) b];

	if (x != y)
		return x < y ? -1 : 1;
	return u64_cmp(a, b);
}

/* End of the hash group that starts at order[i]; its live TIDs go to want. */
static uint64_t
group_want(Model *m, const uint64_t *order, uint64_t i, PmhTid *want, int *nwant)
{
	uint64_t	j = i;

	*nwant = 0;
	while (j < m->n && m->hash[order[j]] == m->hash[order[i]])
	{
		if (!m->dead[order[j]])
			want[(*nwant)++] = tid_of(order[j]);
		j++;
	}
	return j;
}

/* Whether the model holds hash h (order sorts the model by hash). */
static int
model_holds(Model *m, const uint64_t *order, uint32_t h)
{
	uint64_t	lo = 0;
	uint64_t	hi = m->n;

	while (lo < hi)
	{
		uint64_t	mid = (lo + hi) / 2;

		if (m->hash[order[mid]] < h)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < m->n && m->hash[order[lo]] == h;
}

/* A lookup of hash found got (ngot TIDs); it should have found want. */
static void
check_found(const char *how, uint32_t hash, PmhTid *got, int ngot, PmhTid *want, int nwant)
{
	CHECK(ngot == nwant, "%s of hash %08x: %d TIDs found, %d expected", how, hash, ngot, nwant);
	if (ngot != nwant)
		return;
	qsort(got, ngot, sizeof(PmhTid), tid_cmp);
	qsort(want, nwant, sizeof(PmhTid), tid_cmp);
	CHECK(memcmp(got, want, nwant * sizeof(PmhTid)) == 0, "%s of hash %08x: wrong TIDs", how, hash);
}

#define CHECK_BATCH_KEYS	45		/* keys per batched lookup */
#define CHECK_BATCH_CAP		512		/* TIDs compared per key */

/*
 * Batched lookups of every hash of the model, a quarter of the keys of each
 * batch absent hashes, agree with the model.
 */
static void
check_batches(MemTable *mt, Model *m, const uint64_t *order, PmhTid *want)
{
	PmhTid	   *got = malloc(CHECK_BATCH_KEYS * CHECK_BATCH_CAP * sizeof(PmhTid));
	uint32_t	hashes[CHECK_BATCH_KEYS];
	uint64_t	group[CHECK_BATCH_KEYS];	/* start in order, UINT64_MAX if absent */
	int			counts[CHECK_BATCH_KEYS];

	for (uint64_t i = 0; i < m->n && !test_failed;)
	{
		int			n = 0;
		PmhStatus	st;

		while (n < CHECK_BATCH_KEYS && i < m->n)
		{
			int			nwant;

			if (n % 4 == 3)
			{
				uint32_t	h = (uint32_t) rnd();

				if (model_holds(m, order, pmh_canonical_hash(h, mt->table.shard_bits)))
					continue;
				hashes[n] = h;
				group[n++] = UINT64_MAX;
				continue;
			}
			hashes[n] = m->hash[order[i]];
			group[n++] = i;
			i = group_want(m, order, i, want, &nwant);
		}
		st = memtable_lookup_batch(mt, hashes, n, got, CHECK_BATCH_CAP, counts);
		CHECK(st == PMH_OK, "batched lookup status %d", st);
		for (int k = 0; k < n && !test_failed; k++)
		{
			int			nwant = 0;

			if (group[k] != UINT64_MAX)
				group_want(m, order, group[k], want, &nwant);
			if (nwant > CHECK_BATCH_CAP)
				CHECK(counts[k] == nwant, "batched lookup of hash %08x: %d TIDs found, %d expected",
					  hashes[k], counts[k], nwant);
			else
				check_found("batched lookup", hashes[k], got + k * CHECK_BATCH_CAP, counts[k],
							want, nwant);
		}
	}
	free(got);
}

/*
 * Check every hash of the model: a lookup, single or batched, returns
 * exactly the live TIDs of that hash.  Also probe some absent hashes and
 * verify the structure.
 */
static void
check_table(MemTable *mt, Model *m)
{
	uint64_t   *order = malloc((m->n + 1) * sizeof(uint64_t));
	int			cap = 1 << 20;
	PmhTid	   *got = malloc(cap * sizeof(PmhTid));
	PmhTid	   *want = malloc(cap * sizeof(PmhTid));
	uint64_t	live = 0;
	uint64_t	expect_live = 0;
	const char *err;

	for (uint64_t i = 0; i < m->n; i++)
		order[i] = i;
	sort_hashes = m->hash;
	qsort(order, m->n, sizeof(uint64_t), by_hash);
	for (uint64_t i = 0; i < m->n && !test_failed;)
	{
		uint64_t	j;
		int			nwant;
		int			ngot;
		PmhStatus	st;

		j = group_want(m, order, i, want, &nwant);
		expect_live += nwant;
		st = memtable_lookup(mt, m->hash[order[i]], got, &ngot, cap);
		CHECK(st == PMH_OK, "lookup status %d", st);
		check_found("lookup", m->hash[order[i]], got, ngot, want, nwant);
		i = j;
	}
	for (int k = 0; k < 2000 && !test_failed; k++)
	{
		uint32_t	h = (uint32_t) rnd();
		int			ngot;

		/* skip the rare random hash that the model holds */
		if (model_holds(m, order, pmh_canonical_hash(h, mt->table.shard_bits)))
			continue;
		memtable_lookup(mt, h, got, &ngot, cap);
		CHECK(ngot == 0, "absent hash %08x returned %d TIDs", h, ngot);
	}
	check_batches(mt, m, order, want);
	err = memtable_verify(mt, &live);
	CHECK(err == NULL, "verify: %s", err);
	CHECK(live == expect_live, "verify counted %llu live, expected %llu",
		  (unsigned long long) live, (unsigned long long) expect_live);
	free(order);
	free(got);
	free(want);
}

/* Insert an entry into table and model (which keeps the canonical hash). */
static void
add(MemTable *mt, Model *m, uint32_t hash)
{
	uint64_t	i = model_add(m, pmh_canonical_hash(hash, mt->table.shard_bits));
	PmhStatus	st = memtable_insert(mt, hash, tid_of(i));

	CHECK(st == PMH_OK, "insert status %d", st);
}

/* Dead-TID callback over the model. */
static int
model_dead(void *arg, PmhTid tid)
{
	Model	   *m = arg;

	return m->dead[index_of(tid)];
}

/* Bulk delete of what the model marks dead. */
static uint64_t
delete_dead(MemTable *mt, Model *m)
{
	PmhDeleteOps ops = {model_dead, NULL, NULL, m};

	return memtable_bulk_delete(mt, &ops);
}

/* Every tag comparison this CPU can run agrees with the plain loop. */
static void
test_match(void)
{
	static const char *const impls[] = {"scalar", "sse2", "avx2"};
	PmhBucket	bucket;

	for (int round = 0; round < 20000 && !test_failed; round++)
	{
		uint16_t	key = (uint16_t) (rnd() & 0xF);
		uint32_t	expect = 0;

		/* the bytes after the tags must not matter */
		memset(&bucket, (int) (rnd() & 1) ? 0 : key, sizeof(bucket));
		for (int i = 0; i < PMH_BUCKET_SLOTS; i++)
		{
			bucket.tag[i] = (uint16_t) (rnd() & 0xF);
			expect |= (uint32_t) (bucket.tag[i] == key) << i;
		}
		for (int k = 0; k < 3; k++)
		{
			uint32_t	got;

			if (!pmh_match_use(impls[k]))
				continue;
			got = pmh_match_tags(bucket.tag, key);
			CHECK(got == expect, "%s: mask %07x, expected %07x", impls[k], got, expect);
		}
		pmh_match_use(NULL);
	}
}

/* The free map hands out disjoint space and merges what comes back. */
static void
test_freemap(void)
{
	enum
	{
		SPACE = 4096
	};
	PmhExtent	ext[64];
	PmhFreeMap	map;
	uint8_t		used[SPACE + 1] = {0};
	uint64_t	held_unit[200];
	uint64_t	held_count[200];
	int			nheld = 0;

	pmh_freemap_init(&map, ext, 64);
	CHECK(pmh_freemap_release(&map, 1, SPACE) == 0, "initial release");
	CHECK(pmh_freemap_release(&map, 10, 5) == -1, "overlap not detected");
	for (int round = 0; round < 20000 && !test_failed; round++)
	{
		if (nheld < 200 && (rnd() % 3 != 0 || nheld == 0))
		{
			uint64_t	count = 1 + rnd() % 40;
			uint64_t	unit = pmh_freemap_alloc(&map, count);

			if (unit == 0)
				continue;
			for (uint64_t u = unit; u < unit + count; u++)
			{
				CHECK(u >= 1 && u <= SPACE && !used[u], "unit %llu handed out twice",
					  (unsigned long long) u);
				used[u] = 1;
			}
			held_unit[nheld] = unit;
			held_count[nheld++] = count;
		}
		else
		{
			int			k = (int) (rnd() % nheld);

			for (uint64_t u = held_unit[k]; u < held_unit[k] + held_count[k]; u++)
				used[u] = 0;
			CHECK(pmh_freemap_release(&map, held_unit[k], held_count[k]) == 0, "release");
			held_unit[k] = held_unit[--nheld];
			held_count[k] = held_count[nheld];
		}
	}
	while (nheld > 0)
	{
		nheld--;
		pmh_freemap_release(&map, held_unit[nheld], held_count[nheld]);
	}
	CHECK(map.lost_units > 0 || (map.count == 1 && pmh_freemap_total(&map) == SPACE),
		  "free space did not merge back: %u extents, %llu units", map.count,
		  (unsigned long long) pmh_freemap_total(&map));
}

/* Unique keys: every one is found, absent keys are not, growth works. */
static void
test_unique_keys(void)
{
	MemTable   *mt = memtable_create(3, 64, 0);
	Model		m = {0};

	for (uint64_t k = 0; k < 200000 && !test_failed; k++)
		add(mt, &m, mix(k));
	check_table(mt, &m);
	memtable_destroy(mt);
	model_free(&m);
}

/*
 * Slots keep every bit of a hash when the file has 9 or more shard bits;
 * with fewer, hashes that differ only in the dropped low bits share a code,
 * and the segment gives back their canonical hash.  Keys differ either in
 * their lowest bits (the tag) or in the bits of the code's high part.
 */
static void
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
			memtable_segment(mt, pmh_shard_of(base, shard_bits), &seg);
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

/* One key with 100,000 rows among others: chains hold them all. */
static void
test_heavy_duplicates(void)
{
	MemTable   *mt = memtable_create(2, 64, 0);
	Model		m = {0};
	PmhStats	stats = {0};
	uint32_t	heavy = mix(777);

	for (uint64_t k = 0; k < 120000 && !test_failed; k++)
		add(mt, &m, (k % 6 == 0 || k >= 20000) ? heavy : mix(k));
	check_table(mt, &m);
	for (uint32_t s = 0; s < 4; s++)
	{
		PmhSegment	seg;

		memtable_segment(mt, s, &seg);
		if (seg.unit == 0)
			continue;
		pmh_segment_stats(&seg, &stats);
	}
	CHECK(stats.chains >= 1 && stats.chained_entries >= 100000,
		  "expected the heavy key in chains: %llu chains, %llu chained",
		  (unsigned long long) stats.chains, (unsigned long long) stats.chained_entries);
	CHECK(stats.max_probe <= 2 * PMH_MAX_PROBE + 2, "runs too long: %u", stats.max_probe);
	memtable_destroy(mt);
	model_free(&m);
}

/* Many keys with 1 to 40 copies each, in random order, around the chain threshold. */
static void
test_mixed_duplicates(void)
{
	MemTable   *mt = memtable_create(4, 64, 0);
	Model		m = {0};
	uint64_t	todo[3000];
	uint64_t	left = 0;

	for (int k = 0; k < 3000; k++)
		left += todo[k] = 1 + rnd() % 40;
	while (left > 0 && !test_failed)
	{
		int			k = (int) (rnd() % 3000);

		if (todo[k] == 0)
			continue;
		todo[k]--;
		left--;
		add(mt, &m, mix(k));
	}
	check_table(mt, &m);
	memtable_destroy(mt);
	model_free(&m);
}

/* Deletes: bulk and single, shrinking, and reuse of freed space. */
static void
test_deletes(void)
{
	MemTable   *mt = memtable_create(4, 64, 0);
	Model		m = {0};
	uint64_t	removed;
	uint64_t	units_full;
	uint64_t	free_before;

	for (uint64_t k = 0; k < 100000 && !test_failed; k++)
		add(mt, &m, k % 10 == 0 ? mix(k % 1000) : mix(k));
	for (uint64_t i = 0; i < m.n; i++)
		m.dead[i] = rnd() % 2;
	removed = delete_dead(mt, &m);
	CHECK(removed > 40000 && removed < 60000, "removed %llu", (unsigned long long) removed);
	check_table(mt, &m);

	/* presence, then a sparse delete */
	for (uint64_t i = 0; i < m.n && !test_failed; i += 7)
	{
		uint32_t	shard = pmh_shard_of(m.hash[i], 4);
		PmhSegment	seg;

		memtable_segment(mt, shard, &seg);
		CHECK(pmh_contains(&seg, m.hash[i], tid_of(i)) == !m.dead[i], "contains entry %llu",
			  (unsigned long long) i);
		m.dead[i] = 1;
	}
	delete_dead(mt, &m);
	check_table(mt, &m);

	/* mass delete: shards shrink and their space becomes free */
	units_full = mt->units;
	free_before = pmh_freemap_total(&mt->freemap);
	for (uint64_t i = 0; i < m.n; i++)
		m.dead[i] |= rnd() % 100 != 0;
	delete_dead(mt, &m);
	check_table(mt, &m);
	CHECK(pmh_freemap_total(&mt->freemap) > free_before + units_full / 2,
		  "shrinking freed too little: %llu of %llu units free",
		  (unsigned long long) pmh_freemap_total(&mt->freemap), (unsigned long long) units_full);

	/* inserting again reuses the freed space */
	for (uint64_t k = 0; k < 30000 && !test_failed; k++)
		add(mt, &m, mix(1000000 + k));
	check_table(mt, &m);
	CHECK(mt->units == units_full, "file grew from %llu to %llu units despite free space",
		  (unsigned long long) units_full, (unsigned long long) mt->units);
	memtable_destroy(mt);
	model_free(&m);
}

/* Hashes that all land in one home bucket still work. */
static void
test_clustered_hashes(void)
{
	MemTable   *mt = memtable_create(0, 64, 0);
	Model		m = {0};

	for (uint64_t k = 0; k < 5000 && !test_failed; k++)
		add(mt, &m, 0x12345600u + (uint32_t) (k % 97));
	for (uint64_t k = 0; k < 5000 && !test_failed; k++)
		add(mt, &m, mix(k));
	check_table(mt, &m);
	memtable_destroy(mt);
	model_free(&m);
}

static jmp_buf crash_jump;

/* Persistence drain that stops the run at the planned crash point. */
static void
crashing_drain(void *arg)
{
	MemTable   *mt = arg;

	if (mt->drains + 1 == mt->crash_at)
		longjmp(crash_jump, 1);
	mt->drains++;
	for (uint64_t l = 0; l < mt->units * PMH_UNIT_SIZE / 64; l++)
	{
		if (mt->pending[l])
		{
			mt->pending[l] = 0;
			memcpy(mt->durable + l * 64, mt->live + l * 64, 64);
		}
	}
}

/* One crash round: run until the planned fence, crash, recover, check. */
static void
crash_round(int round)
{
	MemTable   *mt = memtable_create(1, 64, 1);
	Model		m = {0};
	uint8_t    *done_insert = calloc(4000, 1);
	volatile uint64_t in_flight = UINT64_MAX;
	volatile uint64_t durable_lsn = 0;
	uint64_t	live;
	const char *err;
	double		evict = (round % 3) / 2.0;

	mt->persist.drain = crashing_drain;
	mt->crash_at = 20 + rnd() % 6000;
	for (int k = 0; k < 4000; k++)
		model_add(&m, (k % 5 == 0) ? mix(round) : mix(round * 100000 + k));

	if (setjmp(crash_jump) == 0)
	{
		for (int k = 0; k < 4000; k++)
		{
			in_flight = k;
			durable_lsn = mt->lsn;
			memtable_insert(mt, m.hash[k], tid_of(k));
			done_insert[k] = 1;
			if (k % 1000 == 999)
			{
				/* delete a third of what is there */
				for (int d = 0; d <= k; d++)
					m.dead[d] = m.dead[d] || d % 3 == 0;
				in_flight = UINT64_MAX - 1;
				durable_lsn = mt->lsn;
				delete_dead(mt, &m);
				in_flight = UINT64_MAX;
			}
		}
		/* no crash in this round */
		memtable_destroy(mt);
		model_free(&m);
		free(done_insert);
		return;
	}
	memtable_crash(mt, evict, rnd());
	mt->persist.drain = NULL;
	err = memtable_attach(mt);
	CHECK(err == NULL, "round %d: attach after crash: %s", round, err);
	if (err == NULL)
	{
		/* recovery reseals what changed after the last durable change */
		if (memtable_checksums)
			memtable_flag_unverified(mt, durable_lsn);
		err = memtable_verify(mt, &live);
		CHECK(err == NULL, "round %d: verify after crash: %s", round, err);
	}
	for (int k = 0; k < 4000 && !test_failed && err == NULL; k++)
	{
		PmhTid		got[8192];
		int			ngot;
		int			found = 0;
		int			may_be_dead = in_flight == UINT64_MAX - 1 && k % 3 == 0;

		memtable_lookup(mt, m.hash[k], got, &ngot, 8192);
		for (int g = 0; g < ngot && g < 8192; g++)
		{
			uint64_t	idx = index_of(got[g]);

			CHECK(idx < 4000 && pmh_canonical_hash(m.hash[idx], 1) == pmh_canonical_hash(m.hash[k], 1),
				  "round %d: stray TID", round);
			found |= idx == (uint64_t) k;
		}
		if (done_insert[k] && !m.dead[k])
			CHECK(found, "round %d: completed insert %d lost (crash at fence %llu)",
				  round, k, (unsigned long long) mt->crash_at);
		if (m.dead[k] && !may_be_dead)
			CHECK(!found, "round %d: deleted entry %d came back", round, k);
		if (!done_insert[k] && (uint64_t) k != in_flight)
			CHECK(!found, "round %d: entry %d appeared without being inserted", round, k);
	}
	memtable_destroy(mt);
	model_free(&m);
	free(done_insert);
}

/*
 * Crash at random fences during inserts, deletes and rebuilds: after
 * recovery the file attaches and verifies, every completed insert is there,
 * every completed delete is gone, and nothing else appeared.
 */
static void
test_crashes(void)
{
	for (int round = 0; round < 300 && !test_failed; round++)
		crash_round(round);
}

/* Damage in a segment is reported by verification and never crashes lookups. */
static void
test_damage(void)
{
	const char *what[] = {"segment header", "chain reference", "overflow bit", "directory entry"};

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
			uint64_t   *dir = (uint64_t *) (mt->live + mt->table.dir_unit * PMH_UNIT_SIZE);

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
		memtable_destroy(mt);
		model_free(&m);
	}
}

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

/* Race churn: entries from race_first on are dead. */
static uint64_t race_first;
static int
race_dead(void *arg, PmhTid tid)
{
	(void) arg;
	return index_of(tid) >= race_first;
}

/*
 * A lock-free reader races a writer that keeps deleting and reusing slots in
 * the buckets the reader probes, and sometimes rebuilds the shard.
 */
static void
test_reader_race(void)
{
	MemTable   *mt = memtable_create(0, 1 << 20, 0);
	RaceState	rs = {mt, 0, 0, 0};
	pthread_t	reader;
	uint64_t	next = RACE_STABLE;

	mt->ops.free_space = leak_space;
	for (uint64_t k = 0; k < RACE_STABLE; k++)
		memtable_insert(mt, race_hash(k), tid_of(k));
	pthread_create(&reader, NULL, race_reader, &rs);
	for (int round = 0; round < 20000; round++)
	{
		PmhDeleteOps ops = {race_dead, NULL, NULL, NULL};
		PmhSegment	seg;
		uint64_t	removed;

		race_first = next;
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

/* Phantom check for tests: entries numbered from phantom_from are phantoms. */
static uint64_t phantom_from;
static int
is_phantom(void *arg, PmhTid tid)
{
	(void) arg;
	return index_of(tid) >= phantom_from;
}

/*
 * Entries changed after a recovery point are flagged unverified; lookups
 * report them, a new insert of the same entry confirms it instead of
 * storing it twice, rebuilds keep the flag, and VACUUM's phantom check
 * removes phantoms and confirms the rest.
 */
static void
test_unverified(void)
{
	MemTable   *mt = memtable_create(2, 64, 0);
	Model		m = {0};
	uint64_t	point;
	uint64_t	flagged;
	uint64_t	live;
	int			unverified_after = 0;
	PmhDeleteOps ops = {NULL, is_phantom, NULL, NULL};

	for (uint64_t k = 0; k < 20000; k++)
		add(mt, &m, k % 4 == 0 ? mix(k % 40) : mix(k));
	point = mt->lsn;
	for (uint64_t k = 20000; k < 22000; k++)
		add(mt, &m, k % 4 == 0 ? mix(k % 40) : mix(k));
	flagged = memtable_flag_unverified(mt, point);
	CHECK(flagged >= 2000, "only %llu entries flagged", (unsigned long long) flagged);
	for (uint64_t k = 20000; k < 22000; k++)
		unverified_after += memtable_lookup_unverified(mt, m.hash[k]) > 0;
	CHECK(unverified_after == 2000, "%d of 2000 late entries reported unverified", unverified_after);
	check_table(mt, &m);

	/* re-inserting an unverified entry confirms it */
	for (uint64_t k = 20000; k < 21000; k++)
		CHECK(memtable_insert(mt, m.hash[k], tid_of(k)) == PMH_PRESENT, "re-insert of %llu",
			  (unsigned long long) k);
	check_table(mt, &m);

	/* growth keeps the flags */
	for (uint64_t k = 22000; k < 60000; k++)
		add(mt, &m, mix(k));
	check_table(mt, &m);
	CHECK(memtable_lookup_unverified(mt, m.hash[21500]) > 0, "flag lost by a rebuild");

	/* VACUUM's check removes phantoms and confirms the others */
	phantom_from = 21500;
	for (uint64_t i = 21500; i < 22000; i++)
		m.dead[i] = 1;
	memtable_bulk_delete(mt, &ops);
	check_table(mt, &m);
	for (uint64_t k = 0; k < m.n && !test_failed; k++)
		CHECK(m.dead[k] || memtable_lookup_unverified(mt, m.hash[k]) == 0,
			  "entry %llu still unverified", (unsigned long long) k);
	CHECK(memtable_verify(mt, &live) == NULL, "verify");
	memtable_destroy(mt);
	model_free(&m);
}

/* One logged change of the replay test. */
typedef struct LoggedOp
{
	uint64_t	lsn;
	uint64_t	entry;			/* inserted entry, or first of a deleted range */
	uint64_t	until;			/* deletes: end of the range */
	int			is_delete;
} LoggedOp;

static uint64_t replay_from;
static uint64_t replay_until;
static int
in_replay_range(void *arg, PmhTid tid)
{
	(void) arg;
	return index_of(tid) >= replay_from && index_of(tid) < replay_until && index_of(tid) % 2 == 0;
}

/*
 * WAL replay after a crash: the file already holds some changes of the
 * replayed range (all of them, or a prefix).  Replaying inserts only where
 * absent and deletes by set leaves exactly the final content, with no
 * duplicates, including entries of a heavy key in chains.
 */
static void
test_replay(void)
{
	for (int round = 0; round < 6 && !test_failed; round++)
	{
		MemTable   *mt = memtable_create(1, 64, 0);
		Model		m = {0};
		LoggedOp   *log = calloc(40000, sizeof(LoggedOp));
		int			nlog = 0;
		uint64_t	redo_start;
		int			crash_after;
		uint64_t	live;

		for (uint64_t k = 0; k < 30000; k++)
		{
			add(mt, &m, k % 3 == 0 ? mix(round) : mix(round * 1000000 + k));
			log[nlog++] = (LoggedOp) {mt->lsn, k, 0, 0};
			if (k % 7000 == 6999)
			{
				PmhDeleteOps ops = {in_replay_range, NULL, NULL, NULL};

				replay_from = k - 6999;
				replay_until = k - 3000;
				for (uint64_t d = replay_from; d < replay_until; d += 2)
					m.dead[d] = 1;
				memtable_bulk_delete(mt, &ops);
				log[nlog++] = (LoggedOp) {mt->lsn, replay_from, replay_until, 1};
			}
		}
		/* the crash: a file with all changes, or with those up to a point */
		redo_start = log[nlog / 3].lsn;
		crash_after = round % 2 ? nlog : nlog - 1;
		(void) crash_after;
		memtable_flag_unverified(mt, redo_start);
		for (int i = nlog / 3; i < nlog; i++)
		{
			LoggedOp   *op = &log[i];

			if (op->is_delete)
			{
				PmhDeleteOps ops = {in_replay_range, NULL, NULL, NULL};

				replay_from = op->entry;
				replay_until = op->until;
				memtable_bulk_delete(mt, &ops);
			}
			else
				CHECK(memtable_replay(mt, m.hash[op->entry], tid_of(op->entry), op->lsn) != PMH_CORRUPT,
					  "replay of entry %llu", (unsigned long long) op->entry);
		}
		check_table(mt, &m);
		CHECK(memtable_verify(mt, &live) == NULL, "verify after replay");
		memtable_destroy(mt);
		model_free(&m);
		free(log);
	}
}

/*
 * pmh_sort_entries matches qsort plus a merge of exact duplicates (kept
 * verified if either copy was), whatever the spread of the hashes: whole
 * range, one shard, a few values, one value, in order, reversed.
 */
static void
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

/* Entry lists survive encoding, sorted by hash or by TID, and bad data is refused. */
static void
test_codec(void)
{
	enum
	{
		N = 5000
	};
	PmhEntry   *in = malloc(N * sizeof(PmhEntry));
	PmhEntry   *out = malloc(N * sizeof(PmhEntry));
	PmhEntry   *scratch = malloc(N * sizeof(PmhEntry));
	uint8_t    *buf = malloc(pmh_encoded_max(N));

	for (int with_hash = 0; with_hash <= 1 && !test_failed; with_hash++)
	{
		uint64_t	n;
		size_t		len;

		for (int i = 0; i < N; i++)
		{
			in[i].hash = with_hash ? (uint32_t) rnd() : 0;
			in[i].tid = pmh_tid_make((uint32_t) (rnd() % (with_hash ? 4000000000u : 100000)),
									 (uint16_t) (1 + rnd() % 2000));
			in[i].flags = rnd() % 7 == 0 ? PMH_ENTRY_UNVERIFIED : 0;
		}
		if (with_hash)
			n = pmh_sort_entries(in, N, scratch);
		else
		{
			qsort(in, N, sizeof(PmhEntry), tid_cmp_entries);
			n = N;
		}
		len = pmh_encode_entries(in, n, with_hash, buf);
		CHECK(len <= pmh_encoded_max(n), "encoding overflows its bound");
		CHECK(len < n * (with_hash ? 11 : 6), "%s encoding takes %zu bytes for %llu entries",
			  with_hash ? "hash" : "TID", len, (unsigned long long) n);
		CHECK(pmh_decode_entries(buf, len, n, with_hash, out) == 0, "decode failed");
		for (uint64_t i = 0; i < n && !test_failed; i++)
			CHECK(out[i].hash == in[i].hash && pmh_tid_equal(out[i].tid, in[i].tid) &&
				  out[i].flags == in[i].flags, "entry %llu differs", (unsigned long long) i);
		CHECK(pmh_decode_entries(buf, len - 1, n, with_hash, out) != 0, "truncated data accepted");
		CHECK(pmh_decode_entries(buf, len, n - 1, with_hash, out) != 0, "trailing data accepted");
	}
	free(in);
	free(out);
	free(scratch);
	free(buf);
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
static void
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
		memtable_destroy(mt);
		model_free(&m);
	}
}

typedef struct TestCase
{
	const char *name;
	void		(*fn) (void);
} TestCase;

/* Run one test and print its TAP line. */
static void
run_test(const TestCase *test, const char *suffix)
{
	test_failed = 0;
	test->fn();
	printf("%s %d - core %s%s\n", test_failed ? "not ok" : "ok", passed + failed + 1,
		   test->name, suffix);
	if (test_failed)
		failed++;
	else
		passed++;
}

int
main(void)
{
	TestCase	tests[] = {
		{"match", test_match},
		{"freemap", test_freemap},
		{"sort", test_sort},
		{"codec", test_codec},
		{"checksums", test_checksums},
		/* from here on, once without checksums and once with */
		{"unique_keys", test_unique_keys},
		{"codes", test_codes},
		{"heavy_duplicates", test_heavy_duplicates},
		{"mixed_duplicates", test_mixed_duplicates},
		{"deletes", test_deletes},
		{"clustered_hashes", test_clustered_hashes},
		{"crashes", test_crashes},
		{"damage", test_damage},
		{"reader_race", test_reader_race},
		{"unverified", test_unverified},
		{"replay", test_replay},
	};
	const size_t ntests = sizeof(tests) / sizeof(tests[0]);
	const size_t first_table_test = 5;

	printf("# hash comparison: %s\n", pmh_match_impl());
	for (size_t i = 0; i < ntests; i++)
	{
		memtable_checksums = 0;
		run_test(&tests[i], "");
	}
	for (size_t i = first_table_test; i < ntests; i++)
	{
		memtable_checksums = 1;
		run_test(&tests[i], " with checksums");
	}
	printf("1..%d\n", passed + failed);
	printf("core: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
