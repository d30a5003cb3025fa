/*-------------------------------------------------------------------------
 *
 * test_modify.c
 *	  Core tests of inserts and deletes (src/core/pmh_modify.c): duplicates
 *	  and posting chains, bulk and single deletes, unverified entries, WAL
 *	  replay and the overflow bits recovery sets again after a crash.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/core/test_modify.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>

#include "test_util.h"
#include "../../src/core/pmh_internal.h"

/* Whether a chain holds a TID (the chain itself is stable). */
static int
chain_contains(const PmhPosting *first, PmhTid tid)
{
	for (uint32_t j = 0; j < first->nblocks; j++)
	{
		const PmhPosting *blk = first + j;
		uint64_t	valid = blk->commit & PMH_POSTING_VALID_MASK;

		while (valid)
		{
			int			i = __builtin_ctzll(valid);

			valid &= valid - 1;
			if (pmh_tid_equal(blk->tid[i], tid))
				return 1;
		}
	}
	return 0;
}

/* Whether the segment holds the entry (hash, tid), walking it as a lookup would. */
static int
segment_contains(const PmhSegment *seg, uint32_t hash, PmhTid tid)
{
	uint32_t	nbuckets = seg->nbuckets;
	uint32_t	code = pmh_hash_code(hash, seg->shard_bits);
	uint32_t	b;

	if (nbuckets == 0)
		return 0;
	b = pmh_home_bucket(code, nbuckets);
	for (uint32_t step = 0; step < nbuckets; step++)
	{
		PmhBucket  *bucket = pmh_bucket(seg, b);
		uint64_t	c = bucket->commit;
		uint32_t	mask = pmh_match_code(bucket, code) & (uint32_t) c;

		while (mask)
		{
			int			i = __builtin_ctz(mask);
			PmhTid		slot = pmh_slot_tid(bucket, i);

			mask &= mask - 1;
			if (pmh_is_chain_ref(slot))
			{
				PmhPosting *first = pmh_chain_first(seg, slot, code);

				if (first && chain_contains(first, tid))
					return 1;
			}
			else if (pmh_tid_equal(slot, tid))
				return 1;
		}
		if (!(c & PMH_OVERFLOW_BIT))
			return 0;
		b = pmh_next_bucket(b, nbuckets);
	}
	return 0;
}

/*
 * Inserts into a bucket take the slots that need no fence before their
 * commit word first (tags in its first line, TIDs within one line): one
 * drain each until only slots 6 and 16 to 27 are left.
 */
void
test_unfenced_slots(void)
{
	MemTable   *mt = memtable_create(0, 64, 1);
	Model		m = {0};
	PmhSegment	seg;
	uint64_t	valid;

	/* the first insert builds a segment of one bucket, filled from its last slot */
	add(mt, &m, mix(1));
	for (uint64_t k = 2; k <= 16 && !test_failed; k++)
	{
		uint64_t	drains = mt->drains;

		add(mt, &m, mix(k));
		CHECK(mt->drains == drains + 1, "insert %llu took %llu drains",
			  (unsigned long long) k, (unsigned long long) (mt->drains - drains));
	}
	memtable_segment(mt, 0, &seg);
	CHECK(seg.nbuckets == 1, "the segment grew to %u buckets", seg.nbuckets);
	valid = pmh_bucket(&seg, 0)->commit & PMH_VALID_MASK;
	CHECK(valid == (UINT64_C(0xffbf) | UINT64_C(1) << 27),
		  "slots taken %#llx, not 0 to 15 but 6, and 27", (unsigned long long) valid);
	add(mt, &m, mix(17));
	valid = pmh_bucket(&seg, 0)->commit & PMH_VALID_MASK;
	CHECK(valid & (UINT64_C(1) << 6), "the 17th entry did not take slot 6");
	check_and_free(mt, &m);
}

/* One key with 100,000 rows among others: chains hold them all. */
void
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
	free_table(mt, &m);
}

/* Many keys with 1 to 40 copies each, in random order, around the chain threshold. */
void
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
	check_and_free(mt, &m);
}

/* Whether a TID field is all zero. */
static int
blank(const PmhTid *field)
{
	return field->block_hi == 0 && field->block_lo == 0 && field->offset == 0;
}

/*
 * Every free slot of every bucket and posting block holds no TID: deletes
 * blank what they free, so that a crash tearing a later insert there
 * cannot show an old TID (src/README, durability hazard 2).
 */
static void
check_free_slots_blank(MemTable *mt)
{
	uint32_t	nshards = UINT32_C(1) << mt->table.shard_bits;

	for (uint32_t s = 0; s < nshards && !test_failed; s++)
	{
		PmhSegment	seg;

		memtable_segment(mt, s, &seg);
		for (uint32_t b = 0; b < seg.nbuckets && !test_failed; b++)
		{
			const PmhBucket *bucket = pmh_bucket(&seg, b);

			for (uint64_t f = ~bucket->commit & PMH_VALID_MASK; f; f &= f - 1)
				CHECK(blank(&bucket->slot[__builtin_ctzll(f)]),
					  "shard %u bucket %u: free slot %d holds a TID", s, b, __builtin_ctzll(f));
		}
		for (uint32_t j = 0; j < seg.nposting && !test_failed; j++)
		{
			const PmhPosting *blk = pmh_posting(&seg, (uint64_t) seg.nbuckets + 1 + j);

			for (uint64_t f = ~blk->commit & PMH_POSTING_VALID_MASK; f; f &= f - 1)
				CHECK(blank(&blk->tid[__builtin_ctzll(f)]),
					  "shard %u posting block %u: free slot %d holds a TID", s, j,
					  __builtin_ctzll(f));
		}
	}
}

/* Deletes: bulk and single, shrinking, and reuse of freed space. */
void
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
	check_free_slots_blank(mt);

	/* presence, then a sparse delete */
	for (uint64_t i = 0; i < m.n && !test_failed; i += 7)
	{
		uint32_t	slot = pmh_slot_of(m.hash[i], 4);
		PmhSegment	seg;

		memtable_segment(mt, slot, &seg);
		CHECK(segment_contains(&seg, m.hash[i], tid_of(i)) == !m.dead[i], "contains entry %llu",
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
	free_table(mt, &m);
}

/* What test_unverified's phantom check decides, and what it was asked. */
typedef struct PhantomCheck
{
	const Model *m;
	uint32_t	shard_bits;
	uint64_t	first_undecided;	/* entries from here on stay unverified */
	uint64_t	first_phantom;	/* entries from here on are phantoms */
	uint64_t	wrong_hash;		/* calls with another hash than the entry's */
} PhantomCheck;

/* Phantom callback: the verdict by entry number; checks the hash given. */
static PmhPhantomVerdict
entry_verdict(void *arg, uint32_t hash, PmhTid tid)
{
	PhantomCheck *pc = arg;
	uint64_t	i = index_of(tid);

	if (hash != pmh_canonical_hash(pc->m->hash[i], pc->shard_bits))
		pc->wrong_hash++;
	if (i >= pc->first_phantom)
		return PMH_VERDICT_PHANTOM;
	return i >= pc->first_undecided ? PMH_VERDICT_UNDECIDED : PMH_VERDICT_REAL;
}

/*
 * Entries changed after a recovery point are flagged unverified; lookups
 * report them, a new insert of the same entry confirms it instead of
 * storing it twice, rebuilds keep the flag, and VACUUM's phantom check,
 * given each entry's hash, removes phantoms, confirms some and leaves the
 * undecided ones unverified.
 */
void
test_unverified(void)
{
	MemTable   *mt = memtable_create(2, 64, 0);
	Model		m = {0};
	PhantomCheck pc = {&m, 2, 21200, 21500, 0};
	uint64_t	point;
	uint64_t	flagged;
	uint64_t	live;
	int			unverified_after = 0;
	PmhDeleteOps ops = {NULL, entry_verdict, NULL, &pc};

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

	/* VACUUM's check removes phantoms, confirms and leaves undecided */
	for (uint64_t i = pc.first_phantom; i < 22000; i++)
		m.dead[i] = 1;
	memtable_bulk_delete(mt, &ops);
	check_table(mt, &m);
	CHECK(pc.wrong_hash == 0, "%llu phantom checks got another hash",
		  (unsigned long long) pc.wrong_hash);
	/* a lookup finds the undecided entries of its key's slot code */
	for (uint64_t k = 0; k < m.n && !test_failed; k++)
	{
		uint32_t	code = pmh_canonical_hash(m.hash[k], pc.shard_bits);
		int			undecided = 0;

		for (uint64_t j = pc.first_undecided; j < pc.first_phantom; j++)
			undecided |= pmh_canonical_hash(m.hash[j], pc.shard_bits) == code;
		CHECK(m.dead[k] || (memtable_lookup_unverified(mt, m.hash[k]) > 0) == undecided,
			  "entry %llu verified wrongly", (unsigned long long) k);
	}
	CHECK(memtable_verify(mt, &live) == NULL, "verify");
	free_table(mt, &m);
}

/* One logged change of the replay test. */
typedef struct LoggedOp
{
	uint64_t	lsn;
	uint64_t	entry;			/* inserted entry, or first of a deleted range */
	uint64_t	until;			/* deletes: end of the range */
	int			is_delete;
} LoggedOp;

static uint64_t replay_from;	/* range of entries a logged delete removes */
static uint64_t replay_until;

/* Dead-TID callback of a logged delete: every other entry of its range. */
static int
in_replay_range(void *arg, uint32_t hash, PmhTid tid)
{
	(void) arg;
	(void) hash;
	return index_of(tid) >= replay_from && index_of(tid) < replay_until && index_of(tid) % 2 == 0;
}

/*
 * WAL replay after a crash: the file already holds some changes of the
 * replayed range (all of them, or a prefix).  Replaying inserts only where
 * absent and deletes by set leaves exactly the final content, with no
 * duplicates, including entries of a heavy key in chains.
 */
void
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
		free_table(mt, &m);
		free(log);
	}
}

/*
 * A crash kept entries past the end of their runs but lost the overflow
 * bits their inserts set to reach them (an ordinary file's pages reach the
 * disk in any order).  Recovery's flagging reconnects every such entry,
 * whether its bucket was stamped after the recovery point (round 0: the
 * syncer's durable position precedes the inserts, and replay of the
 * committed half must store none twice) or before it (round 1: inserts of
 * transactions in flight at the checkpoint, synced by no commit).  The
 * entries whose insert is not replayed are then dead, and VACUUM removes
 * them.
 */
void
test_lost_overflow_bits(void)
{
	for (int round = 0; round < 2 && !test_failed; round++)
	{
		MemTable   *mt = memtable_create(2, 64, 0);
		Model		m = {0};
		uint32_t	nshards = UINT32_C(1) << mt->table.shard_bits;
		PmhSegment *before = calloc(nshards, sizeof(PmhSegment));
		uint64_t  **had_bit = calloc(nshards, sizeof(uint64_t *));
		uint64_t   *lsn_of = calloc(3000, sizeof(uint64_t));
		uint64_t	first_late;
		uint64_t	point;
		uint64_t	cleared = 0;

		for (uint64_t k = 0; k < 40000; k++)
			add(mt, &m, mix(k + 7 + round));
		/* the overflow bits so far, durable (rebuilds sync their segments) */
		for (uint32_t s = 0; s < nshards; s++)
		{
			memtable_segment(mt, s, &before[s]);
			had_bit[s] = calloc(before[s].nbuckets + 1, sizeof(uint64_t));
			for (uint32_t b = 0; b < before[s].nbuckets; b++)
				had_bit[s][b] = pmh_bucket(&before[s], b)->commit & PMH_OVERFLOW_BIT;
		}
		first_late = m.n;
		point = mt->lsn;
		for (uint64_t k = 0; k < 3000; k++)
		{
			add(mt, &m, mix(k + 1000007 + round));
			lsn_of[k] = mt->lsn;	/* the stamp of its insert, as its record says */
		}
		if (round == 1)
			point = mt->lsn;
		/* the crash: lose the bits set since, in shards no rebuild replaced */
		for (uint32_t s = 0; s < nshards; s++)
		{
			PmhSegment	seg;

			memtable_segment(mt, s, &seg);
			if (seg.base != before[s].base || seg.nbuckets != before[s].nbuckets)
				continue;
			for (uint32_t b = 0; b < seg.nbuckets; b++)
			{
				PmhBucket  *bucket = pmh_bucket(&seg, b);

				if ((bucket->commit & PMH_OVERFLOW_BIT) && !had_bit[s][b])
				{
					bucket->commit &= ~PMH_OVERFLOW_BIT;
					pmh_bucket_seal(&seg, bucket);
					cleared++;
				}
			}
		}
		CHECK(cleared > 0, "the later inserts set no overflow bit to lose");
		memtable_flag_unverified(mt, point);
		check_table(mt, &m);
		/* round 0: the first half committed, and its inserts are replayed */
		for (uint64_t i = first_late; round == 0 && i < first_late + 1500 && !test_failed; i++)
			CHECK(memtable_replay(mt, m.hash[i], tid_of(i), lsn_of[i - first_late]) == PMH_PRESENT,
				  "replay of entry %llu stored it again", (unsigned long long) i);
		check_table(mt, &m);
		for (uint64_t i = first_late + (round == 0 ? 1500 : 0); i < m.n; i++)
			m.dead[i] = 1;
		delete_dead(mt, &m);
		check_table(mt, &m);
		for (uint32_t s = 0; s < nshards; s++)
			free(had_bit[s]);
		free(had_bit);
		free(before);
		free(lsn_of);
		free_table(mt, &m);
	}
}
