/*-------------------------------------------------------------------------
 *
 * pmkey.c
 *	  Keys of heap tuples, computed as the index computes them, and their
 *	  comparison with the operator class's equality operator: what unique
 *	  indexes need, since a pmhash index stores hash codes, not keys.
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
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "pmhash.h"

/* Prepare to read keys of heap's tuples for index. */
void
pmhash_key_reader_begin(PmhashKeyReader *kr, Relation heap, Relation index, IndexInfo *info)
{
	Oid			opfamily = index->rd_opfamily[0];
	Oid			type = index->rd_opcintype[0];
	StrategyNumber strategy;
	Oid			eq = pmhash_equality_operator(opfamily, type, type, &strategy);

	if (!OidIsValid(eq))
		elog(ERROR, "missing equality operator (%u,%u) in operator family %u of index \"%s\"",
			 type, type, opfamily, RelationGetRelationName(index));
	kr->heap = heap;
	kr->index = index;
	kr->info = info;
	fmgr_info(get_opcode(eq), &kr->eq);
	kr->collation = index->rd_indcollation[0];
	kr->estate = info->ii_Expressions != NIL ? CreateExecutorState() : NULL;
	/* expression states prepared in our executor state die with it */
	kr->owns_expressions = info->ii_Expressions != NIL && info->ii_ExpressionsState == NIL;
	kr->slot = table_slot_create(heap, NULL);
	kr->fetch = table_index_fetch_begin(heap);
}

/*
 * Read the key of the tuple an index entry points to: the first tuple of
 * its HOT chain that snapshot accepts.  False if there is none, or if its
 * key is NULL.  The key stays valid until the next read or release.
 */
bool
pmhash_key_read(PmhashKeyReader *kr, ItemPointer tid, Snapshot snapshot, Datum *key)
{
	ItemPointerData htid = *tid;
	bool		call_again = false;
	bool		all_dead;
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];

	if (kr->estate != NULL)
		ResetPerTupleExprContext(kr->estate);
	if (!table_index_fetch_tuple(kr->fetch, &htid, snapshot, kr->slot, &call_again, &all_dead))
		return false;
	if (kr->estate != NULL)
		GetPerTupleExprContext(kr->estate)->ecxt_scantuple = kr->slot;
	FormIndexDatum(kr->info, kr->slot, kr->estate, values, isnull);
	*key = values[0];
	return !isnull[0];
}

/*
 * Read the key of the live (or in-progress) tuple of the HOT chain at tid,
 * the one the index holds the key of: older members of a chain that was
 * HOT-updated before the index existed (CREATE INDEX CONCURRENTLY) may
 * have other keys.  False if there is none, or if its key is NULL.
 */
bool
pmhash_key_read_live(PmhashKeyReader *kr, ItemPointer tid, Datum *key)
{
	SnapshotData dirty;

	InitDirtySnapshot(dirty);
	return pmhash_key_read(kr, tid, &dirty, key);
}

/* Whether two keys are equal by the operator class. */
bool
pmhash_keys_equal(PmhashKeyReader *kr, Datum a, Datum b)
{
	return DatumGetBool(FunctionCall2Coll(&kr->eq, kr->collation, a, b));
}

/* "(col)=(value)" of a key for an error's detail, or NULL if the user may not see it. */
char *
pmhash_key_description(Relation index, Datum key)
{
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];

	values[0] = key;
	isnull[0] = false;
	return BuildIndexValueDescription(index, values, isnull);
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
}
