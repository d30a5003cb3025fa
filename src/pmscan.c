/*-------------------------------------------------------------------------
 *
 * pmscan.c
 *	  Index scans of pmhash: plain and bitmap.
 *
 * A scan probes once, without locks, and copies every TID stored under the
 * key's hash into backend memory before it returns the first one; a plain
 * scan sorts and de-duplicates them (a bitmap takes them in any order),
 * and prefetches the heap pages of the TIDs it returns next (src/README,
 * Heap prefetch).  Only hash codes are stored, so every match is rechecked
 * against the heap tuple.  A scan of several key columns
 * probes the codes of every combination of its conditions' values, or
 * reads every entry when a column has no condition (src/README, Readers).
 * SERIALIZABLE scans predicate-lock the shards they probe.
 *
 * "col = ANY(array)" reaches the scan whole (amsearcharray): every element
 * is hashed and the distinct codes probed in batches.  The executor's
 * recheck of such a condition compares each row with the array element by
 * element unless the planner gave it a hash function (PostgreSQL 15 does for
 * constant arrays of 9 elements or more), which costs a row O(elements).  So
 * an MVCC scan whose only condition is an array with such a recheck
 * compares each candidate's key itself: it reads the key of the tuple its
 * snapshot sees (the one the executor would return and recheck), hashes
 * it, finds the elements of that code among the elements sorted by code
 * (an element set, pmelements.c: a table indexed by the codes' top bits says where each
 * value starts), and keeps the TID only if one is equal by the condition's
 * operator.  The rows it returns then need no recheck.  A condition whose
 * recheck is hashed (pmrecheck.c flags its key) is left to the executor;
 * a plain scan keeps its element set, and pmrecheck.c has the executor
 * recheck the rows by it instead of hashing every element again.
 *
 * The executor does that recheck, but PostgreSQL 15's logical replication
 * apply worker (RelationFindReplTupleByIndex) takes the first tuple an
 * index scan returns and ignores xs_recheck: a key sharing the hash code
 * would make it update or delete the wrong row.  In an apply worker a scan
 * therefore compares each candidate's key itself (pmkey.c) and returns only
 * rows whose key is equal.  So does every scan with a dirty snapshot (the
 * check for conflicts of INSERT ... ON CONFLICT, exclusion constraints,
 * 18's apply worker), and its rows then need no recheck: the executor's
 * recheck would read the key of a row another transaction is inserting,
 * whose TOAST data may vanish meanwhile; pmkey.c waits for that
 * transaction before it reads such a key.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmscan.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/table.h"
#include "catalog/index.h"
#include "catalog/pg_index.h"
#include "nodes/tidbitmap.h"
#include "pgstat.h"
#include "replication/logicalworker.h"
#include "storage/bufmgr.h"
#include "storage/predicate.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "pmhash.h"

typedef struct PmhScanOpaqueData
{
	ItemPointer tids;
	int			ntids;
	int			maxtids;
	int			pos;			/* TID returned last: -1 before the first,
								 * ntids after the last */
	bool		searched;
	bool		exact;			/* every TID's key was compared: no recheck */
	Oid		   *cross_type;		/* per key column: type whose hash function */
	FmgrInfo   *cross_proc;		/* cross_proc is */
	bool		compare_keys;	/* return only rows whose key is equal */
	bool		reading_keys;	/* reader begun */
	PmhashKeyReader reader;
	Relation	heap;			/* opened for a bitmap scan's reader, else NULL */
	bool		can_kill;		/* an index scan of one code, no unverified TIDs */
	PmhashKilled killed;		/* of its TIDs, those found dead to everyone */
	PmhashHeapPrefetch prefetch;	/* of the TIDs' heap pages */
	PmhashElementSet kept;		/* a hashed constant array's elements, for
								 * the executor's recheck (pmrecheck.c) */
	ArrayType  *kept_array;		/* the detoasted copy they point into, or
								 * NULL if they point into the key's datum */
} PmhScanOpaqueData;

typedef PmhScanOpaqueData *PmhScanOpaque;

/* Hash codes one scan probes at most; more and it reads the whole index. */
#define MAX_PROBE_CODES		(1 << 22)

/* ambeginscan */
IndexScanDesc
pmhashbeginscan(Relation index, int nkeys, int norderbys)
{
	IndexScanDesc scan = RelationGetIndexScan(index, nkeys, norderbys);
	PmhScanOpaque so = palloc0(sizeof(PmhScanOpaqueData));

	so->maxtids = 64;
	so->tids = palloc(so->maxtids * sizeof(ItemPointerData));
	so->cross_type = palloc0(IndexRelationGetNumberOfKeyAttributes(index) * sizeof(Oid));
	so->cross_proc = palloc(IndexRelationGetNumberOfKeyAttributes(index) * sizeof(FmgrInfo));
	scan->opaque = so;
	return scan;
}

/*
 * Remove the entries of the rows the last probe's caller found dead to
 * every transaction, if any.
 */
static void
remove_killed(IndexScanDesc scan)
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;

	if (so->killed.ntids > 0)
		pmhash_remove_killed(scan->indexRelation, scan->heapRelation, &so->killed);
}

/* Free the elements a plain scan kept for the executor's recheck, if any. */
static void
release_kept_elements(IndexScanDesc scan)
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;

	pmhash_element_set_free(&so->kept, true);
	if (so->kept_array != NULL)
		pfree(so->kept_array);
	so->kept_array = NULL;
}

/* amrescan */
void
pmhashrescan(IndexScanDesc scan, ScanKey keys, int nkeys pg_attribute_unused(),
			 ScanKey orderbys pg_attribute_unused(), int norderbys pg_attribute_unused())
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;

	remove_killed(scan);
	release_kept_elements(scan);
	if (keys && scan->numberOfKeys > 0)
		memmove(scan->keyData, keys, scan->numberOfKeys * sizeof(ScanKeyData));
	so->searched = false;
	so->ntids = 0;
	so->pos = -1;
}

/*
 * The hash function of a scan key's values (its argument, or the elements
 * of its array) by the operator class of the key's column, and in
 * *collation the collation to call it with.  A cross-type value (an int4
 * compared with an int8 column, say) is hashed with its own type's
 * function from the operator family, which hashes equal values alike.
 */
static FmgrInfo *
key_hash_function(IndexScanDesc scan, ScanKey key, Oid *collation)
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;
	Relation	index = scan->indexRelation;
	int			col = key->sk_attno - 1;
	Oid			subtype = key->sk_subtype;

	if (!OidIsValid(subtype) || subtype == index->rd_opcintype[col])
	{
		*collation = index->rd_indcollation[col];
		return index_getprocinfo(index, col + 1, 1);
	}
	if (so->cross_type[col] != subtype)
	{
		Oid			proc = get_opfamily_proc(index->rd_opfamily[col], subtype, subtype, 1);

		if (!OidIsValid(proc))
			elog(ERROR, "missing support function 1(%u,%u) for operator family %u of index \"%s\"",
				 subtype, subtype, index->rd_opfamily[col], RelationGetRelationName(index));
		fmgr_info(proc, &so->cross_proc[col]);
		so->cross_type[col] = subtype;
	}
	*collation = key->sk_collation;
	return &so->cross_proc[col];
}

/* Hash of a scan key's argument (key_hash_function). */
static uint32
key_hash(IndexScanDesc scan, ScanKey key)
{
	Oid			collation;
	FmgrInfo   *function = key_hash_function(scan, key, &collation);

	return DatumGetUInt32(FunctionCall1Coll(function, collation, key->sk_argument));
}

/*
 * The non-NULL elements of array, the argument of an array scan key, with
 * their hash codes, sorted by code, in *elements; returns their number.
 * By-reference elements point into array.
 */
static int
array_elements(IndexScanDesc scan, ScanKey key, ArrayType *array, PmhashArrayElement **elements)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *values;
	bool	   *nulls;
	int			nvalues;
	int			n = 0;
	FmgrInfo   *function;
	Oid			collation;

	get_typlenbyvalalign(ARR_ELEMTYPE(array), &typlen, &typbyval, &typalign);
	deconstruct_array(array, ARR_ELEMTYPE(array), typlen, typbyval, typalign,
					  &values, &nulls, &nvalues);
	*elements = palloc(Max(nvalues, 1) * sizeof(PmhashArrayElement));
	function = key_hash_function(scan, key, &collation);
	for (int i = 0; i < nvalues; i++)
	{
		if (nulls[i])
			continue;
		(*elements)[n].hash = DatumGetUInt32(FunctionCall1Coll(function, collation, values[i]));
		(*elements)[n].value = values[i];
		n++;
	}
	pfree(values);
	pfree(nulls);
	pmhash_sort_elements(*elements, n);
	return n;
}

/* Free an array argument if detoasting it made a copy. */
static void
free_array(ScanKey key, ArrayType *array)
{
	if ((Pointer) array != DatumGetPointer(key->sk_argument))
		pfree(array);
}

/*
 * Begin reading the keys of candidate rows, once per scan.  A bitmap scan
 * has no heap relation of its own: it opens the table, which the executor
 * has locked already.
 */
static void
begin_reading_keys(IndexScanDesc scan)
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;
	Relation	heap = scan->heapRelation;

	if (so->reading_keys)
		return;
	if (heap == NULL)
	{
		so->heap = table_open(scan->indexRelation->rd_index->indrelid, AccessShareLock);
		heap = so->heap;
	}
	pmhash_key_reader_begin(&so->reader, heap, scan->indexRelation,
							BuildIndexInfo(scan->indexRelation));
	so->reading_keys = true;
}

/*
 * The heap whose rows the scan reads: a plain scan's, or the one a bitmap
 * scan opened to read keys; NULL for a bitmap scan that reads none.
 */
static inline Relation
keys_heap(IndexScanDesc scan)
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;

	return so->heap ? so->heap : scan->heapRelation;
}

/*
 * Whether the key of the tuple at tid that the scan's snapshot sees equals
 * an element of set by the condition's operator; for an index of one
 * column.
 */
static bool
key_in_elements(IndexScanDesc scan, ItemPointer tid, const PmhashElementSet *set)
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;
	Datum		row_key[INDEX_MAX_KEYS];

	if (!pmhash_key_read(&so->reader, tid, scan->xs_snapshot, row_key, NULL, NULL))
		return false;
	return pmhash_element_set_contains(scan->indexRelation, &scan->keyData[0], set, row_key[0]);
}

/*
 * Keep only the TIDs whose rows match the array condition, and mark the
 * scan exact.
 */
static void
filter_by_elements(IndexScanDesc scan, PmhashArrayElement *elements, int n)
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;
	PmhashElementSet set;
	int			kept = 0;

	pmhash_element_set_make(&set, elements, n);
	begin_reading_keys(scan);
	for (int i = 0; i < so->ntids; i++)
	{
		pmhash_prefetch_heap(&so->prefetch, keys_heap(scan), so->tids, so->ntids, i);
		if (key_in_elements(scan, &so->tids[i], &set))
			so->tids[kept++] = so->tids[i];
	}
	pmhash_key_reader_release(&so->reader);
	pmhash_element_set_free(&set, false);
	so->ntids = kept;
	so->exact = true;
	/* the executor's fetches prefetch the kept TIDs' pages again */
	pmhash_prefetch_restart(&so->prefetch);
}

/* Whether an index is partial, without copying its predicate. */
static inline bool
is_partial(Relation index)
{
	return !heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, NULL);
}

/* Make room in the scan's TID array for extra more. */
static void
reserve_tids(IndexScanDesc scan, uint64 extra)
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;

	if ((uint64) so->ntids + extra > INT_MAX / sizeof(ItemPointerData))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("pmhash index \"%s\" has too many entries for one scan",
						RelationGetRelationName(scan->indexRelation))));
	if (so->ntids + extra > (uint64) so->maxtids)
	{
		so->maxtids = Max(so->maxtids * 2, so->ntids + (int) extra);
		so->tids = repalloc_huge(so->tids, (Size) so->maxtids * sizeof(ItemPointerData));
	}
}

/*
 * Add to the scan's TIDs those of a partial index's unverified entries
 * (napart of them, in the palloc'd apart) whose rows the index may hold.
 * A row that took a phantom's TID after a crash may be outside the
 * predicate, and PostgreSQL 16 and later leave the conditions a partial
 * index's predicate implies out of an index scan's plan, so the executor
 * would not filter it (src/README, durability hazard 1).
 */
static void
add_indexed(IndexScanDesc scan, ItemPointer apart, int napart)
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;
	BlockNumber nblocks;

	begin_reading_keys(scan);
	nblocks = RelationGetNumberOfBlocks(so->reader.heap);
	reserve_tids(scan, napart);
	for (int i = 0; i < napart; i++)
	{
		if (ItemPointerGetBlockNumberNoCheck(&apart[i]) < nblocks &&
			pmhash_key_chain_indexed(&so->reader, &apart[i]))
			so->tids[so->ntids++] = apart[i];
	}
	pmhash_key_reader_release(&so->reader);
	pfree(apart);
}

/*
 * Collect every TID of the index, shard by shard, for a scan that cannot
 * name the hash codes to probe: one of a multi-column index whose
 * conditions leave a column out (the cost estimate keeps the planner from
 * choosing it), or whose arrays combine into too many keys.  Unverified
 * TIDs past the end of the heap are left out, as pmhash_lookup_entries
 * does.  The executor rechecks every row.
 */
static void
collect_all(IndexScanDesc scan)
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;
	Relation	index = scan->indexRelation;
	BlockNumber nblocks = scan->heapRelation ? RelationGetNumberOfBlocks(scan->heapRelation) :
		InvalidBlockNumber;
	bool		partial = is_partial(index);
	PmhEntry   *entries = NULL;
	uint64		maxentries = 0;
	ItemPointer apart = NULL;
	int			napart = 0;

	/* before reading: an insert after this sees the lock (src/README) */
	PredicateLockRelation(index, scan->xs_snapshot);
	for (uint32 shard = 0;; shard++)
	{
		PmhashLocal *ix = pmhash_open(index, NULL);
		uint64		count;

		CHECK_FOR_INTERRUPTS();
		if (shard >= pmhash_slots(ix))
		{
			pmhash_leave();
			break;
		}
		count = pmhash_shard_entries(index, ix, shard, &entries, &maxentries);
		pmhash_leave();
		reserve_tids(scan, count);
		for (uint64 i = 0; i < count; i++)
		{
			ItemPointer tid = (ItemPointer) &entries[i].tid;

			if ((entries[i].flags & PMH_ENTRY_UNVERIFIED) && scan->heapRelation != NULL &&
				ItemPointerGetBlockNumberNoCheck(tid) >= nblocks)
				continue;
			if ((entries[i].flags & PMH_ENTRY_UNVERIFIED) && partial)
			{
				apart = apart ? repalloc(apart, (napart + 1) * sizeof(ItemPointerData)) :
					palloc(sizeof(ItemPointerData));
				apart[napart++] = *tid;
				continue;
			}
			so->tids[so->ntids++] = *tid;
		}
	}
	if (entries)
		pfree(entries);
	if (napart > 0)
		add_indexed(scan, apart, napart);
}

/*
 * Take the predicate locks of a SERIALIZABLE scan on the shards of the n
 * codes it is about to probe (sorted, so a shard's codes are adjacent),
 * before it reads them: an insert either comes later and finds the lock,
 * or earlier, and the probe finds its entry (src/README, Serializable
 * transactions).  Other scans take none.
 */
static void
lock_predicates(IndexScanDesc scan, PmhashLocal *ix, const uint32 *codes, int n)
{
	BlockNumber last = InvalidBlockNumber;

	for (int i = 0; i < n; i++)
	{
		BlockNumber block = pmhash_predicate_block(ix, codes[i]);

		if (block != last)
			PredicateLockPage(scan->indexRelation, block, scan->xs_snapshot);
		last = block;
	}
}

/*
 * The hash codes of the probed conditions, one per key column: every
 * combination of their values (arrays multiply), sorted and distinct, in
 * *codes; returns their number, 0 if a condition matches nothing, -1 if
 * there are too many to probe.  Each column's array elements, sorted by
 * hash code, stay in elements[col] (nelements[col] of them; by-reference
 * ones point into arrays[col]).
 */
static int
probe_codes(IndexScanDesc scan, ScanKey *probed, uint32 **codes, ArrayType **arrays,
			PmhashArrayElement **elements, int *nelements)
{
	int			nkeys = IndexRelationGetNumberOfKeyAttributes(scan->indexRelation);
	uint32	   *result = palloc(sizeof(uint32));
	int			n = 1;

	for (int col = 0; col < nkeys && n > 0; col++)
	{
		ScanKey		key = probed[col];
		uint32		one_hash;
		uint32	   *hashes = &one_hash;
		int			nhashes = 0;
		uint32	   *next;

		if (key->sk_flags & SK_SEARCHARRAY)
		{
			arrays[col] = DatumGetArrayTypeP(key->sk_argument);
			nelements[col] = array_elements(scan, key, arrays[col], &elements[col]);
			hashes = palloc(Max(nelements[col], 1) * sizeof(uint32));
			for (int i = 0; i < nelements[col]; i++)
			{
				if (nhashes == 0 || hashes[nhashes - 1] != elements[col][i].hash)
					hashes[nhashes++] = elements[col][i].hash;
			}
		}
		else
			hashes[nhashes++] = key_hash(scan, key);
		if ((uint64) n * nhashes > MAX_PROBE_CODES)
			n = -1;
		else
		{
			next = palloc(Max(n * nhashes, 1) * sizeof(uint32));
			for (int j = 0; j < n; j++)
			{
				for (int k = 0; k < nhashes; k++)
					next[j * nhashes + k] = col == 0 ? hashes[k] :
						pmhash_fold_hash(result[j], hashes[k]);
			}
			n *= nhashes;
			pfree(result);
			result = next;
		}
		if (hashes != &one_hash)
			pfree(hashes);
		if (n < 0)
			break;
	}
	if (nkeys > 1 && n > 1)
	{
		int			m = 0;

		pmhash_sort_codes(result, n);
		for (int i = 0; i < n; i++)
		{
			if (m == 0 || result[m - 1] != result[i])
				result[m++] = result[i];
		}
		n = m;
	}
	*codes = result;
	return n;
}

/*
 * Probe once and keep every matching TID, sorted and unique if ordered
 * (a bitmap takes them in any order).  One condition of each key column is
 * probed: the first that is not an array, else the first; the executor
 * rechecks the others.
 */
static void
search(IndexScanDesc scan, bool ordered)
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;
	Relation	index = scan->indexRelation;
	int			nkeys = IndexRelationGetNumberOfKeyAttributes(index);
	ScanKey		probed[INDEX_MAX_KEYS];
	ArrayType  *arrays[INDEX_MAX_KEYS];
	PmhashArrayElement *elements[INDEX_MAX_KEYS];
	int			nelements[INDEX_MAX_KEYS];
	bool		every_column = true;
	uint32		one_code;
	uint32	   *codes = NULL;
	int			ncodes;
	bool		exact;

	/* clear only the key columns' slots: this runs for every probe */
	memset(probed, 0, nkeys * sizeof(ScanKey));
	memset(arrays, 0, nkeys * sizeof(ArrayType *));
	memset(elements, 0, nkeys * sizeof(PmhashArrayElement *));
	memset(nelements, 0, nkeys * sizeof(int));
	release_kept_elements(scan);
	so->searched = true;
	so->exact = false;
	so->can_kill = false;
	so->ntids = 0;
	so->pos = -1;
	pmhash_prefetch_begin(&so->prefetch);
	pgstat_count_index_scan(index);
	/* "= NULL", "= ANY(NULL)" and "= ANY('{}')" match nothing */
	for (int i = 0; i < scan->numberOfKeys; i++)
	{
		ScanKey		key = &scan->keyData[i];
		int			col = key->sk_attno - 1;
		ArrayType  *other;
		bool		empty;

		if (key->sk_flags & SK_ISNULL)
			return;
		if (!(key->sk_flags & SK_SEARCHARRAY))
		{
			if (probed[col] == NULL || (probed[col]->sk_flags & SK_SEARCHARRAY))
				probed[col] = key;
			continue;
		}
		if (probed[col] == NULL)
			probed[col] = key;
		other = DatumGetArrayTypeP(key->sk_argument);
		empty = ArrayGetNItems(ARR_NDIM(other), ARR_DIMS(other)) == 0;
		free_array(key, other);
		if (empty)
			return;
	}
	for (int col = 0; col < nkeys; col++)
		every_column = every_column && probed[col] != NULL;
	if (nkeys == 1 && every_column && !(probed[0]->sk_flags & SK_SEARCHARRAY))
	{
		/* the common probe of one key: nothing to combine or allocate */
		one_code = key_hash(scan, probed[0]);
		codes = &one_code;
		ncodes = 1;
	}
	else
		ncodes = every_column ? probe_codes(scan, probed, &codes, arrays, elements, nelements) : -1;
#if PG_VERSION_NUM >= 180000
	/* 18's EXPLAIN ANALYZE: a search per probed code, or one that reads everything */
	if (scan->instrument)
		scan->instrument->nsearches += ncodes < 0 ? 1 : ncodes;
#endif
	/*
	 * Only an array condition on an index of one column can be exact; one
	 * whose recheck is hashed is left to it.
	 */
	exact = arrays[0] != NULL && nkeys == 1 && scan->numberOfKeys == 1 &&
		IsMVCCSnapshot(scan->xs_snapshot) && !(probed[0]->sk_flags & PMHASH_SK_RECHECK_HASHED);
	if (ncodes < 0)
		collect_all(scan);
	else if (ncodes > 0)
	{
		PmhashLocal *ix;
		bool		may_kill = ncodes == 1 && scan->heapRelation != NULL;
		bool		partial = is_partial(index);
		ItemPointer apart = NULL;
		int			napart = 0;
		int			unverified;

		/* an exact bitmap scan reads the heap too, and skips what a plain one does */
		if (exact)
			begin_reading_keys(scan);
		ix = pmhash_open(index, NULL);
		lock_predicates(scan, ix, codes, ncodes);
		if (may_kill)
			pmhash_note_probe(ix, codes[0], &so->killed);
		unverified = pmhash_lookup_entries(index, ix, keys_heap(scan), codes, ncodes,
										   &so->tids, &so->ntids, &so->maxtids,
										   partial ? &apart : NULL, &napart);
		pmhash_leave();
		if (napart > 0)
			add_indexed(scan, apart, napart);
		/* the heap's check of a phantom's TID would fail (src/README) */
		so->can_kill = may_kill && unverified == 0;
	}
	if (ordered)
		so->ntids = pmhash_sort_unique_tids(so->tids, so->ntids);
	if (exact && so->ntids > 0)
		filter_by_elements(scan, elements[0], nelements[0]);
	if (ordered && arrays[0] != NULL && nkeys == 1 && scan->numberOfKeys == 1 &&
		(probed[0]->sk_flags & PMHASH_SK_RECHECK_HASHED))
	{
		/* the executor's recheck compares the rows with them (pmrecheck.c) */
		pmhash_element_set_make(&so->kept, elements[0], nelements[0]);
		if ((Pointer) arrays[0] != DatumGetPointer(probed[0]->sk_argument))
			so->kept_array = arrays[0];
		elements[0] = NULL;
		arrays[0] = NULL;
	}
	if (codes && codes != &one_code)
		pfree(codes);
	for (int col = 0; col < nkeys; col++)
	{
		if (elements[col])
			pfree(elements[col]);
		if (arrays[col])
			free_array(probed[col], arrays[col]);
	}
}

/*
 * Whether the row a candidate TID points to has the key of the scan keys'
 * arguments: the key of its live tuple (pmhash_key_read_live); a chain with
 * no live tuple matches nothing, as the apply worker's own fetch with its
 * dirty snapshot would find nothing either.  The apply worker's keys are
 * never arrays; any array condition is left to the recheck.
 */
static bool
key_matches(IndexScanDesc scan, ItemPointer tid)
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;
	Datum		row_key[INDEX_MAX_KEYS];

	begin_reading_keys(scan);
	if (!pmhash_key_read_live(&so->reader, tid, row_key))
		return false;
	for (int i = 0; i < scan->numberOfKeys; i++)
	{
		ScanKey		key = &scan->keyData[i];

		if (!(key->sk_flags & SK_SEARCHARRAY) &&
			!DatumGetBool(FunctionCall2Coll(&key->sk_func, key->sk_collation,
											row_key[key->sk_attno - 1], key->sk_argument)))
			return false;
	}
	return true;
}

/* Whether a scan key is an array (= ANY), which key_matches leaves alone. */
static bool
has_array_key(IndexScanDesc scan)
{
	for (int i = 0; i < scan->numberOfKeys; i++)
	{
		if (scan->keyData[i].sk_flags & SK_SEARCHARRAY)
			return true;
	}
	return false;
}

/*
 * amgettuple: the probe's TIDs in TID order, or in reverse going backward
 * (a cursor's MOVE BACKWARD); a scan that first goes backward starts from
 * the last.
 */
bool
pmhashgettuple(IndexScanDesc scan, ScanDirection dir)
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;
	int			step = ScanDirectionIsBackward(dir) ? -1 : 1;

	if (!so->searched)
	{
		/* the snapshot is known from the first call on */
		so->compare_keys = IsLogicalWorker() ||
			scan->xs_snapshot->snapshot_type == SNAPSHOT_DIRTY;
		search(scan, true);
		if (step < 0)
			so->pos = so->ntids;
	}
	else if (scan->kill_prior_tuple && so->can_kill && so->pos >= 0 && so->pos < so->ntids)
		pmhash_add_killed(&so->killed, &so->tids[so->pos]);
	for (so->pos += step; so->pos >= 0 && so->pos < so->ntids; so->pos += step)
	{
		ItemPointer tid = &so->tids[so->pos];

		if (so->compare_keys && !so->exact && !key_matches(scan, tid))
			continue;
		if (step > 0 && scan->heapRelation != NULL)
			pmhash_prefetch_heap(&so->prefetch, scan->heapRelation, so->tids, so->ntids, so->pos);
		scan->xs_heaptid = *tid;
		scan->xs_recheck = !so->exact && !(so->compare_keys && !has_array_key(scan));
		return true;
	}
	/* stay just outside the end reached, for a turn of direction */
	so->pos = step < 0 ? -1 : so->ntids;
	remove_killed(scan);
	return false;
}

/* amgetbitmap */
int64
pmhashgetbitmap(IndexScanDesc scan, TIDBitmap *tbm)
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;

	search(scan, false);
	if (so->ntids > 0)
		tbm_add_tuples(tbm, so->tids, so->ntids, !so->exact);
	return so->ntids;
}

/*
 * Whether the scan's last probe kept the elements of its array condition
 * for the executor's recheck: a plain scan of a one-column index whose
 * only condition is a hashed constant array (PMHASH_SK_RECHECK_HASHED).
 */
bool
pmhash_scan_kept_elements(IndexScanDesc scan)
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;

	return so->kept.elements != NULL;
}

/*
 * Whether value, the indexed value of a row, equals an element of the
 * array the scan kept (pmhash_scan_kept_elements must be true): the
 * recheck of the scan's condition, by the elements it hashed and sorted
 * already.
 */
bool
pmhash_scan_array_contains(IndexScanDesc scan, Datum value)
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;

	Assert(so->kept.elements != NULL);
	return pmhash_element_set_contains(scan->indexRelation, &scan->keyData[0], &so->kept, value);
}

/* amendscan */
void
pmhashendscan(IndexScanDesc scan)
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;

	remove_killed(scan);
	release_kept_elements(scan);
	if (so->killed.tids)
		pfree(so->killed.tids);
	if (so->reading_keys)
		pmhash_key_reader_end(&so->reader);
	if (so->heap != NULL)
		table_close(so->heap, NoLock);
	pfree(so->tids);
	pfree(so->cross_type);
	pfree(so->cross_proc);
	pfree(so);
}
