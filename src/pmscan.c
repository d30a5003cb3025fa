/*-------------------------------------------------------------------------
 *
 * pmscan.c
 *	  Index scans of pmhash: plain and bitmap.
 *
 * A scan probes once, without locks, and copies every TID stored under the
 * key's hash into backend memory before it returns the first one; the TIDs
 * are sorted and de-duplicated.  Only hash codes are stored, so every match
 * is rechecked against the heap tuple.
 *
 * The executor does that recheck, but PostgreSQL 15's logical replication
 * apply worker (RelationFindReplTupleByIndex) takes the first tuple an
 * index scan returns and ignores xs_recheck: a key sharing the hash code
 * would make it update or delete the wrong row.  In an apply worker a scan
 * therefore compares each candidate's key itself (pmkey.c) and returns only
 * rows whose key is equal.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmscan.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relscan.h"
#include "catalog/index.h"
#include "nodes/tidbitmap.h"
#include "pgstat.h"
#include "replication/logicalworker.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "pmhash.h"

typedef struct PmhScanOpaqueData
{
	ItemPointer tids;
	int			ntids;
	int			maxtids;
	int			next;
	bool		searched;
	Oid			cross_type;		/* type whose hash function cross_proc is */
	FmgrInfo	cross_proc;
	bool		compare_keys;	/* return only rows whose key is equal */
	bool		reading_keys;	/* reader begun */
	PmhashKeyReader reader;
} PmhScanOpaqueData;

typedef PmhScanOpaqueData *PmhScanOpaque;

/* ambeginscan */
IndexScanDesc
pmhashbeginscan(Relation index, int nkeys, int norderbys)
{
	IndexScanDesc scan = RelationGetIndexScan(index, nkeys, norderbys);
	PmhScanOpaque so = palloc0(sizeof(PmhScanOpaqueData));

	so->maxtids = 64;
	so->tids = palloc(so->maxtids * sizeof(ItemPointerData));
	so->compare_keys = IsLogicalWorker();
	scan->opaque = so;
	return scan;
}

/* amrescan */
void
pmhashrescan(IndexScanDesc scan, ScanKey keys, int nkeys pg_attribute_unused(),
			 ScanKey orderbys pg_attribute_unused(), int norderbys pg_attribute_unused())
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;

	if (keys && scan->numberOfKeys > 0)
		memmove(scan->keyData, keys, scan->numberOfKeys * sizeof(ScanKeyData));
	so->searched = false;
	so->ntids = 0;
	so->next = 0;
}

/*
 * Hash of a scan key's argument.  A cross-type key (an int4 compared with
 * an int8 column, say) is hashed with its own type's function from the
 * operator family, which hashes equal values alike.
 */
static uint32
key_hash(IndexScanDesc scan, ScanKey key)
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;
	Relation	index = scan->indexRelation;
	Oid			subtype = key->sk_subtype;

	if (!OidIsValid(subtype) || subtype == index->rd_opcintype[0])
		return pmhash_hash_datum(index, key->sk_argument);
	if (so->cross_type != subtype)
	{
		Oid			proc = get_opfamily_proc(index->rd_opfamily[0], subtype, subtype, 1);

		if (!OidIsValid(proc))
			elog(ERROR, "missing support function 1(%u,%u) for operator family %u of index \"%s\"",
				 subtype, subtype, index->rd_opfamily[0], RelationGetRelationName(index));
		fmgr_info(proc, &so->cross_proc);
		so->cross_type = subtype;
	}
	return DatumGetUInt32(FunctionCall1Coll(&so->cross_proc, key->sk_collation,
											key->sk_argument));
}

/* Probe once and keep every matching TID, sorted and unique. */
static void
search(IndexScanDesc scan)
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;
	Relation	index = scan->indexRelation;
	PmhashLocal   *ix;
	uint32		hash;
	int			n = 0;

	so->searched = true;
	so->ntids = 0;
	so->next = 0;
	pgstat_count_index_scan(index);
	if (scan->numberOfKeys < 1)
		elog(ERROR, "pmhash index scans need an equality condition");
	/* "= NULL" matches nothing */
	for (int i = 0; i < scan->numberOfKeys; i++)
	{
		if (scan->keyData[i].sk_flags & SK_ISNULL)
			return;
	}
	hash = key_hash(scan, &scan->keyData[0]);

	ix = pmhash_open(index, NULL);
	pmhash_lookup_entries(index, ix, scan->heapRelation, hash, &so->tids, &so->ntids, &so->maxtids);
	pmhash_leave();

	if (so->ntids > 1)
	{
		qsort(so->tids, so->ntids, sizeof(ItemPointerData), pmhash_tid_cmp);
		for (int i = 0; i < so->ntids; i++)
		{
			if (n > 0 && ItemPointerEquals(&so->tids[n - 1], &so->tids[i]))
				continue;
			so->tids[n++] = so->tids[i];
		}
		so->ntids = n;
	}
}

/*
 * Whether the row a candidate TID points to has a key equal to the scan
 * key's argument: the key of its live tuple (pmhash_key_read_live); a
 * chain with no live tuple matches nothing, as the apply worker's own
 * fetch with its dirty snapshot would find nothing either.
 */
static bool
key_matches(IndexScanDesc scan, ItemPointer tid)
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;
	ScanKey		key = &scan->keyData[0];
	Datum		row_key;

	if (!so->reading_keys)
	{
		pmhash_key_reader_begin(&so->reader, scan->heapRelation, scan->indexRelation,
								BuildIndexInfo(scan->indexRelation));
		so->reading_keys = true;
	}
	if (!pmhash_key_read_live(&so->reader, tid, &row_key))
		return false;
	return DatumGetBool(FunctionCall2Coll(&key->sk_func, key->sk_collation,
										  row_key, key->sk_argument));
}

/* amgettuple */
bool
pmhashgettuple(IndexScanDesc scan, ScanDirection dir pg_attribute_unused())
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;

	if (!so->searched)
		search(scan);
	while (so->next < so->ntids)
	{
		ItemPointer tid = &so->tids[so->next++];

		if (so->compare_keys && !key_matches(scan, tid))
			continue;
		scan->xs_heaptid = *tid;
		scan->xs_recheck = true;
		return true;
	}
	return false;
}

/* amgetbitmap */
int64
pmhashgetbitmap(IndexScanDesc scan, TIDBitmap *tbm)
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;

	search(scan);
	if (so->ntids > 0)
		tbm_add_tuples(tbm, so->tids, so->ntids, true);
	return so->ntids;
}

/* amendscan */
void
pmhashendscan(IndexScanDesc scan)
{
	PmhScanOpaque so = (PmhScanOpaque) scan->opaque;

	if (so->reading_keys)
		pmhash_key_reader_end(&so->reader);
	pfree(so->tids);
	pfree(so);
}
