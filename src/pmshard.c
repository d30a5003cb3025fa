/*-------------------------------------------------------------------------
 *
 * pmshard.c
 *	  Hashing keys and the shard-level entry points used by inserts, scans
 *	  and VACUUM: locking, growth and the lock-free probe.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmshard.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "storage/itemptr.h"
#include "utils/rel.h"

#include "pmhash.h"

StaticAssertDecl(sizeof(PmhTid) == sizeof(ItemPointerData),
				 "PmhTid must have the layout of ItemPointerData");

/* 32-bit hash of an indexed value, with the index's opclass and collation. */
uint32
pmh_hash_datum(Relation index, Datum value)
{
	FmgrInfo   *proc = index_getprocinfo(index, 1, 1);

	return DatumGetUInt32(FunctionCall1Coll(proc, index->rd_indcollation[0], value));
}

/* The segment a descriptor publishes, mapped in full. */
void
pmh_segment_of(PmhIndex *ix, uint64 desc, PmhSegment *seg)
{
	uint64		unit = pmh_desc_unit(desc);

	pmh_ensure_mapped(ix, unit + 1 + pmh_desc_nbuckets(desc));
	pmh_table_segment(&ix->table, desc, seg);
	pmh_ensure_mapped(ix, unit + 1 + pmh_desc_nbuckets(desc) +
					  pmh_segment_header(seg)->nposting);
	/* a remap moves the segment */
	pmh_table_segment(&ix->table, desc, seg);
}

/* Insert one entry, growing its shard when needed. */
void
pmh_insert_entry(Relation index, PmhIndex *ix, uint32 hash, ItemPointer tid)
{
	uint32		shard = pmh_shard_of(hash, ix->table.shard_bits);
	PmhShardState *state = &ix->slot->shards[shard];
	LWLock	   *lock = pmh_shard_lock(ix->slot, shard);
	PmhTid		ptid;
	uint64		desc;
	PmhStatus	st;

	memcpy(&ptid, tid, sizeof(PmhTid));
	LWLockAcquire(lock, LW_EXCLUSIVE);
	desc = pg_atomic_read_u64(&state->desc);
	if (desc != 0)
	{
		PmhSegment	seg;

		pmh_segment_of(ix, desc, &seg);
	}
	st = pmh_table_insert(&ix->table, shard, desc, &state->counts, hash, ptid, 0);
	LWLockRelease(lock);
	if (st == PMH_CORRUPT)
		pmh_raise_damaged(index, psprintf("Shard %u has an invalid posting chain reference.", shard));
	if (st == PMH_FULL)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("pmhash index \"%s\" shard %u cannot grow further",
						RelationGetRelationName(index), shard),
				 errhint("Rebuild the index with more shards: ALTER INDEX ... SET (shards = N); REINDEX.")));
}

typedef struct TidCollector
{
	ItemPointer tids;
	int			ntids;
	int			maxtids;
} TidCollector;

/* Lookup sink: append validated TIDs, growing the array. */
static void
collect_tids(void *arg, const PmhTid *tids, int count)
{
	TidCollector *c = arg;

	if (c->ntids + count > c->maxtids)
	{
		int			newmax = Max(c->maxtids * 2, c->ntids + count);

		c->tids = repalloc_huge(c->tids, (Size) newmax * sizeof(ItemPointerData));
		c->maxtids = newmax;
	}
	memcpy(&c->tids[c->ntids], tids, count * sizeof(ItemPointerData));
	c->ntids += count;
}

/*
 * Collect every TID stored under hash into *tids (a palloc'd array of
 * *maxtids entries that grows as needed), without taking a lock unless a
 * bucket keeps changing under the probe.
 */
void
pmh_lookup_entries(Relation index, PmhIndex *ix, uint32 hash,
				   ItemPointer *tids, int *ntids, int *maxtids)
{
	uint32		shard = pmh_shard_of(hash, ix->table.shard_bits);
	PmhShardState *state = &ix->slot->shards[shard];
	TidCollector c = {*tids, 0, *maxtids};
	uint64		desc = pg_atomic_read_u64(&state->desc);
	PmhStatus	st = PMH_OK;

	if (desc != 0)
	{
		PmhSegment	seg;

		pmh_segment_of(ix, desc, &seg);
		st = pmh_lookup(&seg, hash, collect_tids, &c);
		if (st == PMH_BUSY)
		{
			/* writers kept changing a bucket: read it with them locked out */
			LWLock	   *lock = pmh_shard_lock(ix->slot, shard);

			LWLockAcquire(lock, LW_SHARED);
			c.ntids = 0;
			desc = pg_atomic_read_u64(&state->desc);
			st = PMH_OK;
			if (desc != 0)
			{
				pmh_segment_of(ix, desc, &seg);
				st = pmh_lookup(&seg, hash, collect_tids, &c);
			}
			LWLockRelease(lock);
		}
	}
	*tids = c.tids;
	*ntids = c.ntids;
	*maxtids = c.maxtids;
	if (st == PMH_CORRUPT)
		pmh_raise_damaged(index, psprintf("Shard %u has an invalid posting chain reference.", shard));
}
