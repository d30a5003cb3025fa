/*-------------------------------------------------------------------------
 *
 * pmcost.c
 *	  Cost estimation of pmhash index scans.
 *
 * Selectivity and the number of matching entries come from the generic
 * estimator.  The access cost differs from an 8 kB-page index: a probe
 * reads one 256-byte bucket of a mapped file per 28 matches (posting
 * chains are denser still), so it is charged as that fraction of a random
 * page, plus CPU per returned entry.  Repeated probes (the inner side of a
 * nested loop) are charged as genericcostestimate charges them for other
 * indexes: the pages the whole loop fetches from a file of the index's
 * estimated size, with caching, spread over the loops.  A "= ANY(array)"
 * condition probes once per element: the generic estimator counts the
 * elements (num_sa_scans) and the entries of one probe.
 *
 * A plain scan returns its TIDs in TID order (pmscan.c), so it reads the
 * heap pages of its rows in order, once each, as a bitmap heap scan does,
 * and prefetches them as that does.  cost_index knows of no such order: it
 * charges random_page_cost for each page unless the index reports a
 * correlation with the heap.  The correlation reported is the one that
 * makes cost_index charge the heap pages what cost_bitmap_heap_scan
 * charges the same rows' pages, plus the recheck of each row that
 * cost_index leaves out; without it the planner would take a bitmap scan,
 * which costs a TID bitmap on top, wherever a probe finds rows on more
 * than one page.  A scan repeated in a loop keeps no order across its
 * probes and reports none.
 *
 * A scan of a multi-column index needs an equality condition on every key
 * column to compute the hash codes it probes; without one it reads every
 * entry of the index (pmscan.c), and is charged that plus disable_cost, so
 * that the planner chooses it only when told to avoid everything else.  On
 * PostgreSQL 18, which counts disabled plan nodes apart from costs, such an
 * index scan counts as a disabled node instead and is charged its cost
 * alone; a bitmap scan of it is not disabled (core counts only the bitmap
 * heap scan's own setting) but fetches every heap page, which costs more
 * than a sequential scan unless that is disabled or made dearer.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmcost.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "utils/selfuncs.h"
#include "utils/spccache.h"

#include "pmhash.h"

/*
 * The heap correlation that makes cost_index charge the heap pages of a
 * scan with this selectivity as a bitmap heap scan charges them
 * (compute_bitmap_pages, cost_bitmap_heap_scan): its distinct pages, each
 * costing between random_page_cost and seq_page_cost by the share of the
 * table they are, and the recheck of each row's conditions, which
 * cost_index leaves out though the plain scan rechecks as the bitmap heap
 * scan does.  cost_index charges pages_fetched * random_page_cost at
 * correlation 0, the pages of the rows stored together at 1, and between
 * them by the correlation's square.
 */
static double
tid_order_correlation(PlannerInfo *root, IndexPath *path, Selectivity selectivity)
{
	RelOptInfo *baserel = path->indexinfo->rel;
	double		table_pages = Max(baserel->pages, 1.0);
	double		tuples = clamp_row_est(selectivity * baserel->tuples);
	double		random_page_cost;
	double		seq_page_cost;
	double		pages;
	double		clustered_pages;
	double		max_io;
	double		min_io;
	double		ordered_io;
	List	   *conditions = NIL;
	QualCost	recheck;
	ListCell   *lc;

	foreach(lc, path->indexclauses)
		conditions = lappend(conditions, lfirst_node(IndexClause, lc)->rinfo);
	cost_qual_eval(&recheck, conditions, root);
	list_free(conditions);
	get_tablespace_page_costs(baserel->reltablespace, &random_page_cost, &seq_page_cost);
	/* cost_index's bounds, for a scan that is not repeated */
	pages = index_pages_fetched(tuples, baserel->pages, (double) path->indexinfo->pages, root);
	max_io = pages * random_page_cost;
	clustered_pages = ceil(selectivity * baserel->pages);
	min_io = clustered_pages > 0 ? random_page_cost + (clustered_pages - 1) * seq_page_cost : 0;
	/* the bitmap heap scan's */
	pages = Min(ceil(2.0 * table_pages * tuples / (2.0 * table_pages + tuples)), table_pages);
	ordered_io = pages * (pages >= 2.0 ?
						  random_page_cost - (random_page_cost - seq_page_cost) *
						  sqrt(pages / table_pages) :
						  random_page_cost) + tuples * recheck.per_tuple;
	if (max_io <= min_io || ordered_io >= max_io)
		return 0.0;
	ordered_io = Max(ordered_io, min_io);
	return sqrt((max_io - ordered_io) / (max_io - min_io));
}

/* Whether a scan has a condition on every key column of its index. */
static bool
conditions_every_column(IndexPath *path)
{
	bool		seen[INDEX_MAX_KEYS] = {0};
	int			nseen = 0;
	ListCell   *lc;

	foreach(lc, path->indexclauses)
	{
		IndexClause *clause = lfirst_node(IndexClause, lc);

		if (!seen[clause->indexcol])
			nseen++;
		seen[clause->indexcol] = true;
	}
	return nseen == path->indexinfo->nkeycolumns;
}

/* amcostestimate */
void
pmhashcostestimate(PlannerInfo *root, IndexPath *path, double loop_count,
				   Cost *indexStartupCost, Cost *indexTotalCost,
				   Selectivity *indexSelectivity, double *indexCorrelation,
				   double *indexPages)
{
	GenericCosts costs;
	double		random_page_cost;
	double		probe_pages;
	double		file_pages;
	double		io_cost;

	MemSet(&costs, 0, sizeof(costs));
	genericcostestimate(root, path, loop_count, &costs);
	get_tablespace_page_costs(path->indexinfo->reltablespace, &random_page_cost, NULL);

	file_pages = Max(1.0, ceil(path->indexinfo->tuples * PMH_UNIT_SIZE /
							   (PMH_BUCKET_SLOTS * PMHASH_DEFAULT_FILLFACTOR / 100.0) / BLCKSZ));
	if (!conditions_every_column(path))
	{
		Cost		penalty = disable_cost;

#if PG_VERSION_NUM >= 180000
		/* 18 compares disabled nodes before costs: this scan is one */
		path->path.disabled_nodes++;
		penalty = 0;
#endif
		*indexStartupCost = penalty;
		*indexTotalCost = penalty + file_pages * random_page_cost +
			path->indexinfo->tuples * (cpu_index_tuple_cost + cpu_operator_cost);
		*indexSelectivity = 1.0;
		*indexCorrelation = 0.0;
		*indexPages = file_pages;
		return;
	}
	probe_pages = costs.num_sa_scans *
		(1.0 + costs.numIndexTuples / PMH_BUCKET_SLOTS) * PMH_UNIT_SIZE / BLCKSZ;
	io_cost = probe_pages * random_page_cost;
	if (loop_count > 1)
	{
		io_cost = Min(io_cost,
					  index_pages_fetched(probe_pages * loop_count, (BlockNumber) file_pages,
										  file_pages, root) * random_page_cost / loop_count);
	}
	*indexStartupCost = costs.indexStartupCost;
	*indexTotalCost = costs.indexStartupCost + io_cost +
		costs.num_sa_scans * costs.numIndexTuples * (cpu_index_tuple_cost + cpu_operator_cost);
	*indexSelectivity = costs.indexSelectivity;
	*indexCorrelation = loop_count > 1 ? costs.indexCorrelation :
		tid_order_correlation(root, path, costs.indexSelectivity);
	*indexPages = costs.numIndexPages;
}
