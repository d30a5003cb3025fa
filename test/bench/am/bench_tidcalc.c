/*-------------------------------------------------------------------------
 *
 * bench_tidcalc.c
 *	  tidcalc: an index access method that computes the TID of a
 *	  pgbench_accounts row from its aid, for the bound of select-only.
 *
 * pgbench -i writes pgbench_accounts in aid order, the same number of rows
 * on every page, so the row of aid a sits at ((a - 1) / n, (a - 1) % n + 1)
 * with n the rows of the first page.  tidcalc stores nothing: its build
 * checks that every row of the table sits there (else it fails), and a
 * scan computes the one TID of its key, with no memory access beyond the
 * scan's own, and returns it without a recheck.  It is the cheapest index
 * an index scan can have: the statement time of select-only through it is
 * what no index on aid can beat, and its difference from the index-free
 * fetch by TID is what every index scan costs the executor (opening and
 * locking the index, its scan keys, the scan descriptor).
 *
 * A benchmark device, not an index: it refuses inserts, so the table must
 * stay as pgbench -i left it (select-only runs only); UPDATEs that do not
 * insert index entries (HOT) keep it right, since the heap follows the
 * chain from the TID it returns.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/bench/am/bench_tidcalc.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/amapi.h"
#include "catalog/pg_type.h"
#include "commands/vacuum.h"
#include "access/relscan.h"
#include "access/tableam.h"
#include "nodes/execnodes.h"
#include "nodes/pathnodes.h"
#include "storage/bufmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/selfuncs.h"

PG_FUNCTION_INFO_V1(tidcalc_handler);

/*
 * The layout: rows per page, and rows; a build's, or a scan's, cached per
 * backend in the index's relcache entry (rd_amcache).
 */
typedef struct TidcalcLayout
{
	int64		per_page;
	int64		rows;
} TidcalcLayout;

/* Scan state: whether the key's TID was returned. */
typedef struct TidcalcScan
{
	bool		done;
} TidcalcScan;

/* The number of tuples on page 0 of a table, or 0 if it is empty. */
static int64
first_page_rows(Relation heap)
{
	Buffer		buf;
	int64		n;

	if (RelationGetNumberOfBlocks(heap) == 0)
		return 0;
	buf = ReadBuffer(heap, 0);
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	n = PageGetMaxOffsetNumber(BufferGetPage(buf));
	UnlockReleaseBuffer(buf);
	return n;
}

/* The TID of key aid under rows-per-page n. */
static void
tid_of(int64 aid, int64 n, ItemPointer tid)
{
	ItemPointerSet(tid, (BlockNumber) ((aid - 1) / n), (OffsetNumber) ((aid - 1) % n + 1));
}

/* Build callback: fail unless the row of each aid sits where tid_of says. */
static void
check_row(Relation index, ItemPointer tid, Datum *values, bool *isnull, bool alive,
		  void *state)
{
	TidcalcLayout *bs = (TidcalcLayout *) state;
	ItemPointerData want;

	if (!alive)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("tidcalc needs a table without dead rows"),
				 errhint("VACUUM the table first.")));
	if (isnull[0] || DatumGetInt32(values[0]) < 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("tidcalc needs keys from 1 up")));
	tid_of(DatumGetInt32(values[0]), bs->per_page, &want);
	if (!ItemPointerEquals(&want, tid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("row of key %d is at (%u,%u), not at (%u,%u)", DatumGetInt32(values[0]),
						ItemPointerGetBlockNumber(tid), ItemPointerGetOffsetNumber(tid),
						ItemPointerGetBlockNumber(&want), ItemPointerGetOffsetNumber(&want))));
	bs->rows++;
}

/* ambuild: check the layout; store nothing. */
static IndexBuildResult *
tidcalc_build(Relation heap, Relation index, IndexInfo *indexInfo)
{
	IndexBuildResult *result = palloc0(sizeof(IndexBuildResult));
	TidcalcLayout bs;

	if (indexInfo->ii_NumIndexAttrs != 1 || TupleDescAttr(RelationGetDescr(index), 0)->atttypid != INT4OID)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("tidcalc indexes one int4 column")));
	bs.per_page = first_page_rows(heap);
	bs.rows = 0;
	if (bs.per_page > 0)
		result->heap_tuples = table_index_build_scan(heap, index, indexInfo, false, false,
													 check_row, &bs, NULL);
	result->index_tuples = bs.rows;
	return result;
}

/* ambuildempty: nothing to write. */
static void
tidcalc_buildempty(Relation index)
{
}

/* aminsert: refused; the table must keep the layout the build checked. */
static bool
tidcalc_insert(Relation index, Datum *values, bool *isnull, ItemPointer heap_tid,
			   Relation heap, IndexUniqueCheck checkUnique, bool indexUnchanged,
			   IndexInfo *indexInfo)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("tidcalc indexes cannot take new entries"),
			 errdetail("A tidcalc index is a benchmark bound over a table pgbench -i wrote.")));
	return false;
}

/* ambulkdelete: nothing stored, nothing to remove. */
static IndexBulkDeleteResult *
tidcalc_bulkdelete(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
				   IndexBulkDeleteCallback callback, void *callback_state)
{
	return stats ? stats : palloc0(sizeof(IndexBulkDeleteResult));
}

/* amvacuumcleanup: nothing to do. */
static IndexBulkDeleteResult *
tidcalc_vacuumcleanup(IndexVacuumInfo *info, IndexBulkDeleteResult *stats)
{
	return stats;
}

/* amcostestimate: the generic estimate. */
static void
tidcalc_costestimate(PlannerInfo *root, IndexPath *path, double loop_count,
					 Cost *indexStartupCost, Cost *indexTotalCost,
					 Selectivity *indexSelectivity, double *indexCorrelation,
					 double *indexPages)
{
	GenericCosts costs;

	MemSet(&costs, 0, sizeof(costs));
	genericcostestimate(root, path, loop_count, &costs);
	*indexStartupCost = costs.indexStartupCost;
	*indexTotalCost = costs.indexTotalCost;
	*indexSelectivity = costs.indexSelectivity;
	*indexCorrelation = 1.0;
	*indexPages = costs.numIndexPages;
}

/* amvalidate: one operator, equality; nothing to check. */
static bool
tidcalc_validate(Oid opclassoid)
{
	return true;
}

/* ambeginscan */
static IndexScanDesc
tidcalc_beginscan(Relation index, int nkeys, int norderbys)
{
	IndexScanDesc scan = RelationGetIndexScan(index, nkeys, norderbys);

	scan->opaque = palloc0(sizeof(TidcalcScan));
	return scan;
}

/* amrescan: take the keys. */
static void
tidcalc_rescan(IndexScanDesc scan, ScanKey keys, int nkeys, ScanKey orderbys, int norderbys)
{
	if (keys && scan->numberOfKeys > 0)
		memmove(scan->keyData, keys, scan->numberOfKeys * sizeof(ScanKeyData));
	((TidcalcScan *) scan->opaque)->done = false;
}

/* The layout of the scanned table, from the relcache entry or read once. */
static const TidcalcLayout *
layout_of(IndexScanDesc scan)
{
	Relation	index = scan->indexRelation;

	if (index->rd_amcache == NULL)
	{
		TidcalcLayout *layout = MemoryContextAlloc(index->rd_indexcxt, sizeof(TidcalcLayout));

		layout->per_page = first_page_rows(scan->heapRelation);
		layout->rows = layout->per_page * RelationGetNumberOfBlocks(scan->heapRelation);
		index->rd_amcache = layout;
	}
	return (const TidcalcLayout *) index->rd_amcache;
}

/* amgettuple: the one TID of the key, if the table can hold it. */
static bool
tidcalc_gettuple(IndexScanDesc scan, ScanDirection dir)
{
	TidcalcScan *so = (TidcalcScan *) scan->opaque;
	const TidcalcLayout *layout;
	int64		aid;

	if (so->done || scan->numberOfKeys != 1 || (scan->keyData[0].sk_flags & SK_ISNULL))
		return false;
	so->done = true;
	layout = layout_of(scan);
	aid = DatumGetInt32(scan->keyData[0].sk_argument);
	if (aid < 1 || aid > layout->rows)
		return false;
	tid_of(aid, layout->per_page, &scan->xs_heaptid);
	scan->xs_recheck = false;
	return true;
}

/* amendscan */
static void
tidcalc_endscan(IndexScanDesc scan)
{
	pfree(scan->opaque);
}

/* The handler of access method tidcalc. */
Datum
tidcalc_handler(PG_FUNCTION_ARGS)
{
	IndexAmRoutine *am = makeNode(IndexAmRoutine);

	am->amstrategies = 1;
	am->amsupport = 1;
	am->amoptsprocnum = 0;
	am->amcanorder = false;
	am->amcanorderbyop = false;
	am->amcanbackward = false;
	am->amcanunique = false;
	am->amcanmulticol = false;
	am->amoptionalkey = false;
	am->amsearcharray = false;
	am->amsearchnulls = false;
	am->amstorage = false;
	am->amclusterable = false;
	am->ampredlocks = false;
	am->amcanparallel = false;
	am->amcaninclude = false;
	am->amusemaintenanceworkmem = false;
	am->amparallelvacuumoptions = VACUUM_OPTION_NO_PARALLEL;
	am->amkeytype = INT4OID;
	am->ambuild = tidcalc_build;
	am->ambuildempty = tidcalc_buildempty;
	am->aminsert = tidcalc_insert;
	am->ambulkdelete = tidcalc_bulkdelete;
	am->amvacuumcleanup = tidcalc_vacuumcleanup;
	am->amcanreturn = NULL;
	am->amcostestimate = tidcalc_costestimate;
	am->amoptions = NULL;
	am->amproperty = NULL;
	am->ambuildphasename = NULL;
	am->amvalidate = tidcalc_validate;
	am->amadjustmembers = NULL;
	am->ambeginscan = tidcalc_beginscan;
	am->amrescan = tidcalc_rescan;
	am->amgettuple = tidcalc_gettuple;
	am->amgetbitmap = NULL;
	am->amendscan = tidcalc_endscan;
	am->ammarkpos = NULL;
	am->amrestrpos = NULL;
	am->amestimateparallelscan = NULL;
	am->aminitparallelscan = NULL;
	am->amparallelrescan = NULL;
	PG_RETURN_POINTER(am);
}
