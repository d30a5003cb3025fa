/*-------------------------------------------------------------------------
 *
 * pminsert.c
 *	  Inserting one heap tuple's entry into a pmhash index.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pminsert.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/rel.h"

#include "pmhash.h"

/*
 * aminsert: NULLs are not indexed; everything else gets one entry, queued
 * to be applied in a batch (pmshard.c).  An index that enforces an
 * exclusion constraint takes it at once: other backends' checks must see
 * it before this transaction ends.
 */
bool
pmhashinsert(Relation index, Datum *values, bool *isnull, ItemPointer ht_ctid,
			 Relation heapRel pg_attribute_unused(),
			 IndexUniqueCheck checkUnique pg_attribute_unused(),
			 bool indexUnchanged pg_attribute_unused(),
			 IndexInfo *indexInfo pg_attribute_unused())
{
	if (isnull[0])
		return false;
	pmh_queue_insert(index, pmh_local(index), pmh_hash_datum(index, values[0]), ht_ctid);
	if (index->rd_index->indisexclusion)
	{
		pmh_apply_queued(index, pmh_open(index));
		pmh_leave();
	}
	return false;
}
