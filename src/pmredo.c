/*-------------------------------------------------------------------------
 *
 * pmredo.c
 *	  The pmhash WAL resource manager: replay of its records and the
 *	  recovery steps it runs before and after replay (their descriptions
 *	  are in pmxlogdesc.c).
 *
 * The records, why their replay is idempotent, the six durability hazards
 * and what each persistence path survives are described in src/README
 * (WAL records; Durability hazards).  Replayed changes are made durable
 * every 1,024 records; before the first unsynced change of a file its
 * header gets REDO_DIRTY, cleared with the synced position after each sync
 * (see Recovery there).
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmredo.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xloginsert.h"
#include "access/xlogreader.h"
#include "access/xlogrecovery.h"
#include "access/xlogutils.h"
#include "common/relpath.h"
#include "miscadmin.h"
#include "storage/standby.h"
#include "utils/memutils.h"

#include "pmhash.h"
#include "pmxlog.h"

/* Startup process: files whose records could not be applied. */
static List *unapplied_files = NIL;
static uint64 records_since_sync = 0;

/*
 * The entries of a DELETE, KILL or REBUILD record, whose header has
 * header_size bytes, decoded into palloc'd memory; NULL (logged) if the
 * record is malformed.
 */
static PmhEntry *
record_entries(XLogReaderState *record, bool with_hash, size_t header_size)
{
	xl_pmhash_entries *xlrec = (xl_pmhash_entries *) XLogRecGetData(record);
	PmhEntry   *entries = palloc_extended(Max(xlrec->count, 1) * sizeof(PmhEntry),
										  MCXT_ALLOC_HUGE);

	if (XLogRecGetDataLen(record) < header_size ||
		pmh_decode_entries((uint8 *) xlrec + header_size,
						   XLogRecGetDataLen(record) - header_size,
						   xlrec->count, with_hash, entries) != 0)
	{
		pfree(entries);
		ereport(LOG,
				(errmsg("pmhash: malformed WAL record at %X/%X",
						LSN_FORMAT_ARGS(record->ReadRecPtr))));
		return NULL;
	}
	return entries;
}

/* Remember a file whose records replay had to skip. */
static void
note_unapplied(const RelFileLocator *node)
{
	ListCell   *lc;
	RelFileLocator *copy;

	foreach(lc, unapplied_files)
	{
		if (RelFileLocatorEquals(*(RelFileLocator *) lfirst(lc), *node))
			return;
	}
	copy = MemoryContextAlloc(TopMemoryContext, sizeof(RelFileLocator));
	*copy = *node;
	unapplied_files = lappend(unapplied_files, copy);
	ereport(LOG,
			(errmsg("pmhash: WAL for index file %u/%u/%u cannot be replayed; the index will be rebuilt from its table after recovery",
					node->spcOid, node->dbOid, node->relNumber)));
}

/*
 * Open an index file for a replayed change; NULL (noted) if it cannot take
 * records.  The caller must pmhash_leave().
 */
static PmhashLocal *
redo_open(const RelFileLocator *node)
{
	PmhashLocal   *ix = pmhash_open_for_redo(node);

	if (ix == NULL)
		note_unapplied(node);
	else
		pmhash_redo_will_change(ix);
	return ix;
}

/*
 * Open an index file for a replayed change of one slot; NULL (noted) if it
 * cannot take records or its map has no such slot (a split this replay
 * could not make).  The caller must pmhash_leave().
 */
static PmhashLocal *
redo_open_slot(const RelFileLocator *node, uint32 slot)
{
	PmhashLocal   *ix = redo_open(node);

	if (ix != NULL && slot >= pmhash_slots(ix))
	{
		note_unapplied(node);
		pmhash_leave();
		return NULL;
	}
	return ix;
}

/*
 * Replay a batch of inserts, each only if absent.  A shard that recovery
 * found broken waits for its REBUILD record.
 */
static void
redo_insert(XLogReaderState *record)
{
	xl_pmhash_insert *xlrec = (xl_pmhash_insert *) XLogRecGetData(record);
	char	   *packed = (char *) xlrec + sizeof(xl_pmhash_insert);
	PmhashLocal   *ix = redo_open(&xlrec->node);

	if (ix == NULL)
		return;
	for (uint32 i = 0; i < xlrec->count; i++)
	{
		uint32		hash;
		PmhTid		tid;
		uint32		shard;
		PmhashShardState *state;

		memcpy(&hash, packed + i * PACKED_ENTRY_SIZE, sizeof(uint32));
		memcpy(&tid, packed + i * PACKED_ENTRY_SIZE + sizeof(uint32), sizeof(PmhTid));
		shard = pmhash_slot_of(ix, hash);
		state = pmhash_shard_state(ix->share, shard);
		LWLockAcquire(pmhash_shard_lock(ix->share, shard), LW_EXCLUSIVE);
		if (!state->broken)
		{
			PmhSegment	seg;
			PmhStatus	st;

			pmhash_shard_segment(ix, shard, &seg);
			st = pmh_table_insert(&ix->table, &seg, &state->counts, hash, tid,
								  record->EndRecPtr, PMH_INSERT_IF_ABSENT, xlrec->since);
			if (st == PMH_CORRUPT || st == PMH_FULL)
				state->broken = true;
		}
		LWLockRelease(pmhash_shard_lock(ix->share, shard));
	}
	pmhash_leave();
}

/* The entries a replayed deletion names: sorted by TID, or by hash and TID if exact. */
typedef struct DeletedSet
{
	PmhEntry   *entries;
	uint64		count;
	bool		exact;			/* only entries of these hashes go */
	uint32		shard_bits;		/* of the file, for comparing hashes */
} DeletedSet;

/* Replay callback: whether an entry is among the deleted ones. */
static int
in_deleted_set(void *arg, uint32 hash, PmhTid tid)
{
	DeletedSet *set = arg;
	PmhEntry	key;

	key.tid = tid;
	if (!set->exact)
		return bsearch(&key, set->entries, set->count, sizeof(PmhEntry),
					   pmhash_entry_tid_cmp) != NULL;
	key.hash = pmh_canonical_hash(hash, set->shard_bits);
	return bsearch(&key, set->entries, set->count, sizeof(PmhEntry),
				   pmh_entry_cmp) != NULL;
}

/*
 * Replay a deletion by VACUUM (DELETE, or DELETE_EXACT of phantoms) or by
 * a scan (KILL, first resolving the conflicts with hot-standby queries
 * that may still need the rows): one pass over the slot's shard, and the
 * slots split from it, deleting by set.
 */
static void
redo_delete(XLogReaderState *record, uint8 info)
{
	xl_pmhash_entries *xlrec = (xl_pmhash_entries *) XLogRecGetData(record);
	PmhashLocal   *ix;
	uint32		step;
	uint32		nslots;
	DeletedSet	set;
	PmhDeleteOps ops = {in_deleted_set, NULL, NULL, &set};

	if (info == XLOG_PMHASH_KILL && InHotStandby)
	{
		TransactionId horizon = ((xl_pmhash_kill *) xlrec)->conflict_horizon;

		if (TransactionIdIsValid(horizon))
			ResolveRecoveryConflictWithSnapshot(horizon, false, xlrec->node);
	}
	ix = redo_open_slot(&xlrec->node, xlrec->shard);
	if (ix == NULL)
		return;
	set.count = xlrec->count;
	set.exact = info == XLOG_PMHASH_DELETE_EXACT;
	set.shard_bits = ix->table.shard_bits;
	set.entries = record_entries(record, set.exact,
								 info == XLOG_PMHASH_KILL ? sizeof(xl_pmhash_kill) :
								 sizeof(xl_pmhash_entries));
	if (set.entries == NULL)
	{
		pmhash_leave();
		return;
	}
	/* hashes as a segment of this file keeps them, in the callback's order */
	if (set.exact)
	{
		for (uint64 i = 0; i < set.count; i++)
			set.entries[i].hash = pmh_canonical_hash(set.entries[i].hash, set.shard_bits);
		qsort(set.entries, set.count, sizeof(PmhEntry), pmh_entry_cmp);
	}

	/*
	 * The slot and every slot split from its shard since it first existed:
	 * over a file ahead of the WAL, older inserts' replay may have put
	 * entries of these TIDs there (src/README, The shard map in the WAL).
	 */
	step = UINT32_C(1) << pmh_slot_first_depth(xlrec->shard, ix->table.shard_bits);
	nslots = pmhash_slots(ix);
	for (uint32 slot = xlrec->shard; slot < nslots; slot += step)
	{
		PmhashShardState *state = pmhash_shard_state(ix->share, slot);

		LWLockAcquire(pmhash_shard_lock(ix->share, slot), LW_EXCLUSIVE);
		if (!state->broken)
		{
			PmhSegment	seg;
			uint64		removed;

			pmhash_shard_segment(ix, slot, &seg);
			if (seg.unit != 0 &&
				pmh_bulk_delete(&seg, &ops, record->EndRecPtr, &ix->persist, &state->counts,
								&removed) != PMH_OK)
				state->broken = true;
		}
		LWLockRelease(pmhash_shard_lock(ix->share, slot));
	}
	pmhash_leave();
	pfree(set.entries);
}

/*
 * Replay a rebuild: the shard's content becomes the record's, or the part of
 * it in the slot's shard if the file's map is past a later split of it (the
 * SPLIT record that follows replaces both halves).
 */
static void
redo_rebuild(XLogReaderState *record)
{
	xl_pmhash_entries *xlrec = (xl_pmhash_entries *) XLogRecGetData(record);
	PmhashLocal   *ix = redo_open_slot(&xlrec->node, xlrec->shard);
	PmhashShardState *state;
	PmhEntry   *entries;
	PmhSegment	seg;
	PmhStatus	st;

	if (ix == NULL)
		return;
	entries = record_entries(record, true, sizeof(xl_pmhash_entries));
	state = pmhash_shard_state(ix->share, xlrec->shard);
	if (entries == NULL)
	{
		state->broken = true;
		pmhash_leave();
		return;
	}
	LWLockAcquire(pmhash_shard_lock(ix->share, xlrec->shard), LW_EXCLUSIVE);
	/* a broken shard's segment is not used: it is replaced as if absent */
	if (state->broken)
	{
		uint64		map = pg_atomic_read_u64(&ix->share->shard_map);

		pmh_table_segment(&ix->table, xlrec->shard,
						  &(PmhPublication) {0, 0, pmh_map_depth(map, xlrec->shard)}, &seg);
	}
	else
		pmhash_shard_segment(ix, xlrec->shard, &seg);
	st = pmh_table_rebuild(&ix->table, &seg, entries, xlrec->count, 1,
						   xlrec->fill_permille / 1000.0, record->EndRecPtr, &state->counts);
	state->broken = st != PMH_OK;
	LWLockRelease(pmhash_shard_lock(ix->share, xlrec->shard));
	pmhash_leave();
	pfree(entries);
}

/*
 * Replace the two halves of a split wholesale from its record's entries, as
 * REBUILD replaces a shard: each slot at its depth in the current map
 * (deeper than the record's if it split again since), with the entries of
 * its own shard.
 */
static PmhStatus
replace_halves(PmhashLocal *ix, const xl_pmhash_split *xlrec, const PmhEntry *entries,
			   XLogRecPtr lsn)
{
	uint64		map = pg_atomic_read_u64(&ix->share->shard_map);
	uint32		level = pmh_map_level(xlrec->map);
	uint32		slots[2] = {xlrec->entries.shard, xlrec->entries.shard + (UINT32_C(1) << level)};

	for (int h = 0; h < 2; h++)
	{
		PmhashShardState *state = pmhash_shard_state(ix->share, slots[h]);
		PmhPublication pub;
		PmhSegment	seg;

		if (state->broken || !pmh_mirror_read(&state->mirror, &pub))
			pub = (PmhPublication) {0, 0, 0};
		pub.depth = pmh_map_depth(map, slots[h]);
		pmh_table_segment(&ix->table, slots[h], &pub, &seg);
		if (pmh_table_rebuild(&ix->table, &seg, entries, xlrec->entries.count, 1,
							  PMH_REBUILD_FILL, lsn, &state->counts) != PMH_OK)
			return PMH_CORRUPT;
		state->broken = false;
	}
	return PMH_OK;
}

/*
 * Split the shard at the split pointer of map, the share's map, as the
 * primary did, holding both slots' locks: from its segment, or from the
 * split's entries if the segment is broken (none: it stays broken).
 */
static PmhStatus
split_at_pointer(PmhashLocal *ix, uint64 map, const PmhEntry *entries, uint64 count,
				 XLogRecPtr lsn)
{
	uint32		low = pmh_map_split(map);
	uint32		high = low + (UINT32_C(1) << pmh_map_level(map));
	PmhashShardState *state = pmhash_shard_state(ix->share, low);
	PmhCounts	counts[2];
	PmhSegment	seg;
	PmhStatus	st = PMH_OK;

	if (state->broken)
	{
		if (entries == NULL)
			return PMH_CORRUPT;
		pmh_table_segment(&ix->table, low, &(PmhPublication) {0, 0, pmh_map_level(map)}, &seg);
		st = pmh_table_rebuild(&ix->table, &seg, entries, count, 1, PMH_REBUILD_FILL, lsn,
							   &state->counts);
	}
	if (st == PMH_OK)
	{
		pmhash_shard_segment(ix, low, &seg);
		st = pmh_table_split(&ix->table, &seg, map, lsn, &counts[0], &counts[1]);
	}
	if (st == PMH_OK)
	{
		state->counts = counts[0];
		pmhash_shard_state(ix->share, high)->counts = counts[1];
		pmhash_shard_state(ix->share, high)->broken = false;
	}
	state->broken = st != PMH_OK;
	return st;
}

/*
 * Bring the share's map up to a logged one by splitting, from their
 * segments, the shards the primary split without a record that reached
 * this WAL: a crash lost the records, not the splits, which its file kept
 * (src/README, The shard map in the WAL).  Stops at a broken shard.
 */
static void
catch_up_map(PmhashLocal *ix, uint64 logged, XLogRecPtr lsn)
{
	for (;;)
	{
		uint64		map = pg_atomic_read_u64(&ix->share->shard_map);
		uint32		low = pmh_map_split(map);
		uint32		high = low + (UINT32_C(1) << pmh_map_level(map));
		PmhStatus	st;

		if (pmh_map_slots(map) >= pmh_map_slots(logged))
			return;
		if (!pmhash_share_make_room(ix->share, high))
		{
			note_unapplied(&ix->node);
			return;
		}
		pmhash_lock_shard_pair(ix->share, low, high);
		st = split_at_pointer(ix, map, NULL, 0, lsn);
		pmhash_unlock_shard_pair(ix->share, low, high);
		if (st != PMH_OK)
			return;
	}
}

/* Replay a shard map: splits this WAL has no record of are made. */
static void
redo_map(XLogReaderState *record)
{
	xl_pmhash_map *xlrec = (xl_pmhash_map *) XLogRecGetData(record);
	PmhashLocal   *ix = redo_open(&xlrec->node);

	if (ix == NULL)
		return;
	catch_up_map(ix, xlrec->map, record->EndRecPtr);
	pmhash_leave();
}

/*
 * Replay a split: the shard at the split pointer of the record's map splits
 * as it did on the primary (a broken shard first rebuilt from the record's
 * entries), after any splits this WAL has no record of (catch_up_map).  If
 * the file's map is past the record's already (the map reached the file
 * before the record reached the WAL, or later changes are in it too), both
 * halves are replaced wholesale from the record, as REBUILD replaces a
 * shard; the records after it bring them up to date.
 */
static void
redo_split(XLogReaderState *record)
{
	xl_pmhash_split *xlrec = (xl_pmhash_split *) XLogRecGetData(record);
	PmhashLocal   *ix = redo_open(&xlrec->entries.node);
	uint32		low = xlrec->entries.shard;
	uint32		high = low + (UINT32_C(1) << pmh_map_level(xlrec->map));
	PmhEntry   *entries;
	uint64		map;

	if (ix == NULL)
		return;
	entries = record_entries(record, true, sizeof(xl_pmhash_split));
	if (entries == NULL || low != pmh_map_split(xlrec->map) ||
		pmh_map_level(xlrec->map) >= PMH_MAX_SHARD_BITS ||
		!pmhash_share_make_room(ix->share, high))
	{
		note_unapplied(&xlrec->entries.node);
		if (entries)
			pfree(entries);
		pmhash_leave();
		return;
	}
	catch_up_map(ix, xlrec->map, record->EndRecPtr);
	pmhash_lock_shard_pair(ix->share, low, high);
	/* maps compare by their slots: where the descriptors lie is each file's own */
	map = pg_atomic_read_u64(&ix->share->shard_map);
	if (pmh_map_slots(map) == pmh_map_slots(xlrec->map))
		(void) split_at_pointer(ix, map, entries, xlrec->entries.count, record->EndRecPtr);
	else if (pmh_map_slots(map) > high &&
			 replace_halves(ix, xlrec, entries, record->EndRecPtr) != PMH_OK)
		pmhash_shard_state(ix->share, low)->broken = true;
	pmhash_unlock_shard_pair(ix->share, low, high);
	pmhash_leave();
	pfree(entries);
}

/* Replay the creation of an index file. */
static void
redo_create(XLogReaderState *record)
{
	xl_pmhash_create *xlrec = (xl_pmhash_create *) XLogRecGetData(record);
	FullTransactionId creator = InvalidFullTransactionId;
	uint32		state = 0;

	if (xlrec->flags & XLOG_PMHASH_CREATE_TRANSACTIONAL)
		creator = pmhash_recent_full_xid(XLogRecGetXid(record));
	if (xlrec->flags & XLOG_PMHASH_CREATE_BUILDING)
		state = PMH_STATE_BUILDING;
	pmhash_create_for_redo(&xlrec->node, xlrec->generation, xlrec->shard_bits, state, creator);
}

/* Replay the end of a rebuild from the table: the file is whole. */
static void
redo_built(XLogReaderState *record)
{
	xl_pmhash_built *xlrec = (xl_pmhash_built *) XLogRecGetData(record);
	PmhashLocal   *ix = redo_open(&xlrec->node);

	if (ix == NULL)
		return;
	pmhash_mark_built(ix);
	pmhash_leave();
}

/*
 * Replay a COPY of pmhash 0.2, which named the source alone: the source as
 * of the record is gone, so the copy is rebuilt from its table.
 */
static void
redo_copy(XLogReaderState *record)
{
	xl_pmhash_copy *xlrec = (xl_pmhash_copy *) XLogRecGetData(record);

	note_unapplied(&xlrec->to);
}

/* Replay a part of a file copied to a new relfilenode, as it was copied. */
static void
redo_copy_data(XLogReaderState *record)
{
	xl_pmhash_copy_data *xlrec = (xl_pmhash_copy_data *) XLogRecGetData(record);

	if (XLogRecGetDataLen(record) != sizeof(xl_pmhash_copy_data) + (uint64) xlrec->size ||
		xlrec->offset > xlrec->file_size || xlrec->size > xlrec->file_size - xlrec->offset)
	{
		ereport(LOG,
				(errmsg("pmhash: malformed WAL record at %X/%X",
						LSN_FORMAT_ARGS(record->ReadRecPtr))));
		note_unapplied(&xlrec->node);
		return;
	}
	if (!pmhash_copy_data_for_redo(&xlrec->node, xlrec->file_size, xlrec->offset,
								   (char *) xlrec + sizeof(xl_pmhash_copy_data),
								   xlrec->size, xlrec->flags))
		note_unapplied(&xlrec->node);
}

/* rm_redo */
static void
pmhash_redo(XLogReaderState *record)
{
	uint8		info = XLogRecGetInfo(record) & ~XLR_INFO_MASK;

	switch (info)
	{
		case XLOG_PMHASH_CREATE:
			redo_create(record);
			break;
		case XLOG_PMHASH_INSERT:
			redo_insert(record);
			break;
		case XLOG_PMHASH_DELETE:
		case XLOG_PMHASH_DELETE_EXACT:
		case XLOG_PMHASH_KILL:
			redo_delete(record, info);
			break;
		case XLOG_PMHASH_REBUILD:
			redo_rebuild(record);
			break;
		case XLOG_PMHASH_SPLIT:
			redo_split(record);
			break;
		case XLOG_PMHASH_MAP:
			redo_map(record);
			break;
		case XLOG_PMHASH_COPY:
			redo_copy(record);
			break;
		case XLOG_PMHASH_COPY_DATA:
			redo_copy_data(record);
			break;
		case XLOG_PMHASH_BUILT:
			redo_built(record);
			break;
		default:
			elog(PANIC, "pmhash_redo: unknown op code %u", info);
	}
	/* on ordinary files, bound what an OS crash of a standby can lose */
	if (++records_since_sync >= 1024)
	{
		pmhash_redo_synced(record->EndRecPtr);
		records_since_sync = 0;
	}
}

/*
 * Replay pmhash's own records from position from up to the redo point:
 * changes that commits left to the syncer and that it had not yet made
 * durable (pmsyncer.c).  False if that WAL cannot be read.
 */
static bool
replay_from_durable(XLogRecPtr from, XLogRecPtr redo)
{
	MemoryContext context = CurrentMemoryContext;
	ReadLocalXLogPageNoWaitPrivate *private = palloc0(sizeof(ReadLocalXLogPageNoWaitPrivate));
	XLogReaderState *reader;
	volatile uint64 replayed = 0;
	volatile bool complete = false;

	reader = XLogReaderAllocate(wal_segment_size, NULL,
								XL_ROUTINE(.page_read = read_local_xlog_page_no_wait,
										   .segment_open = wal_segment_open,
										   .segment_close = wal_segment_close),
								private);
	if (reader == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory while allocating a WAL reading processor")));
	PG_TRY();
	{
		XLogRecPtr	first = XLogFindNextRecord(reader, from);

		if (first != InvalidXLogRecPtr)
		{
			XLogBeginRead(reader, first);
			for (;;)
			{
				char	   *errormsg;

				if (reader->EndRecPtr >= redo)
				{
					complete = true;
					break;
				}
				if (XLogReadRecord(reader, &errormsg) == NULL)
				{
					/* the last record may end a page header short of the redo point */
					complete = reader->EndRecPtr + SizeOfXLogLongPHD >= redo;
					break;
				}
				if (reader->ReadRecPtr >= redo)
				{
					complete = true;
					break;
				}
				if (XLogRecGetRmid(reader) == RM_PMHASH_ID)
				{
					pmhash_redo(reader);
					replayed++;
				}
			}
		}
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(context);
		EmitErrorReport();
		FlushErrorState();
		complete = false;
	}
	PG_END_TRY();
	XLogReaderFree(reader);
	if (complete)
		ereport(LOG,
				(errmsg("pmhash: replayed %llu records from the durable position %X/%X up to the redo point %X/%X",
						(unsigned long long) replayed, LSN_FORMAT_ARGS(from), LSN_FORMAT_ARGS(redo))));
	return complete;
}

/*
 * rm_startup: before replay, flag what a crash may have left unverified, or
 * distrust every file if a restored backup did not contain them.  If the
 * syncer's durable position lies before the redo point, flag from there
 * and replay pmhash's records from there up to the redo point first
 * (src/README, The syncer); if that WAL is gone, rebuild every file.
 */
static void
pmhash_startup(void)
{
	bool		distrust = pmhash_directory_restore_begin();
	XLogRecPtr	redo = GetRedoRecPtr();
	XLogRecPtr	from = redo;
	XLogRecPtr	durable;

	if (pmhash_recovering_from_backup())
	{
		/* pmhash.durable, if the backup copied one, is the source server's */
		pmhash_durable_write(InvalidXLogRecPtr);
		if (distrust)
		{
			pmhash_recovery_flag_files(redo, PMHASH_DISTRUST_BACKUP);
			return;
		}
	}
	else
	{
		switch (pmhash_durable_recall(&durable))
		{
			case PMHASH_DURABLE_NONE:
				break;
			case PMHASH_DURABLE_AT:
				if (durable < redo)
					from = durable;
				break;
			case PMHASH_DURABLE_LOST:
				pmhash_recovery_flag_files(redo, PMHASH_DISTRUST_DURABLE_LOST);
				return;
		}
	}
	/* the postmaster may have flagged them from this very point already */
	if (pmhash_flagged_from() != from)
		pmhash_recovery_flag_files(from, PMHASH_TRUST_FILES);
	if (from < redo && !replay_from_durable(from, redo))
		pmhash_recovery_flag_files(from, PMHASH_DISTRUST_WAL_GONE);
}

/* rm_cleanup: after replay, make it durable and hand over to normal running. */
static void
pmhash_cleanup(void)
{
	ListCell   *lc;

	pmhash_redo_synced(GetXLogReplayRecPtr(NULL));
	/* every replayed change is durable: none is left for a crash to replay */
	pmhash_durable_write(InvalidXLogRecPtr);
	pmhash_directory_restore_end(GetXLogReplayRecPtr(NULL));
	pmhash_recovery_finish();
	foreach(lc, unapplied_files)
		pmhash_mark_needs_rebuild((RelFileLocator *) lfirst(lc));
	list_free_deep(unapplied_files);
	unapplied_files = NIL;
}

static RmgrData pmhash_rmgr = {
	.rm_name = "pmhash",
	.rm_redo = pmhash_redo,
	.rm_desc = pmhash_desc,
	.rm_identify = pmhash_identify,
	.rm_startup = pmhash_startup,
	.rm_cleanup = pmhash_cleanup,
	.rm_mask = NULL,
	.rm_decode = NULL,
};

/* Register the resource manager (from _PG_init, preloading only). */
void
pmhash_wal_register(void)
{
	RegisterCustomRmgr(RM_PMHASH_ID, &pmhash_rmgr);
}
