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
 * aminsert: NULLs are not indexed; everything else gets one entry, after
 * the uniqueness check of a unique index (pmunique.c).  Returns false only
 * if a speculative insertion may have a conflict.
 */
bool
pmhashinsert(Relation index, Datum *values, bool *isnull, ItemPointer ht_ctid,
			 Relation heapRel, IndexUniqueCheck checkUnique,
			 bool indexUnchanged pg_attribute_unused(), IndexInfo *indexInfo)
{
	uint32		hash;
	PmhashLocal *ix;
	bool		rebuilt = false;

	if (isnull[0])
		return true;
	pmhash_check_tid(index, ht_ctid);
	hash = pmhash_hash_datum(index, values[0]);
	if (checkUnique == UNIQUE_CHECK_YES || checkUnique == UNIQUE_CHECK_PARTIAL)
		return pmhash_insert_unique(index, heapRel, indexInfo, hash, values[0], ht_ctid,
									checkUnique);
	/* only deferrable unique constraints recheck, and they must be btree indexes */
	if (checkUnique == UNIQUE_CHECK_EXISTING)
		elog(ERROR, "pmhash index \"%s\" cannot recheck a deferred unique constraint",
			 RelationGetRelationName(index));
	ix = pmhash_open(index, &rebuilt);
	/* a rebuild just now took the tuple's entry from the table */
	pmhash_insert_entry(index, ix, hash, ht_ctid,
						rebuilt ? PMH_INSERT_IF_ABSENT : PMH_INSERT_NEW, NULL, NULL);
	pmhash_leave();
	return true;
}
