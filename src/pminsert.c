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
 * aminsert: a row whose first key column is NULL is not indexed; every
 * other gets one entry, after the uniqueness check of a unique index
 * unless a key column is NULL (NULLs are distinct: such a key has no
 * duplicate; src/README, Keys of several columns).  Returns false only if
 * a speculative insertion may have a conflict.
 */
bool
pmhashinsert(Relation index, Datum *values, bool *isnull, ItemPointer ht_ctid,
			 Relation heapRel, IndexUniqueCheck checkUnique,
			 bool indexUnchanged pg_attribute_unused(), IndexInfo *indexInfo)
{
	uint32		hash;
	PmhashLocal *ix;
	bool		rebuilt = false;
	bool		any_null = false;

	if (isnull[0])
		return true;
	for (int i = 1; i < IndexRelationGetNumberOfKeyAttributes(index); i++)
		any_null = any_null || isnull[i];
	pmhash_check_tid(index, ht_ctid);
	hash = pmhash_hash_key(index, values, isnull);
	if (!any_null && (checkUnique == UNIQUE_CHECK_YES || checkUnique == UNIQUE_CHECK_PARTIAL))
		return pmhash_insert_unique(index, heapRel, indexInfo, hash, values, ht_ctid,
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
