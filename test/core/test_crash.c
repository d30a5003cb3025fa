/*-------------------------------------------------------------------------
 *
 * test_crash.c
 *	  Core crash tests: the writer stops at a random persistence fence, a
 *	  random share of unflushed lines reaches the durable image, and every
 *	  completed change must survive recovery and nothing else appear.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/core/test_crash.c
 *
 *-------------------------------------------------------------------------
 */
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static jmp_buf crash_jump;		/* where a run goes when it crashes */

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
		free_table(mt, &m);
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
	free_table(mt, &m);
	free(done_insert);
}

/*
 * Crash at random fences during inserts, deletes and rebuilds: after
 * recovery the file attaches and verifies, every completed insert is there,
 * every completed delete is gone, and nothing else appeared.
 */
void
test_crashes(void)
{
	for (int round = 0; round < 300 && !test_failed; round++)
		crash_round(round);
}
