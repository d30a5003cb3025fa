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

#include "pmhash.h"

/* aminsert: NULLs are not indexed; everything else gets one entry. */
bool
pmhashinsert(Relation index, Datum *values, bool *isnull, ItemPointer ht_ctid,
			 Relation heapRel pg_attribute_unused(),
			 IndexUniqueCheck checkUnique pg_attribute_unused(),
			 bool indexUnchanged pg_attribute_unused(),
			 IndexInfo *indexInfo pg_attribute_unused())
{
	uint32		hash;
	PmhashLocal   *ix;

	if (isnull[0])
		return false;
	pmhash_check_tid(index, ht_ctid);
	hash = pmhash_hash_datum(index, values[0]);
	ix = pmhash_open(index);
	pmhash_insert_entry(index, ix, hash, ht_ctid);
	pmhash_leave();
	return false;
}
