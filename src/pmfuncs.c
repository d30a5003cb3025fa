/*-------------------------------------------------------------------------
 *
 * pmfuncs.c
 *	  SQL-callable functions: pmhash_stats and pmhash_verify.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmfuncs.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "catalog/pg_class.h"
#include "commands/defrem.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/rel.h"

#include "pmhash.h"

/* Open a pmhash index for inspection, checking type and privileges. */
static Relation
open_inspected(Oid relid, LOCKMODE lockmode)
{
	Relation	index = relation_open(relid, lockmode);

	if (index->rd_rel->relkind != RELKIND_INDEX ||
		index->rd_rel->relam != get_index_am_oid("pmhash", false))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a pmhash index", RelationGetRelationName(index))));
	if (!pg_class_ownercheck(relid, GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for index %s", RelationGetRelationName(index)),
				 errdetail("Only the owner of the index and superusers may inspect it.")));
	if (RELATION_IS_OTHER_TEMP(index))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot inspect temporary indexes of other sessions")));
	return index;
}

PG_FUNCTION_INFO_V1(pmhash_stats);

/* pmhash_stats(regclass): one row describing the index file. */
Datum
pmhash_stats(PG_FUNCTION_ARGS)
{
	Relation	index = open_inspected(PG_GETARG_OID(0), AccessShareLock);
	TupleDesc	tupdesc;
	Datum		values[14];
	bool		nulls[14] = {0};
	PmhStats	st;
	PmhIndex   *ix;
	uint32		nshards;
	uint64		free_units;
	uint64		slots_used;
	int			i = 0;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	memset(&st, 0, sizeof(st));
	ix = pmh_open(index);
	nshards = UINT32_C(1) << ix->table.shard_bits;
	for (uint32 s = 0; s < nshards; s++)
	{
		LWLock	   *lock = pmh_shard_lock(ix->slot, s);
		uint64		desc;

		LWLockAcquire(lock, LW_SHARED);
		desc = pg_atomic_read_u64(&ix->slot->shards[s].desc);
		if (desc != 0)
		{
			PmhSegment	seg;

			pmh_segment_of(ix, desc, &seg);
			pmh_segment_stats(&seg, &st);
		}
		LWLockRelease(lock);
	}
	LWLockAcquire(pmh_alloc_lock(ix->slot), LW_SHARED);
	free_units = pmh_freemap_total(&ix->slot->freemap);
	LWLockRelease(pmh_alloc_lock(ix->slot));

	slots_used = st.entries - st.chained_entries + st.chains;
	values[i++] = CStringGetTextDatum(ix->slot->path);
	values[i++] = BoolGetDatum(ix->is_pmem != 0);
	values[i++] = Int64GetDatum((int64) (pg_atomic_read_u64(&ix->slot->file_units) * PMH_UNIT_SIZE));
	values[i++] = Int64GetDatum((int64) st.entries);
	values[i++] = Int32GetDatum((int32) nshards);
	values[i++] = Int64GetDatum((int64) st.segments);
	values[i++] = Int64GetDatum((int64) st.buckets);
	values[i++] = Int64GetDatum((int64) st.posting_blocks);
	values[i++] = Int64GetDatum((int64) st.chains);
	values[i++] = Float8GetDatum(st.buckets ? (double) slots_used / ((double) st.buckets * PMH_BUCKET_SLOTS) : 0.0);
	values[i++] = Float8GetDatum(st.probe_count ? (double) st.probe_sum / (double) st.probe_count : 0.0);
	values[i++] = Int32GetDatum((int32) st.max_probe);
	values[i++] = Int64GetDatum((int64) (free_units * PMH_UNIT_SIZE));
	values[i++] = Int64GetDatum((int64) st.overflow_buckets);
	pmh_leave();
	relation_close(index, AccessShareLock);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

typedef struct CompareState
{
	PmhSlot    *slot;
	char		msg[256];
	bool		bad;
} CompareState;

/* Attach callback of verification: the file must agree with shared memory. */
static void
compare_visit(void *arg, uint32 shard, uint64 desc, const PmhCounts *counts, int broken)
{
	CompareState *cs = arg;
	PmhShardState *state = &cs->slot->shards[shard];

	if (cs->bad)
		return;
	if (pg_atomic_read_u64(&state->desc) != desc)
		snprintf(cs->msg, sizeof(cs->msg),
				 "shard %u: the directory in shared memory differs from the file", shard);
	else if (state->counts.entries != counts->entries || state->counts.slots != counts->slots)
		snprintf(cs->msg, sizeof(cs->msg),
				 "shard %u: shared memory counts %llu entries in %llu slots, the file %llu in %llu",
				 shard, (unsigned long long) state->counts.entries,
				 (unsigned long long) state->counts.slots,
				 (unsigned long long) counts->entries, (unsigned long long) counts->slots);
	else
		return;
	cs->bad = true;
}

/*
 * Whether every extent the allocator holds as free (or retired) is free
 * according to the directory.
 */
static bool
freemap_within(const PmhFreeMap *held, const PmhFreeMap *truth)
{
	for (uint32 i = 0; i < held->count; i++)
	{
		uint64		unit = held->extents[i].unit;
		uint64		end = unit + held->extents[i].count;
		bool		inside = false;

		for (uint32 j = 0; j < truth->count && !inside; j++)
			inside = truth->extents[j].unit <= unit &&
				end <= truth->extents[j].unit + truth->extents[j].count;
		if (!inside)
			return false;
	}
	return true;
}

PG_FUNCTION_INFO_V1(pmhash_verify);

/*
 * pmhash_verify(regclass): check every structural invariant and return the
 * number of entries, or raise an error naming the first damage.  Holds a
 * ShareLock on the index, so that no writer runs meanwhile.
 */
Datum
pmhash_verify(PG_FUNCTION_ARGS)
{
	Relation	index = open_inspected(PG_GETARG_OID(0), ShareLock);
	PmhashMetaData meta;
	PmhIndex   *ix;
	PmhFileHeader *hdr;
	PmhFreeMap	truth;
	CompareState cs;
	uint32		nshards;
	uint64		file_units;
	uint64		total = 0;
	const char *err;
	char		msg[256];

	ix = pmh_open(index);
	/* after pmh_open, which may have reset an unlogged index */
	pmh_read_meta(index, &meta);
	hdr = (PmhFileHeader *) ix->base;
	file_units = pg_atomic_read_u64(&ix->slot->file_units);
	pmh_ensure_mapped(ix, file_units);
	hdr = (PmhFileHeader *) ix->base;
	nshards = UINT32_C(1) << ix->table.shard_bits;

	err = pmh_header_check(hdr, ix->mapped_len / PMH_UNIT_SIZE);
	if (err == NULL && hdr->build_generation != meta.build_generation)
		err = "the file does not belong to this build of the index";
	if (err == NULL && ix->mapped_len / PMH_UNIT_SIZE != file_units)
		err = "the file length differs from what shared memory records";

	/* directory, segment headers and overlaps, against shared memory */
	if (err == NULL)
	{
		memset(&cs, 0, sizeof(cs));
		cs.slot = ix->slot;
		pmh_freemap_init(&truth, palloc((nshards + 1) * sizeof(PmhExtent)), nshards + 1);
		err = pmh_table_attach(&ix->table, file_units, &truth, 0, compare_visit, &cs,
							   msg, sizeof(msg));
		if (err == NULL && cs.bad)
			err = cs.msg;
	}
	if (err == NULL)
	{
		PmhFreeMap	retired;
		PmhExtent  *ext = palloc((PMHASH_MAX_RETIRED + 1) * sizeof(PmhExtent));

		pmh_freemap_init(&retired, ext, PMHASH_MAX_RETIRED + 1);
		LWLockAcquire(pmh_alloc_lock(ix->slot), LW_SHARED);
		for (int r = 0; r < ix->slot->nretired; r++)
			pmh_freemap_release(&retired, ix->slot->retired[r].unit, ix->slot->retired[r].units);
		if (!freemap_within(&ix->slot->freemap, &truth) || !freemap_within(&retired, &truth))
			err = "the allocator holds space that a published segment uses";
		LWLockRelease(pmh_alloc_lock(ix->slot));
	}

	/* every segment in depth */
	for (uint32 s = 0; s < nshards && err == NULL; s++)
	{
		uint64		desc = pg_atomic_read_u64(&ix->slot->shards[s].desc);
		PmhSegment	seg;
		PmhCounts	counts;
		PmhEntry   *scratch;
		uint64		live;

		if (desc == 0)
			continue;
		CHECK_FOR_INTERRUPTS();
		pmh_segment_of(ix, desc, &seg);
		pmh_segment_count(&seg, &counts);
		scratch = palloc_extended((counts.entries + counts.slots + 1) * sizeof(PmhEntry),
								  MCXT_ALLOC_HUGE);
		err = pmh_segment_verify(&seg, s, ix->table.file_generation, file_units,
								 pmh_desc_unit(desc), scratch,
								 counts.entries + counts.slots + 1, &live, msg, sizeof(msg));
		pfree(scratch);
		total += live;
	}
	pmh_leave();
	if (err)
		pmh_raise_damaged(index, err);
	relation_close(index, ShareLock);
	PG_RETURN_INT64((int64) total);
}
