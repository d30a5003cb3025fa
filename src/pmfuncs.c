/*-------------------------------------------------------------------------
 *
 * pmfuncs.c
 *	  SQL-callable functions: pmhash_stats, pmhash_shards and pmhash_verify.
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
#include "access/xlog.h"
#include "catalog/pg_class.h"
#include "commands/defrem.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/rel.h"

#include "pmhash.h"

/*
 * Open a pmhash index for inspection, checking that it exists, its type,
 * privileges, and that it was built.
 */
static Relation
open_inspected(Oid relid, LOCKMODE lockmode)
{
	Relation	index = try_relation_open(relid, lockmode);

	if (index == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	if (index->rd_rel->relkind != RELKIND_INDEX ||
		index->rd_rel->relam != get_index_am_oid("pmhash", false))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a pmhash index", RelationGetRelationName(index))));
	if (!object_ownercheck(RelationRelationId, relid, GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for index %s", RelationGetRelationName(index)),
				 errdetail("Only the owner of the index and superusers may inspect it.")));
	if (RELATION_IS_OTHER_TEMP(index))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot inspect temporary indexes of other sessions")));
	/* CREATE INDEX CONCURRENTLY makes the catalog entry before the build */
	if (!index->rd_index->indisvalid && RelationGetNumberOfBlocks(index) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pmhash index \"%s\" has not been built", RelationGetRelationName(index)),
				 errdetail("Its CREATE INDEX CONCURRENTLY or REINDEX CONCURRENTLY failed or was canceled before the build."),
				 errhint("Drop it with DROP INDEX, or build it with REINDEX INDEX.")));
	return index;
}

/* Add the statistics of one shard of an open index to *st, under its lock. */
static void
add_shard_stats(PmhashLocal *ix, uint32 shard, PmhStats *st)
{
	LWLock	   *lock = pmhash_shard_lock(ix->share, shard);
	PmhSegment	seg;

	LWLockAcquire(lock, LW_SHARED);
	pmhash_shard_segment(ix, shard, &seg);
	if (seg.unit != 0)
		pmh_segment_stats(&seg, st);
	LWLockRelease(lock);
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
	PmhashLocal   *ix;
	uint32		nshards;
	uint64		free_units;
	uint64		slots_used;
	int			i = 0;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	memset(&st, 0, sizeof(st));
	ix = pmhash_open(index, NULL);
	nshards = pmhash_slots(ix);
	for (uint32 s = 0; s < nshards; s++)
		add_shard_stats(ix, s, &st);
	LWLockAcquire(pmhash_alloc_lock(ix->share), LW_SHARED);
	free_units = pmh_freemap_total(&ix->share->freemap);
	LWLockRelease(pmhash_alloc_lock(ix->share));

	slots_used = st.entries - st.chained_entries + st.chains;
	values[i++] = CStringGetTextDatum(ix->share->path);
	values[i++] = BoolGetDatum(ix->is_pmem != 0);
	values[i++] = Int64GetDatum((int64) (pg_atomic_read_u64(&ix->share->file_units) * PMH_UNIT_SIZE));
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
	pmhash_leave();
	relation_close(index, AccessShareLock);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

PG_FUNCTION_INFO_V1(pmhash_shards);

/* pmhash_shards(regclass): one row per shard, its entries and its segment. */
Datum
pmhash_shards(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Relation	index = open_inspected(PG_GETARG_OID(0), AccessShareLock);
	PmhashLocal   *ix;
	uint32		nshards;

	InitMaterializedSRF(fcinfo, 0);
	ix = pmhash_open(index, NULL);
	nshards = pmhash_slots(ix);
	for (uint32 s = 0; s < nshards; s++)
	{
		PmhStats	st;
		Datum		values[5];
		bool		nulls[5] = {0};

		memset(&st, 0, sizeof(st));
		add_shard_stats(ix, s, &st);
		values[0] = Int32GetDatum((int32) s);
		values[1] = Int64GetDatum((int64) st.entries);
		values[2] = Int64GetDatum((int64) st.buckets);
		values[3] = Int64GetDatum((int64) st.posting_blocks);
		/* a segment: its header unit, its buckets and its posting blocks */
		values[4] = Int64GetDatum(st.segments == 0 ? 0 :
								  (int64) ((1 + st.buckets + st.posting_blocks) * PMH_UNIT_SIZE));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	pmhash_leave();
	relation_close(index, AccessShareLock);
	return (Datum) 0;
}

typedef struct CompareState
{
	PmhashShare    *share;
	char		msg[256];
	bool		bad;
} CompareState;

/* Attach callback of verification: the file must agree with shared memory. */
static void
compare_visit(void *arg, uint32 shard, const PmhPublication *pub, const PmhCounts *counts,
			  int broken pg_attribute_unused())
{
	CompareState *cs = arg;
	PmhashShardState *state = pmhash_shard_state(cs->share, shard);
	PmhPublication mirror;

	if (cs->bad)
		return;
	pmh_mirror_read(&state->mirror, &mirror);
	if (mirror.desc != pub->desc || mirror.nposting != pub->nposting ||
		mirror.depth != pub->depth)
		snprintf(cs->msg, sizeof(cs->msg),
				 "shard %u: the descriptor in shared memory differs from the file", shard);
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
 * according to the descriptors.  Both maps are sorted by unit and their
 * extents do not overlap, so one walk over both does.
 */
static bool
freemap_within(const PmhFreeMap *held, const PmhFreeMap *truth)
{
	uint32		j = 0;

	for (uint32 i = 0; i < held->count; i++)
	{
		uint64		unit = held->extents[i].unit;
		uint64		end = unit + held->extents[i].count;

		while (j < truth->count && truth->extents[j].unit + truth->extents[j].count <= unit)
			j++;
		if (j == truth->count || truth->extents[j].unit > unit ||
			end > truth->extents[j].unit + truth->extents[j].count)
			return false;
	}
	return true;
}

PG_FUNCTION_INFO_V1(pmhash_verify);

/*
 * Whole-file checks, which need writers stopped: the descriptors, segment
 * headers and overlaps agree with shared memory, and the allocator holds
 * only space no segment uses.
 */
static const char *
verify_file(PmhashLocal *ix, uint64 file_units, char *msg, size_t msglen)
{
	uint64		shard_map = pg_atomic_read_u64(&ix->share->shard_map);
	uint32		nshards = pmh_map_slots(shard_map);
	PmhFreeMap	truth;
	PmhFreeMap	retired;
	CompareState cs;
	const char *err;

	memset(&cs, 0, sizeof(cs));
	cs.share = ix->share;
	/* a free extent follows each segment, the descriptor array or the header */
	pmh_freemap_init(&truth, palloc((nshards + 4) * sizeof(PmhExtent)), nshards + 4);
	err = pmh_table_attach(&ix->table, shard_map, file_units, &truth, 0, compare_visit, &cs, msg,
						   msglen);
	if (err == NULL && cs.bad)
	{
		strlcpy(msg, cs.msg, msglen);
		err = msg;
	}
	if (err != NULL)
		return err;
	pmh_freemap_init(&retired, palloc((PMHASH_MAX_RETIRED + 1) * sizeof(PmhExtent)),
					 PMHASH_MAX_RETIRED + 1);
	LWLockAcquire(pmhash_alloc_lock(ix->share), LW_SHARED);
	for (int r = 0; r < ix->share->nretired; r++)
		pmh_freemap_release(&retired, ix->share->retired[r].unit, ix->share->retired[r].units);
	if (!freemap_within(&ix->share->freemap, &truth) || !freemap_within(&retired, &truth))
		err = "the allocator holds space that a published segment uses";
	LWLockRelease(pmhash_alloc_lock(ix->share));
	return err;
}

/*
 * Check one shard in depth under its writer lock: the file's descriptors
 * agrees with shared memory, the segment is sound, and its counts match.
 */
static const char *
verify_shard(PmhashLocal *ix, uint32 shard, uint64 *live, char *msg, size_t msglen)
{
	PmhashShardState *state = pmhash_shard_state(ix->share, shard);
	LWLock	   *lock = pmhash_shard_lock(ix->share, shard);
	const uint64 *dir;
	const char *err = NULL;
	PmhSegment	seg;
	uint64		file_units;

	*live = 0;
	LWLockAcquire(lock, LW_SHARED);
	pmhash_shard_segment(ix, shard, &seg);
	file_units = pg_atomic_read_u64(&ix->share->file_units);
	dir = pmh_table_descriptors(&ix->table);
	if (state->broken)
	{
		snprintf(msg, msglen, "shard %u is broken and awaits replay of its rebuild", shard);
		err = msg;
	}
	else if (dir[shard] != (seg.unit == 0 ? 0 : pmh_desc_make(seg.unit, seg.nbuckets)))
	{
		snprintf(msg, msglen, "shard %u: the descriptor in shared memory differs from the file",
				 shard);
		err = msg;
	}
	else if (seg.unit != 0)
	{
		PmhCounts	counts;
		PmhEntry   *scratch;

		pmh_segment_count(&seg, &counts);
		scratch = palloc_extended((counts.entries + counts.slots + 1) * sizeof(PmhEntry),
								  MCXT_ALLOC_HUGE);
		err = pmh_segment_verify(&seg, ix->table.file_generation, file_units, scratch,
								 counts.entries + counts.slots + 1, live, msg, msglen);
		pfree(scratch);
		if (err == NULL &&
			(state->counts.entries != counts.entries || state->counts.slots != counts.slots))
		{
			snprintf(msg, msglen,
					 "shard %u: shared memory counts %llu entries in %llu slots, the file %llu in %llu",
					 shard, (unsigned long long) state->counts.entries,
					 (unsigned long long) state->counts.slots,
					 (unsigned long long) counts.entries, (unsigned long long) counts.slots);
			err = msg;
		}
	}
	LWLockRelease(lock);
	return err;
}

/*
 * pmhash_verify(regclass): check every structural invariant and return the
 * number of entries, or raise an error naming the first damage.  On a
 * primary it holds a ShareLock on the index, so that no writer runs and the
 * whole file can be checked at once; during recovery, where replay writes
 * without heavyweight locks, each shard is checked under its writer lock.
 */
Datum
pmhash_verify(PG_FUNCTION_ARGS)
{
	bool		recovery = RecoveryInProgress();
	LOCKMODE	lockmode = recovery ? AccessShareLock : ShareLock;
	Relation	index = open_inspected(PG_GETARG_OID(0), lockmode);
	PmhashMetaData meta;
	PmhashLocal   *ix;
	uint32		nshards;
	uint64		file_units;
	uint64		total = 0;
	const char *err;
	char		msg[256];

	ix = pmhash_open(index, NULL);
	/* after pmhash_open, which may have reset an unlogged index */
	pmhash_read_meta(index, &meta, NULL);
	file_units = pg_atomic_read_u64(&ix->share->file_units);
	pmhash_ensure_mapped(ix, file_units);
	nshards = pmhash_slots(ix);

	err = pmhash_check_attached_header(ix);
	if (err == NULL && ix->table.file_generation != meta.build_generation)
		err = "The file does not belong to this build of the index.";
	if (err == NULL && !recovery && ix->mapped_len / PMH_UNIT_SIZE != file_units)
		err = "the file length differs from what shared memory records";
	for (uint32 s = 0; s < nshards && err == NULL; s++)
	{
		uint64		live;

		CHECK_FOR_INTERRUPTS();
		err = verify_shard(ix, s, &live, msg, sizeof(msg));
		total += live;
	}
	if (err == NULL && !recovery)
		err = verify_file(ix, file_units, msg, sizeof(msg));
	pmhash_leave();
	if (err)
		pmhash_raise_damaged(RelationGetRelationName(index), err);
	relation_close(index, lockmode);
	PG_RETURN_INT64((int64) total);
}
