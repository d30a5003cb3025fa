/*-------------------------------------------------------------------------
 *
 * pmunique.c
 *	  Inserting into a unique pmhash index: the uniqueness check of
 *	  UNIQUE_CHECK_YES and UNIQUE_CHECK_PARTIAL.
 *
 * The index stores hash codes, not keys: every entry stored under the new
 * key's hash is a candidate, whose heap tuple is fetched and whose key is
 * compared with the operator class's equality operator, with btree's
 * visibility rules.  Candidates are checked without the shard lock; the
 * entry goes in under the shard lock only if the candidates found there
 * then are the ones checked (src/README, Unique indexes).  Candidates
 * whose rows are dead to every transaction are removed after the insert,
 * as an index scan removes them (src/README, Dead entries).
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmunique.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/tableam.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/predicate.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "pmhash.h"

/* A set of TIDs, sorted once filled. */
typedef struct TidSet
{
	ItemPointer tids;
	int			n;
	int			max;
} TidSet;

/* The state of one unique insert, shared with its gate. */
typedef struct UniqueCheck
{
	uint32		hash;
	ItemPointerData self;		/* the TID being inserted */
	TidSet		fresh[2];		/* candidates not yet checked: verified, unverified */
	TidSet		checked[2];		/* candidates found not to conflict: likewise */
	bool		have_baseline;	/* share_gen and removals hold since the first check */
	uint32		share_gen;
	uint64		removals;
	PmhashKilled killed;		/* checked candidates dead to everyone, since then */
	bool		admit_all;		/* insert whatever the gate finds */
	bool		corrupt;		/* the gate's lookup failed its checksums */
	uint32		shard;
} UniqueCheck;

/* What checking the fresh candidates found. */
typedef enum Verdict
{
	NO_CONFLICT,
	CONFLICT,					/* a live tuple with an equal key */
	MUST_WAIT					/* one whose fate a running transaction decides */
} Verdict;

/* Add a TID to a set. */
static void
tidset_add(TidSet *set, const ItemPointerData *tid)
{
	if (set->n == set->max)
	{
		set->max = Max(set->max * 2, 16);
		set->tids = set->tids ? repalloc(set->tids, set->max * sizeof(ItemPointerData)) :
			palloc(set->max * sizeof(ItemPointerData));
	}
	set->tids[set->n++] = *tid;
}

/* Whether a sorted set holds a TID. */
static bool
tidset_has(const TidSet *set, const ItemPointerData *tid)
{
	return set->n > 0 &&
		bsearch(tid, set->tids, set->n, sizeof(ItemPointerData), pmhash_tid_cmp) != NULL;
}

/* Forget every verdict: the shard lost entries, or a transaction ended. */
static void
forget_checked(UniqueCheck *uc)
{
	uc->checked[0].n = uc->checked[1].n = 0;
	uc->have_baseline = false;
	uc->killed.ntids = 0;
}

/* Lookup sink of the gate: keep the candidates not checked yet. */
static void
gather_fresh(void *arg, const PmhTid *tids, int count, uint64 unverified)
{
	UniqueCheck *uc = arg;

	for (int i = 0; i < count; i++)
	{
		int			u = (unverified >> i) & 1;
		const ItemPointerData *tid = (const ItemPointerData *) &tids[i];

		if (!tidset_has(&uc->checked[u], tid))
			tidset_add(&uc->fresh[u], tid);
	}
}

/*
 * The gate of a unique insert, under the shard lock: admit it if no
 * candidate is unchecked and VACUUM removed nothing since the first check
 * (a removed entry's TID may since hold another key).  An entry that was
 * unverified when checked and is now confirmed counts as unchecked.
 */
static bool
admit_unique(void *arg, const PmhSegment *seg, const PmhashShardState *state, uint32 share_gen)
{
	UniqueCheck *uc = arg;

	if (uc->admit_all)
		return true;
	if (uc->have_baseline && (uc->share_gen != share_gen || uc->removals != state->removals))
		forget_checked(uc);
	uc->fresh[0].n = uc->fresh[1].n = 0;
	uc->shard = seg->slot;
	if (pmh_lookup(seg, uc->hash, gather_fresh, uc) != PMH_OK)
	{
		/* with writers locked out, only a checksum mismatch keeps a bucket busy */
		uc->corrupt = true;
		return false;
	}
	if (uc->fresh[0].n == 0 && uc->fresh[1].n == 0)
		return true;
	if (!uc->have_baseline)
	{
		uc->have_baseline = true;
		uc->share_gen = share_gen;
		uc->removals = state->removals;
		uc->killed.code = uc->hash;
		uc->killed.share_gen = share_gen;
		uc->killed.removals = state->removals;
		uc->killed.ntids = 0;
	}
	return false;
}

/*
 * Check one candidate against the key being inserted, as btree's
 * _bt_check_unique does: its tuple, if live or in a running transaction's
 * hands (SnapshotDirty), conflicts when its key is equal.  *all_dead says
 * whether its whole chain is dead to every transaction.  A tuple another
 * transaction is inserting with TOASTed values is waited for before its
 * key is read, since its TOAST data may vanish meanwhile (pmkey.c
 * fetch_key).
 */
static Verdict
check_candidate(PmhashKeyReader *kr, ItemPointer tid, const Datum *key, TransactionId *xwait,
				uint32 *token, bool *all_dead)
{
	SnapshotData dirty;
	Datum		other[INDEX_MAX_KEYS];
	bool		unsettled;

	InitDirtySnapshot(dirty);
	if (pmhash_key_read(kr, tid, &dirty, other, all_dead, &unsettled))
	{
		if (!pmhash_keys_equal(kr, key, other))
			return NO_CONFLICT;
	}
	else if (!unsettled)
		return NO_CONFLICT;
	*xwait = TransactionIdIsValid(dirty.xmin) ? dirty.xmin : dirty.xmax;
	*token = dirty.speculativeToken;
	return TransactionIdIsValid(*xwait) ? MUST_WAIT : CONFLICT;
}

/*
 * Check the candidates the gate found unchecked, moving those that do not
 * conflict to the checked sets.  Stops at the first that conflicts or
 * makes us wait, and says where.  Unverified entries past the end of the
 * heap are phantoms of a crash, with no tuple to fetch.
 */
static Verdict
check_fresh(UniqueCheck *uc, PmhashKeyReader *kr, const Datum *key, TransactionId *xwait,
			uint32 *token, ItemPointer where)
{
	BlockNumber nblocks = InvalidBlockNumber;
	Verdict		verdict = NO_CONFLICT;

	if (uc->fresh[1].n > 0)
		nblocks = RelationGetNumberOfBlocks(kr->heap);
	for (int u = 0; u < 2 && verdict == NO_CONFLICT; u++)
	{
		for (int i = 0; i < uc->fresh[u].n; i++)
		{
			ItemPointer tid = &uc->fresh[u].tids[i];
			bool		all_dead = false;

			CHECK_FOR_INTERRUPTS();
			if (!ItemPointerEquals(tid, &uc->self) &&
				!(u == 1 && ItemPointerGetBlockNumberNoCheck(tid) >= nblocks))
				verdict = check_candidate(kr, tid, key, xwait, token, &all_dead);
			if (verdict != NO_CONFLICT)
			{
				*where = *tid;
				break;
			}
			tidset_add(&uc->checked[u], tid);
			/* not a phantom's (src/README, Dead entries) */
			if (all_dead && u == 0)
				pmhash_add_killed(&uc->killed, tid);
		}
	}
	for (int u = 0; u < 2; u++)
	{
		if (uc->checked[u].n > 1)
			qsort(uc->checked[u].tids, uc->checked[u].n, sizeof(ItemPointerData), pmhash_tid_cmp);
	}
	return verdict;
}

/* Report a duplicate key, as btree does. */
static void
raise_duplicate(Relation index, Relation heap, const Datum *key)
{
	char	   *desc = pmhash_key_description(index, key);

	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("duplicate key value violates unique constraint \"%s\"",
					RelationGetRelationName(index)),
			 desc ? errdetail("Key %s already exists.", desc) : 0,
			 errtableconstraint(heap, RelationGetRelationName(index))));
}

/*
 * Insert the entry of a unique index's key.  UNIQUE_CHECK_YES raises a
 * duplicate, after waiting for any transaction that decides whether there
 * is one; UNIQUE_CHECK_PARTIAL (speculative insertion) never waits and
 * returns false if there may be a duplicate.  Either way the entry goes in
 * unless an error is raised.
 */
bool
pmhash_insert_unique(Relation index, Relation heap, IndexInfo *info, uint32 hash,
					 const Datum *key, ItemPointer tid, IndexUniqueCheck check)
{
	UniqueCheck uc;
	PmhashKeyReader kr;
	bool		reading = false;
	bool		unique = true;
	bool		rebuilt = false;

	memset(&uc, 0, sizeof(uc));
	uc.hash = hash;
	uc.self = *tid;
	for (;;)
	{
		PmhashLocal *ix = pmhash_open(index, &rebuilt);
		BlockNumber block = pmhash_predicate_block(ix, hash);
		bool		inserted = pmhash_insert_entry(index, ix, hash, tid,
												   rebuilt ? PMH_INSERT_IF_ABSENT : PMH_INSERT_NEW,
												   admit_unique, &uc);
		TransactionId xwait = InvalidTransactionId;
		uint32		token = 0;
		ItemPointerData where;
		Verdict		verdict;

		pmhash_leave();
		if (uc.corrupt)
			pmhash_raise_shard_damaged(RelationGetRelationName(index), uc.shard);
		if (inserted)
			break;
		if (!reading)
		{
			pmhash_key_reader_begin(&kr, heap, index, info);
			reading = true;
		}
		verdict = check_fresh(&uc, &kr, key, &xwait, &token, &where);
		if (verdict == NO_CONFLICT)
			continue;
		if (check == UNIQUE_CHECK_PARTIAL)
		{
			/* the executor rechecks, waiting if need be, after the insert */
			unique = false;
			uc.admit_all = true;
			continue;
		}
		if (verdict == MUST_WAIT)
		{
			pmhash_key_reader_release(&kr);
			if (token != 0)
				SpeculativeInsertionWait(xwait, token);
			else
				XactLockTableWait(xwait, heap, &where, XLTW_InsertIndex);
			forget_checked(&uc);
			continue;
		}

		/*
		 * A live duplicate; but none if the tuple being inserted is itself
		 * dead by now, as one that CREATE INDEX CONCURRENTLY validates may be
		 * (it checks the whole HOT chain, as btree does).
		 */
		pmhash_key_reader_release(&kr);
		where = *tid;
		if (!table_index_fetch_tuple_check(heap, &where, SnapshotSelf, NULL))
		{
			uc.admit_all = true;
			continue;
		}
		pmhash_key_reader_end(&kr);
		/* as btree: a serialization failure this insert meets comes first */
		CheckForSerializableConflictIn(index, NULL, block);
		raise_duplicate(index, heap, key);
	}
	if (reading)
		pmhash_key_reader_end(&kr);
	if (uc.killed.ntids > 0)
		pmhash_remove_killed(index, heap, &uc.killed);
	if (uc.killed.tids)
		pfree(uc.killed.tids);
	for (int u = 0; u < 2; u++)
	{
		if (uc.fresh[u].tids)
			pfree(uc.fresh[u].tids);
		if (uc.checked[u].tids)
			pfree(uc.checked[u].tids);
	}
	return unique;
}
