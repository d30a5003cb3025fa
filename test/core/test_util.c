/*-------------------------------------------------------------------------
 *
 * test_util.c
 *	  Shared parts of the core tests: the CHECK state, random numbers, the
 *	  model of what a test inserted and deleted, and the check of a table
 *	  against its model.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/core/test_util.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

int			test_failed;

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;	/* of rnd(), shared by every test */

/* Restart the random numbers of rnd() from a seed (never 0). */
void
rnd_seed(uint64_t seed)
{
	rng_state = seed ? seed : 0x9E3779B97F4A7C15ULL;
}

/* xorshift64* random numbers. */
uint64_t
rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ULL;
}

/* A well-mixed 32-bit hash of a key. */
uint32_t
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
PmhTid
tid_of(uint64_t i)
{
	return pmh_tid_make((uint32_t) (i / 250), (uint16_t) (i % 250 + 1));
}

/* The entry number a TID was made from. */
uint64_t
index_of(PmhTid tid)
{
	return (uint64_t) pmh_tid_block(tid) * 250 + tid.offset - 1;
}

/* Record an entry in the model. */
uint64_t
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
void
model_free(Model *m)
{
	free(m->hash);
	free(m->dead);
	memset(m, 0, sizeof(*m));
}

/* qsort comparator for TIDs. */
int
tid_cmp(const void *a, const void *b)
{
	return pmh_tid_cmp(*(const PmhTid *) a, *(const PmhTid *) b);
}

/* qsort comparator for 64-bit numbers. */
static int
u64_cmp(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *) a;
	uint64_t	y = *(const uint64_t *) b;

	return x < y ? -1 : x > y;
}

static const uint32_t *sort_hashes;	/* the hashes by_hash sorts by */

/* Order entry numbers by their hash (for grouping). */
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
void
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
void
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

/* Free a table and its model. */
void
free_table(MemTable *mt, Model *m)
{
	memtable_destroy(mt);
	model_free(m);
}

/* Check a table against its model, then free both. */
void
check_and_free(MemTable *mt, Model *m)
{
	check_table(mt, m);
	free_table(mt, m);
}

/* Insert an entry into table and model (which keeps the canonical hash). */
void
add(MemTable *mt, Model *m, uint32_t hash)
{
	uint64_t	i = model_add(m, pmh_canonical_hash(hash, mt->table.shard_bits));
	PmhStatus	st = memtable_insert(mt, hash, tid_of(i));

	CHECK(st == PMH_OK, "insert status %d", st);
}

/* Dead-entry callback over the model. */
static int
model_dead(void *arg, uint32_t hash, PmhTid tid)
{
	Model	   *m = arg;

	(void) hash;
	return m->dead[index_of(tid)];
}

/* Dead-entry callback: the entries numbered from *arg on. */
int
entry_from(void *arg, uint32_t hash, PmhTid tid)
{
	(void) hash;
	return index_of(tid) >= *(const uint64_t *) arg;
}

/* Bulk delete of what the model marks dead. */
uint64_t
delete_dead(MemTable *mt, Model *m)
{
	PmhDeleteOps ops = {model_dead, NULL, NULL, m};

	return memtable_bulk_delete(mt, &ops);
}
