/*-------------------------------------------------------------------------
 *
 * pmcost.c
 *	  Cost estimation of pmhash index scans.
 *
 * Selectivity and the number of matching entries come from the generic
 * estimator.  The access cost differs from an 8 kB-page index: a probe
 * reads one 256-byte bucket of a mapped file per 22 matches (posting
 * chains are denser still), so it is charged as that fraction of a random
 * page, plus CPU per returned entry.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmcost.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "utils/selfuncs.h"
#include "utils/spccache.h"

#include "pmhash.h"

/* amcostestimate */
void
pmhashcostestimate(PlannerInfo *root, IndexPath *path, double loop_count,
				   Cost *indexStartupCost, Cost *indexTotalCost,
				   Selectivity *indexSelectivity, double *indexCorrelation,
				   double *indexPages)
{
	GenericCosts costs;
	double		random_page_cost;
	double		buckets;

	MemSet(&costs, 0, sizeof(costs));
	genericcostestimate(root, path, loop_count, &costs);
	get_tablespace_page_costs(path->indexinfo->reltablespace, &random_page_cost, NULL);

	buckets = 1.0 + costs.numIndexTuples / PMH_BUCKET_SLOTS;
	*indexStartupCost = costs.indexStartupCost;
	*indexTotalCost = costs.indexStartupCost +
		buckets * random_page_cost * ((double) PMH_UNIT_SIZE / BLCKSZ) +
		costs.numIndexTuples * (cpu_index_tuple_cost + cpu_operator_cost);
	*indexSelectivity = costs.indexSelectivity;
	*indexCorrelation = costs.indexCorrelation;
	*indexPages = costs.numIndexPages;
}
