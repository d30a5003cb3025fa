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
 * The executor's hashed recheck hashes every element once more to build
 * its table, on the scan's first row.  In a plain index scan whose only
 * condition is such an array, the hook therefore replaces the recheck's
 * ExprState by one that evaluates the condition's left operand on the
 * fetched row and asks the scan whether it equals an element
 * (pmhash_scan_array_contains): the scan kept the elements it hashed and
 * sorted to probe.  Only executor state changes, never the plan, so cached
 * plans are untouched; EvalPlanQual's own copy of the plan state, set up
 * without this hook, keeps the executor's recheck, and so does the
 * replaced ExprState while the scan has kept no elements.
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
 * indexqual at the same position, the executor rechecks with a hash table;
 * false if the scan is no pmhash scan with a condition per key.
 */
static bool
flag_keys(Relation index, List *indexqual, ScanKey keys, int nkeys)
{
	if (index == NULL || index->rd_indam->amrescan != pmhashrescan ||
		list_length(indexqual) != nkeys)
		return false;
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
	return true;
}

/*
 * The recheck of a plain scan's hashed array condition by the elements the
 * scan hashed and sorted (pmscan.c), in place of the executor's own.
 */
typedef struct ElementRecheck
{
	IndexScanState *iss;
	ExprState  *value;			/* the condition's left operand */
	ExprState  *executor;		/* the executor's recheck of the condition */
} ElementRecheck;

/*
 * ExprState evaluation of an ElementRecheck: whether the scan tuple's
 * value equals an element; the executor's own recheck while the scan has
 * kept no elements.
 */
static Datum
recheck_by_elements(ExprState *state, ExprContext *econtext, bool *isnull)
{
	ElementRecheck *recheck = state->evalfunc_private;
	IndexScanDesc scan = recheck->iss->iss_ScanDesc;
	Datum		value;
	bool		value_null;

	if (scan == NULL || !pmhash_scan_kept_elements(scan))
		return ExecEvalExpr(recheck->executor, econtext, isnull);
	value = ExecEvalExpr(recheck->value, econtext, &value_null);
	*isnull = false;
	/* a NULL operand makes the condition NULL, which a qual takes as false */
	return BoolGetDatum(!value_null && pmhash_scan_array_contains(scan, value));
}

/*
 * Replace the recheck of a pmhash index scan whose one condition is a
 * flagged array (the scan keeps its elements) by an ElementRecheck: the
 * executor would hash every element again to build its table.  The
 * condition must be the recheck's only one, with the scan key's array.
 */
static void
replace_recheck(IndexScanState *iss, EState *estate)
{
	IndexScan  *plan = (IndexScan *) iss->ss.ps.plan;
	ScalarArrayOpExpr *probed;
	ScalarArrayOpExpr *rechecked;
	ElementRecheck *recheck;
	ExprState  *state;
	MemoryContext oldcontext;

	if (IndexRelationGetNumberOfKeyAttributes(iss->iss_RelationDesc) != 1 ||
		iss->iss_NumScanKeys != 1 || iss->iss_NumRuntimeKeys != 0 ||
		!(iss->iss_ScanKeys[0].sk_flags & PMHASH_SK_RECHECK_HASHED) ||
		list_length(plan->indexqual) != 1 || list_length(plan->indexqualorig) != 1 ||
		!IsA(linitial(plan->indexqualorig), ScalarArrayOpExpr))
		return;
	probed = linitial_node(ScalarArrayOpExpr, plan->indexqual);
	rechecked = linitial_node(ScalarArrayOpExpr, plan->indexqualorig);
	if (!rechecked->useOr || rechecked->opno != probed->opno ||
		rechecked->inputcollid != probed->inputcollid ||
		!equal(lsecond(rechecked->args), lsecond(probed->args)))
		return;
	oldcontext = MemoryContextSwitchTo(estate->es_query_cxt);
	recheck = palloc(sizeof(ElementRecheck));
	recheck->iss = iss;
	recheck->value = ExecInitExpr(linitial(rechecked->args), &iss->ss.ps);
	recheck->executor = iss->indexqualorig;
	state = makeNode(ExprState);
	state->flags = EEO_FLAG_IS_QUAL;
	state->expr = (Expr *) rechecked;
	state->parent = &iss->ss.ps;
	state->evalfunc = recheck_by_elements;
	state->evalfunc_private = recheck;
	iss->indexqualorig = state;
	MemoryContextSwitchTo(oldcontext);
}

/*
 * Flag the hashed array keys of every pmhash scan under a plan node, and
 * have plain scans recheck them by their own elements.
 */
static bool
flag_scans(PlanState *ps, void *context)
{
	if (ps == NULL)
		return false;
	if (IsA(ps, IndexScanState))
	{
		IndexScanState *iss = (IndexScanState *) ps;

		if (flag_keys(iss->iss_RelationDesc, ((IndexScan *) ps->plan)->indexqual,
					  iss->iss_ScanKeys, iss->iss_NumScanKeys))
			replace_recheck(iss, (EState *) context);
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
		flag_scans(queryDesc->planstate, queryDesc->estate);
}

/* Install the ExecutorStart hook. */
void
pmhash_recheck_init(void)
{
	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = pmhash_recheck_executor_start;
}
