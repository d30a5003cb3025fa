/*-------------------------------------------------------------------------
 *
 * pmrecheck.c
 *	  Which "= ANY(array)" conditions of pmhash scans the executor rechecks
 *	  with a hash table.
 *
 * A pmhash scan returns every row stored under a key's hash code, so the
 * executor rechecks the condition on each row.  For "col = ANY(array)" that
 * recheck costs a row O(elements), unless the planner gave the condition a
 * hash function (ScalarArrayOpExpr.hashfuncid): PostgreSQL 15 does so when
 * the array is a constant of at least 9 elements whose operator hashes both
 * sides alike, and the executor then builds a hash table of the elements
 * once and probes it for each row.  pmscan.c compares candidates' keys
 * itself only when the recheck is not hashed (a parameter array, as generic
 * plans have): for a hashed one that would read each row's key twice.
 *
 * An access method is not told what the recheck looks like, so this
 * ExecutorStart hook tells it: in every pmhash index scan and bitmap index
 * scan of the plan it sets PMHASH_SK_RECHECK_HASHED, a flag of the bits
 * PostgreSQL leaves to access methods, on each array scan key whose
 * condition has a hash function and whose array is the constant of that
 * condition (the scan key holds the constant's own datum).  The flag only
 * chooses between two correct ways to filter: a wrong choice costs time,
 * never a row.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmrecheck.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relscan.h"
#include "executor/executor.h"
#include "nodes/nodeFuncs.h"
#include "utils/rel.h"

#include "pmhash.h"

static ExecutorStart_hook_type prev_executor_start = NULL;

/*
 * Flag the array keys of one pmhash scan whose condition, the entry of
 * indexqual at the same position, the executor rechecks with a hash table.
 */
static void
flag_keys(Relation index, List *indexqual, ScanKey keys, int nkeys)
{
	if (index == NULL || index->rd_indam->amrescan != pmhashrescan ||
		list_length(indexqual) != nkeys)
		return;
	for (int i = 0; i < nkeys; i++)
	{
		Node	   *qual = list_nth(indexqual, i);
		ScalarArrayOpExpr *saop;
		Node	   *array;

		if (!(keys[i].sk_flags & SK_SEARCHARRAY) || !IsA(qual, ScalarArrayOpExpr))
			continue;
		saop = (ScalarArrayOpExpr *) qual;
		array = (Node *) lsecond(saop->args);
		if (IsA(array, RelabelType))
			array = (Node *) ((RelabelType *) array)->arg;
		if (OidIsValid(saop->hashfuncid) && IsA(array, Const) &&
			!((Const *) array)->constisnull &&
			((Const *) array)->constvalue == keys[i].sk_argument)
			keys[i].sk_flags |= PMHASH_SK_RECHECK_HASHED;
	}
}

/* Flag the hashed array keys of every pmhash scan under a plan node. */
static bool
flag_scans(PlanState *ps, void *context)
{
	if (ps == NULL)
		return false;
	if (IsA(ps, IndexScanState))
	{
		IndexScanState *iss = (IndexScanState *) ps;

		flag_keys(iss->iss_RelationDesc, ((IndexScan *) ps->plan)->indexqual,
				  iss->iss_ScanKeys, iss->iss_NumScanKeys);
	}
	else if (IsA(ps, BitmapIndexScanState))
	{
		BitmapIndexScanState *biss = (BitmapIndexScanState *) ps;
		List	   *indexqual = ((BitmapIndexScan *) ps->plan)->indexqual;

		flag_keys(biss->biss_RelationDesc, indexqual,
				  biss->biss_ScanKeys, biss->biss_NumScanKeys);
		/* a scan without runtime keys was given its keys at its start */
		if (biss->biss_ScanDesc != NULL)
			flag_keys(biss->biss_RelationDesc, indexqual,
					  biss->biss_ScanDesc->keyData, biss->biss_ScanDesc->numberOfKeys);
	}
	return planstate_tree_walker(ps, flag_scans, context);
}

/* ExecutorStart hook: flag the array keys whose recheck is hashed. */
static void
pmhash_recheck_executor_start(QueryDesc *queryDesc, int eflags)
{
	if (prev_executor_start)
		prev_executor_start(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);

	if (!(eflags & EXEC_FLAG_EXPLAIN_ONLY))
		flag_scans(queryDesc->planstate, NULL);
}

/* Install the ExecutorStart hook. */
void
pmhash_recheck_init(void)
{
	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = pmhash_recheck_executor_start;
}
