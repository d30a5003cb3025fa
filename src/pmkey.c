/*-------------------------------------------------------------------------
 *
 * pmkey.c
 *	  Keys of heap tuples, computed as the index computes them, and their
 *	  comparison with the operator class's equality operator: what unique
 *	  indexes and the check of entries a crash left unverified need, since
 *	  a pmhash index stores hash codes, not keys.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmkey.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "executor/executor.h"
#include "storage/lmgr.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "pmhash.h"

/*
 * The hash code of a key, one Datum per key column; isnull (NULL if none
 * is) may mark columns after the first NULL, which fold in a hash of 0.
 */
uint32
pmhash_hash_key(Relation index, const Datum *key, const bool *isnull)
{
	int			nkeys = IndexRelationGetNumberOfKeyAttributes(index);
	uint32		code = 0;

	for (int i = 0; i < nkeys; i++)
	{
		uint32		column_hash = 0;

		if (isnull == NULL || !isnull[i])
			column_hash = DatumGetUInt32(FunctionCall1Coll(index_getprocinfo(index, i + 1, 1),
														   index->rd_indcollation[i], key[i]));
		code = i == 0 ? column_hash : pmhash_fold_hash(code, column_hash);
	}
	return code;
}

/* Prepare to read keys of heap's tuples for index. */
void
pmhash_key_reader_begin(PmhashKeyReader *kr, Relation heap, Relation index, IndexInfo *info)
{
	kr->nkeys = IndexRelationGetNumberOfKeyAttributes(index);
	kr->eq = palloc(kr->nkeys * sizeof(FmgrInfo));
	for (int i = 0; i < kr->nkeys; i++)
	{
		StrategyNumber strategy;

		fmgr_info(get_opcode(pmhash_column_equality(index, i, &strategy)), &kr->eq[i]);
	}
	kr->heap = heap;
	kr->index = index;
	kr->info = info;
	kr->estate = info->ii_Expressions != NIL || info->ii_Predicate != NIL ?
		CreateExecutorState() : NULL;
	/* expression states prepared in our executor state die with it */
	kr->owns_expressions = info->ii_Expressions != NIL && info->ii_ExpressionsState == NIL;
	kr->predicate = info->ii_Predicate != NIL ?
		ExecPrepareQual(info->ii_Predicate, kr->estate) : NULL;
	kr->slot = table_slot_create(heap, NULL);
	kr->fetch = table_index_fetch_begin(heap);
}

/* Whether a fetched tuple has a value stored out of line (TOAST). */
static bool
has_external_values(TupleTableSlot *slot)
{
	TupleDesc	desc = slot->tts_tupleDescriptor;

	slot_getallattrs(slot);
	for (int i = 0; i < desc->natts; i++)
	{
		if (TupleDescAttr(desc, i)->attlen == -1 && !slot->tts_isnull[i] &&
			VARATT_IS_EXTERNAL(DatumGetPointer(slot->tts_values[i])))
			return true;
	}
	return false;
}

/*
 * Fetch the next tuple of the HOT chain at *htid that snapshot accepts
 * (table_index_fetch_tuple's protocol: *call_again false for the first);
 * false at the chain's end.  *in_predicate says whether the tuple
 * satisfies the index's predicate (always, for an index without one); then
 * key and isnull (room for INDEX_MAX_KEYS) have its key.
 *
 * With unsettled (a dirty snapshot's reader), a tuple that another
 * transaction is inserting and that has values stored out of line is not
 * read: *unsettled is set instead.  Its inserter may delete its TOAST data
 * at any moment (a speculative insertion that loses to another arbiter),
 * or VACUUM may, once it aborts, so reading its key could fail with
 * "missing chunk"; the caller waits for the inserter and reads again, as
 * btree, which compares its own copy of the key, would have waited.
 */
static bool
fetch_key(PmhashKeyReader *kr, ItemPointer htid, Snapshot snapshot, bool *call_again,
		  Datum *key, bool *isnull, bool *in_predicate, bool *all_dead, bool *unsettled)
{
	*in_predicate = false;
	if (kr->estate != NULL)
		ResetPerTupleExprContext(kr->estate);
	if (!table_index_fetch_tuple(kr->fetch, htid, snapshot, kr->slot, call_again, all_dead))
		return false;
	if (unsettled != NULL && TransactionIdIsValid(snapshot->xmin) &&
		has_external_values(kr->slot))
	{
		*unsettled = true;
		return true;
	}
	if (kr->estate != NULL)
		GetPerTupleExprContext(kr->estate)->ecxt_scantuple = kr->slot;
	if (kr->predicate != NULL && !ExecQual(kr->predicate, GetPerTupleExprContext(kr->estate)))
		return true;
	FormIndexDatum(kr->info, kr->slot, kr->estate, key, isnull);
	*in_predicate = true;
	return true;
}

/*
 * Read the key of the tuple an index entry points to into key (room for
 * INDEX_MAX_KEYS): the first tuple of its HOT chain that snapshot accepts.
 * False if there is none, if it is outside a partial index's predicate, or
 * if a column of its key is NULL (such a key equals no other); then
 * *all_dead, if asked for, says whether the whole chain is dead to every
 * transaction.  With unsettled, for a dirty snapshot: also false, with
 * *unsettled set, for a tuple in another transaction's insertion with
 * TOASTed values (fetch_key), whose inserter is in snapshot->xmin.
 * By-reference values stay valid until the next read or release.
 */
bool
pmhash_key_read(PmhashKeyReader *kr, ItemPointer tid, Snapshot snapshot, Datum *key,
				bool *all_dead, bool *unsettled)
{
	ItemPointerData htid = *tid;
	bool		call_again = false;
	bool		in_predicate;
	bool		isnull[INDEX_MAX_KEYS];

	if (all_dead)
		*all_dead = false;
	if (unsettled)
		*unsettled = false;
	if (!fetch_key(kr, &htid, snapshot, &call_again, key, isnull, &in_predicate, all_dead,
				   unsettled) ||
		!in_predicate)
		return false;
	for (int i = 0; i < kr->nkeys; i++)
	{
		if (isnull[i])
			return false;
	}
	return true;
}

/*
 * Whether some tuple of the HOT chain at tid that a transaction may still
 * see is one the index holds an entry of, by the rules of an insert
 * (pmhashinsert): the tuple satisfies the predicate, its first key column
 * is not NULL, and, with_code, its key hashes to code (what a slot of a
 * file with shard_bits keeps).  Every such member is tried, since members
 * of a chain HOT-updated before CREATE INDEX CONCURRENTLY may differ in
 * key.  Tuples dead to every transaction are passed over: no scan needs an
 * entry of theirs, and an aborted one's TOAST data may be gone.
 */
static bool
chain_has_indexed(PmhashKeyReader *kr, ItemPointer tid, bool with_code, uint32 code,
				  uint32 shard_bits)
{
	ItemPointerData htid = *tid;
	bool		call_again = false;
	bool		in_predicate;
	Datum		key[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	SnapshotData not_dead;

	InitNonVacuumableSnapshot(not_dead, GlobalVisTestFor(kr->heap));
	while (fetch_key(kr, &htid, &not_dead, &call_again, key, isnull, &in_predicate, NULL, NULL))
	{
		if (in_predicate && !isnull[0] &&
			(!with_code ||
			 pmh_canonical_hash(pmhash_hash_key(kr->index, key, isnull), shard_bits) == code))
			return true;
		if (!call_again)
			break;
	}
	return false;
}

/*
 * Whether the index holds an entry of hash for some tuple of the HOT chain
 * at tid that a transaction may still see (chain_has_indexed).
 */
bool
pmhash_key_chain_holds(PmhashKeyReader *kr, ItemPointer tid, uint32 hash, uint32 shard_bits)
{
	return chain_has_indexed(kr, tid, true, pmh_canonical_hash(hash, shard_bits), shard_bits);
}

/*
 * Whether some tuple of the HOT chain at tid that a transaction may still
 * see is one the index holds an entry of, whatever its key: a partial
 * index's scans ask it of unverified TIDs, which may now hold a row
 * outside the predicate (src/README, durability hazard 1).
 */
bool
pmhash_key_chain_indexed(PmhashKeyReader *kr, ItemPointer tid)
{
	return chain_has_indexed(kr, tid, false, 0, 0);
}

/*
 * Read the key of the live (or in-progress) tuple of the HOT chain at tid,
 * the one the index holds the key of: older members of a chain that was
 * HOT-updated before the index existed (CREATE INDEX CONCURRENTLY) may
 * have other keys.  False if there is none, or if its key has a NULL.  A
 * tuple in another transaction's insertion whose TOAST data may vanish
 * (fetch_key) is read once its inserter is done (or its speculative
 * insertion settled).
 */
bool
pmhash_key_read_live(PmhashKeyReader *kr, ItemPointer tid, Datum *key)
{
	for (;;)
	{
		SnapshotData dirty;
		bool		unsettled;

		InitDirtySnapshot(dirty);
		if (pmhash_key_read(kr, tid, &dirty, key, NULL, &unsettled))
			return true;
		if (!unsettled)
			return false;
		pmhash_key_reader_release(kr);
		if (dirty.speculativeToken != 0)
			SpeculativeInsertionWait(dirty.xmin, dirty.speculativeToken);
		else
			XactLockTableWait(dirty.xmin, kr->heap, tid, XLTW_None);
	}
}

/* Whether two keys are equal by the operator classes, column by column. */
bool
pmhash_keys_equal(PmhashKeyReader *kr, const Datum *a, const Datum *b)
{
	for (int i = 0; i < kr->nkeys; i++)
	{
		if (!DatumGetBool(FunctionCall2Coll(&kr->eq[i], kr->index->rd_indcollation[i],
											a[i], b[i])))
			return false;
	}
	return true;
}

/*
 * A copy of a key in the current memory context.  The index's own
 * attributes are int4 (amkeytype, the hash code): a value's length and
 * passing come from its operator class's input type.
 */
Datum *
pmhash_key_copy(Relation index, const Datum *key)
{
	int			nkeys = IndexRelationGetNumberOfKeyAttributes(index);
	Datum	   *copy = palloc(nkeys * sizeof(Datum));

	for (int i = 0; i < nkeys; i++)
	{
		int16		typlen;
		bool		typbyval;

		get_typlenbyval(index->rd_opcintype[i], &typlen, &typbyval);
		copy[i] = datumCopy(key[i], typbyval, typlen);
	}
	return copy;
}

/* "(col, ...)=(value, ...)" of a key for an error's detail, or NULL if the user may not see it. */
char *
pmhash_key_description(Relation index, const Datum *key)
{
	bool		isnull[INDEX_MAX_KEYS] = {0};

	return BuildIndexValueDescription(index, (Datum *) key, isnull);
}

/* Drop the buffer pins of the last read (before waiting on a lock). */
void
pmhash_key_reader_release(PmhashKeyReader *kr)
{
	ExecClearTuple(kr->slot);
	table_index_fetch_reset(kr->fetch);
}

/* Release what the reader holds. */
void
pmhash_key_reader_end(PmhashKeyReader *kr)
{
	table_index_fetch_end(kr->fetch);
	ExecDropSingleTupleTableSlot(kr->slot);
	if (kr->estate != NULL)
		FreeExecutorState(kr->estate);
	if (kr->owns_expressions)
		kr->info->ii_ExpressionsState = NIL;
	pfree(kr->eq);
}
