/*-------------------------------------------------------------------------
 *
 * test_crash.c
 *	  Core crash tests: the writer stops at a random persistence fence, a
 *	  random share of unflushed lines reaches the durable image, and every
 *	  completed change must survive recovery and nothing else appear, after
 *	  one crash and after a second one.
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

/*
 * After a crash: attach, recover as the access method does, verify, and
 * check every key's lookup against what completed.  in_flight is the key
 * whose insert the crash cut short, or UINT64_MAX - 1 for a delete.
 */
static void
check_crash(int round, MemTable *mt, Model *m, const uint8_t *done_insert,
			uint64_t in_flight, uint64_t durable_lsn)
{
	uint64_t	live;
	const char *err = memtable_attach(mt);

	CHECK(err == NULL, "round %d: attach after crash: %s", round, err);
	if (err == NULL)
	{
		/*
		 * recovery clears the torn slot of the change in flight and reseals
		 * what changed after the last durable change
		 */
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

		memtable_lookup(mt, m->hash[k], got, &ngot, 8192);
		for (int g = 0; g < ngot && g < 8192; g++)
		{
			uint64_t	idx = index_of(got[g]);

			CHECK(idx < 4000 && pmh_canonical_hash(m->hash[idx], 1) == pmh_canonical_hash(m->hash[k], 1),
				  "round %d: stray TID", round);
			found |= idx == (uint64_t) k;
		}
		if (done_insert[k] && !m->dead[k])
			CHECK(found, "round %d: completed insert %d lost (crash at fence %llu)",
				  round, k, (unsigned long long) mt->crash_at);
		if (m->dead[k] && !may_be_dead)
			CHECK(!found, "round %d: deleted entry %d came back", round, k);
		if (!done_insert[k] && (uint64_t) k != in_flight)
			CHECK(!found, "round %d: entry %d appeared without being inserted", round, k);
	}
}

/*
 * One crash round: run until a planned fence, crash, recover, check; then
 * finish the change cut short, as WAL replay and VACUUM would, and go on
 * to a second crash, which meets the leftovers of the first (an entry's
 * TID durable in a slot whose commit word was lost).
 */
static void
crash_round(int round)
{
	MemTable   *mt = memtable_create(1, 64, 1);
	Model		m = {0};
	uint8_t    *done_insert = calloc(4000, 1);
	volatile int next = 0;
	volatile uint64_t in_flight = UINT64_MAX;
	volatile uint64_t durable_lsn = 0;
	double		evict = (round % 3) / 2.0;

	mt->persist.drain = crashing_drain;
	for (int k = 0; k < 4000; k++)
		model_add(&m, (k % 5 == 0) ? mix(round) : mix(round * 100000 + k));

	for (int crash = 0; crash < 2 && !test_failed; crash++)
	{
		in_flight = UINT64_MAX;
		mt->crash_at = mt->drains + 20 + rnd() % 3000;
		if (setjmp(crash_jump) == 0)
		{
			for (int k = next; k < 4000; k++)
			{
				in_flight = k;
				durable_lsn = mt->lsn;
				memtable_insert(mt, m.hash[k], tid_of(k));
				done_insert[k] = 1;
				next = k + 1;
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
			break;
		}
		memtable_crash(mt, evict, rnd());
		check_crash(round, mt, &m, done_insert, in_flight, durable_lsn);
		if (in_flight == UINT64_MAX - 1)
			delete_dead(mt, &m);
		else if (in_flight < 4000)
		{
			CHECK(memtable_replay(mt, m.hash[in_flight], tid_of(in_flight), durable_lsn + 1) != PMH_CORRUPT,
				  "round %d: replay of the insert in flight", round);
			done_insert[in_flight] = 1;
			next = (int) in_flight + 1;
		}
	}
	free_table(mt, &m);
	free(done_insert);
}

/*
 * One round of a crash over a leftover: a free slot holds the TID of an
 * insert whose commit word an earlier crash lost, and the insert that takes
 * the slot crashes at one of its fences, keeping a random half of the
 * lines it changed.  Recovery must leave no entry with the old TID.
 */
static void
leftover_round(int round)
{
	MemTable   *mt = memtable_create(1, 64, 1);
	Model		m = {0};
	uint64_t	key = 0;
	uint64_t	durable_lsn;
	uint64_t	live;
	PmhSegment	seg;
	PmhBucket  *bucket = NULL;
	int			slot = 0;
	const char *err;

	mt->persist.drain = crashing_drain;
	for (int k = 0; k < 300 && !test_failed; k++)
		add(mt, &m, mix(round * 1000 + k));

	/* a new key whose home bucket has room, and its slot there */
	for (uint64_t k = 300; bucket == NULL; k++)
	{
		uint32_t	hash = pmh_canonical_hash(mix(round * 1000 + k), 1);
		uint32_t	code = pmh_hash_code(hash, 1);
		PmhBucket  *home;
		uint64_t	valid;

		memtable_segment(mt, pmh_slot_of(hash, 1), &seg);
		home = pmh_bucket(&seg, pmh_home_bucket(code, seg.nbuckets));
		valid = home->commit & PMH_VALID_MASK;
		if (valid == PMH_VALID_MASK)
			continue;
		key = model_add(&m, hash);
		bucket = home;
		slot = __builtin_ctzll(~valid);
		/* the leftover: another entry's TID under this key's code */
		bucket->slot[slot] = pmh_slot_value(code, tid_of(round % 300));
		memcpy(mt->durable + ((char *) &bucket->slot[slot] - mt->live),
			   &bucket->slot[slot], sizeof(PmhTid));
	}

	durable_lsn = mt->lsn;
	mt->crash_at = mt->drains + 1 + round % 2;
	if (setjmp(crash_jump) == 0)
		memtable_insert(mt, m.hash[key], tid_of(key));
	memtable_crash(mt, 0.5, rnd());
	err = memtable_attach(mt);
	CHECK(err == NULL, "round %d: attach after crash: %s", round, err);
	if (err != NULL)
	{
		free_table(mt, &m);
		return;
	}
	memtable_flag_unverified(mt, durable_lsn);
	err = memtable_verify(mt, &live);
	CHECK(err == NULL, "round %d: verify after crash: %s", round, err);
	for (uint64_t k = 0; k <= key && !test_failed; k++)
	{
		PmhTid		got[64];
		int			ngot;

		memtable_lookup(mt, m.hash[k], got, &ngot, 64);
		for (int g = 0; g < ngot && g < 64; g++)
			CHECK(index_of(got[g]) == k ||
				  pmh_canonical_hash(m.hash[index_of(got[g])], 1) == m.hash[k],
				  "round %d: key %llu finds the leftover TID of entry %llu", round,
				  (unsigned long long) k, (unsigned long long) index_of(got[g]));
	}
	free_table(mt, &m);
}

/* What the phantom check of a crash between commits knows. */
typedef struct CommitModel
{
	const Model *m;
	uint64_t	committed;		/* entries [0, committed) were committed */
	uint8_t    *undone;			/* deleted since the last commit: may return */
} CommitModel;

/* Dead-TID callback after a crash between commits: the model's dead entries. */
static int
committed_dead(void *arg, uint32_t hash, PmhTid tid)
{
	const CommitModel *cm = arg;
	uint64_t	i = index_of(tid);

	(void) hash;
	return i < cm->m->n && cm->m->dead[i] && pmh_tid_cmp(tid, tid_of(i)) == 0;
}

/*
 * Phantom callback after a crash between commits: an entry is real only if
 * a committed insert stored it, as a heap check finds a committed row with
 * that TID and hash; anything else a crash left is a phantom.
 */
static PmhPhantomVerdict
committed_verdict(void *arg, uint32_t hash, PmhTid tid)
{
	const CommitModel *cm = arg;
	uint64_t	i = index_of(tid);

	if (i < cm->committed && !cm->m->dead[i] && pmh_tid_cmp(tid, tid_of(i)) == 0 &&
		hash == cm->m->hash[i])
		return PMH_VERDICT_REAL;
	return PMH_VERDICT_PHANTOM;
}

/*
 * One round of a crash between commits: the access method's way of
 * persisting, where single-entry changes are flushed without a fence and
 * made durable at commit, so a crash may keep any share of the lines
 * changed since, in any order (a commit word without its slot, say).
 */
static void
commit_crash_round(int round)
{
	MemTable   *mt = memtable_create(1, 64, 1);
	Model		m = {0};
	CommitModel cm = {&m, 0, calloc(4000, 1)};
	PmhDeleteOps vacuum = {committed_dead, committed_verdict, NULL, &cm};
	uint64_t	point = 0;
	uint64_t	stop = 200 + rnd() % 3800;
	uint64_t	live;
	const char *err;
	int			cap = 8192;
	PmhTid	   *got = malloc(cap * sizeof(PmhTid));

	memtable_defer_drains(mt);
	for (uint64_t k = 0; k < stop && !test_failed; k++)
	{
		add(mt, &m, (k % 5 == 0) ? mix(round) : mix(round * 100000 + k));
		if (k % 1000 == 999)
		{
			/* VACUUM deletes a third of what is there; it syncs at its end */
			for (uint64_t d = 0; d <= k; d++)
			{
				cm.undone[d] |= !m.dead[d] && d % 3 == 0;
				m.dead[d] = m.dead[d] || d % 3 == 0;
			}
			delete_dead(mt, &m);
		}
		if (rnd() % 16 == 0 || (k % 1000 == 999 && rnd() % 2 == 0))
		{
			memtable_commit(mt);
			cm.committed = m.n;
			memset(cm.undone, 0, 4000);
			point = mt->lsn;
		}
	}
	memtable_crash(mt, (round % 3) / 2.0, rnd());
	err = memtable_attach(mt);
	CHECK(err == NULL, "round %d: attach after crash: %s", round, err);
	if (err == NULL)
	{
		memtable_flag_unverified(mt, point);
		err = memtable_verify(mt, &live);
		CHECK(err == NULL, "round %d: verify after crash: %s", round, err);
	}
	for (uint64_t k = 0; k < m.n && !test_failed && err == NULL; k++)
	{
		int			ngot;
		int			found = 0;
		int			extra = 0;
		PmhStatus	st = memtable_lookup(mt, m.hash[k], got, &ngot, cap);

		CHECK(st == PMH_OK, "round %d: lookup of entry %llu after crash: status %d", round,
			  (unsigned long long) k, st);
		for (int g = 0; g < ngot && g < cap; g++)
		{
			uint64_t	i = index_of(got[g]);

			found |= pmh_tid_cmp(got[g], tid_of(k)) == 0;
			/* an entry whose delete was not synced may return as it was */
			if (i < m.n && cm.undone[i] && pmh_tid_cmp(got[g], tid_of(i)) == 0 &&
				m.hash[i] == m.hash[k])
				continue;
			extra += committed_verdict(&cm, m.hash[k], got[g]) == PMH_VERDICT_PHANTOM;
		}
		if (k < cm.committed && !m.dead[k])
			CHECK(found, "round %d: committed entry %llu lost", round, (unsigned long long) k);
		CHECK(extra <= memtable_lookup_unverified(mt, m.hash[k]),
			  "round %d: %d entries under entry %llu's hash are neither committed nor unverified",
			  round, extra, (unsigned long long) k);
	}
	/* VACUUM removes dead entries and, by its phantom check, what else the crash left */
	if (!test_failed && err == NULL)
	{
		CHECK(memtable_bulk_delete(mt, &vacuum) != UINT64_MAX, "round %d: VACUUM after crash",
			  round);
		for (uint64_t k = cm.committed; k < m.n; k++)
			m.dead[k] = 1;
		check_table(mt, &m);
	}
	free(got);
	free(cm.undone);
	free_table(mt, &m);
}

/*
 * Crash between commits, as the access method persists: after recovery's
 * flagging every committed entry is there, no lookup or verification finds
 * damage, anything else is unverified, and VACUUM's phantom check leaves
 * exactly the committed entries.
 */
void
test_crashes_between_commits(void)
{
	for (int round = 0; round < 300 && !test_failed; round++)
		commit_crash_round(round);
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

/*
 * Crash an insert into a free slot that an earlier crash left holding an
 * uncommitted entry's TID: the slot must be durable before its commit word,
 * or the old TID would come back under the new key.
 */
void
test_crashes_over_leftovers(void)
{
	for (int round = 0; round < 300 && !test_failed; round++)
		leftover_round(round);
}

/*
 * A split cut short at each of its fences, with none, half or all of the
 * lines changed since the last fence reaching the durable image: after
 * attaching again (which finishes a split whose map moved but whose lower
 * half was not published), every key is found through the map, the file
 * verifies, and the next split works.  The fences are tried in turn, each
 * with none, half and all of those lines kept, until one is past the
 * split's last.  Two splits: the first of a level, and the one that ends
 * it, which also moves the descriptors (the map then names the old array
 * or the new one, whole).
 */
void
test_split_crashes(void)
{
	for (volatile int wrap = 0; wrap <= 1 && !test_failed; wrap++)
	{
		volatile int completed = 0;
		/* half the keys in the shard that splits: slot 0, or slot 511 */
		uint32_t	prefix = wrap ? UINT32_C(0x1FF) << 23 : 0;

		for (volatile uint64_t try = 3; !completed && !test_failed; try++)
		{
			uint64_t	at = try / 3;
			MemTable   *mt = memtable_create(9, 1024, 1);
			Model		m = {0};
			uint64_t	map;

			for (int k = 0; k < 3000; k++)
				add(mt, &m, k % 2 ? (mix(k) >> 9) | prefix : mix(k));
			while (wrap && pmh_map_split(mt->map) < 511 && !test_failed)
				CHECK(memtable_split(mt) == PMH_OK, "split %u before the last of the level",
					  pmh_map_split(mt->map));
			memtable_commit(mt);
			map = mt->map;
			mt->persist.drain = crashing_drain;
			mt->crash_at = mt->drains + at;
			if (setjmp(crash_jump) == 0)
			{
				CHECK(memtable_split(mt) == PMH_OK, "%s, fence %llu: split failed",
					  wrap ? "last split" : "first split", (unsigned long long) at);
				completed = 1;
			}
			memtable_crash(mt, (try % 3) / 2.0, rnd());
			CHECK(memtable_attach(mt) == NULL, "%s, fence %llu: attach after the crash",
				  wrap ? "last split" : "first split", (unsigned long long) at);
			CHECK(mt->map == map ||
				  pmh_map_slots(mt->map) == pmh_map_slots(pmh_map_next(map)),
				  "%s, fence %llu: map level %u split %u", wrap ? "last split" : "first split",
				  (unsigned long long) at, pmh_map_level(mt->map), pmh_map_split(mt->map));
			check_table(mt, &m);
			CHECK(memtable_split(mt) == PMH_OK, "%s, fence %llu: the next split",
				  wrap ? "last split" : "first split", (unsigned long long) at);
			check_and_free(mt, &m);
		}
	}
}
