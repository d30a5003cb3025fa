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
 * elements (num_sa_scans) and the entries of one probe.  A scan of a
 * multi-column index needs an equality condition on every key column to
 * compute the hash codes it probes; without one it reads every entry of
 * the index (pmscan.c), and is charged that plus disable_cost, so that
 * the planner chooses it only when told to avoid everything else.
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
		*indexStartupCost = disable_cost;
		*indexTotalCost = disable_cost + file_pages * random_page_cost +
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
	*indexCorrelation = costs.indexCorrelation;
	*indexPages = costs.numIndexPages;
}
