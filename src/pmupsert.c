/*-------------------------------------------------------------------------
 *
 * pmupsert.c
 *	  INSERT ... ON CONFLICT into tables with unique pmhash indexes.
 *
 * PostgreSQL 15 prepares every unique index of the target table of an
 * INSERT ... ON CONFLICT for speculative insertion in
 * BuildSpeculativeIndexInfo (catalog/index.c), which raises "unexpected
 * non-btree speculative unique index" for any other access method than
 * btree.  The executor calls it from ExecOpenIndices, which ExecInsert runs
 * at the first row only if the result relation's indexes are not open yet.
 * This ExecutorStart hook opens them first, for each INSERT ... ON CONFLICT
 * whose table has a unique pmhash index, and prepares each unique index as
 * BuildSpeculativeIndexInfo would: btree's by that function, pmhash's with
 * the operator class's equality operator under pmhash's own strategy
 * number.  Nothing in the catalogs or the relcache changes; why this is
 * safe is in src/README, Unique indexes.  PostgreSQL 18's
 * BuildSpeculativeIndexInfo asks the access method for its equality
 * strategy instead, so there the hook leaves the preparation to core (also
 * for a partitioned table's partitions, which 15-17 refuse here).  On
 * every version, for every INSERT ... ON CONFLICT the hook makes the
 * transaction log its pmhash entries at once, since a speculative
 * insertion may be undone while it goes on (src/README, Dead entries).
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmupsert.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/index.h"
#include "catalog/indexing.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "commands/defrem.h"
#include "executor/executor.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "pmhash.h"

static ExecutorStart_hook_type prev_executor_start = NULL;

#if PG_VERSION_NUM < 180000
/*
 * From here to prepare_speculation: 15-17 only.  18's
 * BuildSpeculativeIndexInfo asks the access method for its equality
 * strategy (amtranslatecmptype), so core prepares unique pmhash indexes
 * itself, routed partitions' too.
 */

/* Whether an index is a unique pmhash index, from the catalog. */
static bool
is_unique_pmhash(Oid indexoid, Oid pmhash_am)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(indexoid));
	bool		result = false;

	if (!HeapTupleIsValid(tuple))
		return false;
	if (((Form_pg_class) GETSTRUCT(tuple))->relam == pmhash_am)
	{
		ReleaseSysCache(tuple);
		tuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(indexoid));
		if (!HeapTupleIsValid(tuple))
			return false;
		result = ((Form_pg_index) GETSTRUCT(tuple))->indisunique;
	}
	ReleaseSysCache(tuple);
	return result;
}

/* Whether any of these indexes is a unique pmhash index. */
static bool
any_unique_pmhash(List *indexoids, Oid pmhash_am)
{
	ListCell   *lc;

	foreach(lc, indexoids)
	{
		if (is_unique_pmhash(lfirst_oid(lc), pmhash_am))
			return true;
	}
	return false;
}

/* The indexes of a table, read from pg_index without opening the table. */
static List *
catalog_index_list(Oid relid)
{
	Relation	pg_index = table_open(IndexRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	List	   *result = NIL;

	ScanKeyInit(&key, Anum_pg_index_indrelid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan(pg_index, IndexIndrelidIndexId, true, NULL, 1, &key);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
		result = lappend_oid(result, ((Form_pg_index) GETSTRUCT(tuple))->indexrelid);
	systable_endscan(scan);
	table_close(pg_index, AccessShareLock);
	return result;
}

/*
 * Refuse ON CONFLICT through a partitioned table one of whose partitions
 * has a unique pmhash index: the executor opens a partition's indexes when
 * it routes the first row there, where no hook can prepare them.  The
 * partitions are locked as routing would lock them (RowExclusiveLock), so
 * that no unique pmhash index can appear on one (CREATE INDEX takes
 * ShareLock) between this check and the routing, which would then fail
 * with an internal error.
 */
static void
refuse_routed(Relation parent, Oid pmhash_am)
{
	List	   *children = find_all_inheritors(RelationGetRelid(parent), RowExclusiveLock, NULL);
	ListCell   *lc;

	foreach(lc, children)
	{
		Oid			child = lfirst_oid(lc);

		if (get_rel_relkind(child) != RELKIND_RELATION ||
			!any_unique_pmhash(catalog_index_list(child), pmhash_am))
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("INSERT ... ON CONFLICT through partitioned table \"%s\" is not supported with unique pmhash indexes on its partitions",
						RelationGetRelationName(parent)),
				 errdetail("Partition \"%s\" has a unique pmhash index.", get_rel_name(child)),
				 errhint("Insert into the partition itself; PostgreSQL 18 routes ON CONFLICT to such indexes.")));
	}
}

/*
 * Open a result relation's indexes and prepare its unique ones for
 * speculative insertion, in the executor's memory.
 */
static void
open_for_speculation(ResultRelInfo *rri)
{
	ExecOpenIndices(rri, false);
	for (int i = 0; i < rri->ri_NumIndices; i++)
	{
		Relation	index = rri->ri_IndexRelationDescs[i];
		IndexInfo  *ii = rri->ri_IndexRelationInfo[i];
		int			nkeys;

		if (!ii->ii_Unique)
			continue;
		if (index->rd_indam->aminsert != pmhashinsert)
		{
			BuildSpeculativeIndexInfo(index, ii);
			continue;
		}
		/* what BuildSpeculativeIndexInfo does for btree, with pmhash's strategy */
		nkeys = IndexRelationGetNumberOfKeyAttributes(index);
		ii->ii_UniqueOps = palloc(nkeys * sizeof(Oid));
		ii->ii_UniqueProcs = palloc(nkeys * sizeof(Oid));
		ii->ii_UniqueStrats = palloc(nkeys * sizeof(uint16));
		for (int k = 0; k < nkeys; k++)
		{
			ii->ii_UniqueOps[k] = pmhash_column_equality(index, k, &ii->ii_UniqueStrats[k]);
			ii->ii_UniqueProcs[k] = get_opcode(ii->ii_UniqueOps[k]);
		}
	}
}

/* Prepare the unique pmhash indexes of an ON CONFLICT target, or refuse it. */
static void
prepare_speculation(ResultRelInfo *rri)
{
	Relation	rel = rri->ri_RelationDesc;
	Oid			pmhash_am;

	/* no pmhash indexes in a database without the extension */
	pmhash_am = get_index_am_oid("pmhash", true);
	if (!OidIsValid(pmhash_am))
		return;
	if (rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
		refuse_routed(rel, pmhash_am);
	else if (rel->rd_rel->relhasindex && rri->ri_IndexRelationDescs == NULL &&
			 any_unique_pmhash(RelationGetIndexList(rel), pmhash_am))
		open_for_speculation(rri);
}
#endif

/* Prepare the target of one INSERT ... ON CONFLICT, if it needs us. */
static void
prepare_modify(ModifyTableState *mtstate)
{
	ModifyTable *plan = (ModifyTable *) mtstate->ps.plan;

	if (plan->onConflictAction == ONCONFLICT_NONE || plan->operation != CMD_INSERT)
		return;
	/* a row it inserts may die before its transaction ends */
	pmhash_log_inserts_at_once();
#if PG_VERSION_NUM < 180000
	prepare_speculation(mtstate->resultRelInfo);
#endif
}

/* ExecutorStart hook: prepare INSERT ... ON CONFLICT for unique pmhash indexes. */
static void
pmhash_executor_start(QueryDesc *queryDesc, int eflags)
{
	EState	   *estate;
	MemoryContext old;
	ListCell   *lc;

	if (prev_executor_start)
		prev_executor_start(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);

	if ((eflags & EXEC_FLAG_EXPLAIN_ONLY) ||
		!(queryDesc->operation == CMD_INSERT || queryDesc->plannedstmt->hasModifyingCTE))
		return;
	estate = queryDesc->estate;
	old = MemoryContextSwitchTo(estate->es_query_cxt);
	if (IsA(queryDesc->planstate, ModifyTableState))
		prepare_modify((ModifyTableState *) queryDesc->planstate);
	foreach(lc, estate->es_auxmodifytables)
		prepare_modify((ModifyTableState *) lfirst(lc));
	MemoryContextSwitchTo(old);
}

/* Install the ExecutorStart hook. */
void
pmhash_upsert_init(void)
{
	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = pmhash_executor_start;
}
