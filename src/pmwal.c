/*-------------------------------------------------------------------------
 *
 * pmwal.c
 *	  The pmhash WAL resource manager: records, replay, and what recovery
 *	  does before and after replay.
 *
 * The durability protocol
 * -----------------------
 * Index files live outside the buffer manager, so PostgreSQL's rule of
 * writing WAL before data cannot hold: a store to a mapped file may become
 * durable at any moment.  pmhash therefore makes its WAL *logical* and its
 * replay *idempotent*, and repairs what a crash can leave behind.
 *
 * Records (all carry the file's RelFileNode; none needs the catalog):
 *	 CREATE   a new, empty file (CREATE INDEX, REINDEX, TRUNCATE, ...)
 *	 INSERT   a batch of (hash, TID) entries one backend inserted
 *	 DELETE   the TIDs VACUUM removed from one shard
 *	 REBUILD  the complete content of one shard after a rebuild (growth,
 *			  shrinking, chain creation, bulk build)
 *	 COPY     the file of an index moved by core to a new relfilenode
 * REBUILD and DELETE are logged under the shard's writer lock, after the
 * change, which they describe in full; INSERTs are applied at once and
 * logged in batches of up to 256, at the latest just before the commit
 * record.  So a REBUILD either includes an entry or precedes its INSERT,
 * and replaying in WAL order converges to the primary's content.  Changed
 * buckets are stamped with a WAL position: the record's end for REBUILD,
 * the insert position at the time of the change for INSERT and DELETE
 * (an INSERT record tells the earliest stamp of its batch).  Replay inserts
 * only what is absent (looking only in buckets stamped at or after that
 * earliest stamp), deletes what is present, and replaces a shard's whole
 * content on REBUILD.  Structural work (growth, placement) is local to each
 * server: a standby holds the same entries as its primary, not the same
 * bytes.
 *
 * The six hazards:
 * 1. Stores durable ahead of their WAL.  After a crash the file can hold
 *	  entries whose records were lost (phantoms: TIDs of heap tuples that
 *	  never became durable, possibly past the heap's end).  When redo starts,
 *	  every entry of a bucket stamped after the redo start point is flagged
 *	  unverified.  Scans check unverified TIDs against the heap's length,
 *	  inserts of an unverified entry confirm it instead of storing it twice,
 *	  and VACUUM removes unverified entries whose line pointer is unused or
 *	  missing and confirms the rest.  Lost deletions are harmless: VACUUM
 *	  deletes only dead TIDs.
 * 2. Changes before a checkpoint's redo point.  Such a change is not
 *	  replayed, so it must be durable before anything depends on it.  Every
 *	  change of a transaction is durable before its commit record: the
 *	  ranges it dirtied are flushed and fenced (DAX) or msync'ed (ordinary
 *	  files) at PRE_COMMIT.  VACUUM syncs before ambulkdelete returns,
 *	  rebuilds before they publish.  A change of a transaction that never
 *	  commits may be lost, kept, or torn (its commit word durable without
 *	  its slot); such an entry lies in a bucket stamped after the redo point,
 *	  so hazard 1's rule covers it.
 * 3. Torn multi-bucket changes.  A rebuild writes a new segment into free
 *	  space, makes it durable, and publishes it with one 8-byte directory
 *	  store; an insert that extends a run sets and persists the overflow bits
 *	  before the entry's commit word.  Free space is known only by
 *	  reachability from the directory, so a torn rebuild leaks nothing.
 * 4. Standby replay concurrent with probes.  The startup process is just
 *	  another writer: it takes shard locks, publishes with commit words and
 *	  directory stores, and frees segments only when no reader announced
 *	  before their retirement can still be inside them.
 * 5. Fuzzy base-backup copies.  A copied file may mix moments.  Torn slots
 *	  are harmless (rechecked against the heap) or flagged by hazard 1's
 *	  rule (they lie in buckets changed after the backup's redo point); a
 *	  shard restructured during the copy can point to garbage, but the
 *	  copy's REBUILD record replaces it wholesale.  Until then, recovery
 *	  treats a shard whose segment fails validation as broken and skips
 *	  records for it.  A shard still broken when recovery ends, or a file
 *	  missing for an index that exists, is rebuilt from the heap by the
 *	  first backend that opens it, with a LOG line.
 * 6. Checksums torn from their units (files with PMH_FILE_CHECKSUMS).  A
 *	  writer stamps a bucket, stores its commit word, then its checksum,
 *	  all in the bucket's first cache line, so a crash keeps a prefix of
 *	  them.  A posting block is resealed after the bucket referring to its
 *	  chain is stamped and durable (appends), or after its own stamped
 *	  first line is durable (VACUUM).  So a unit whose checksum a crash
 *	  separated from its content is stamped after the redo point or lies
 *	  in a chain referred to from such a bucket, and recovery reseals
 *	  exactly those before replay (pmh_flag_unverified); any other mismatch
 *	  is damage.
 *
 * What each path survives: on DAX (fs-DAX mounted with MAP_SYNC, or Device
 * DAX) every acknowledged commit survives a PostgreSQL crash, an OS crash
 * and power loss.  On an ordinary file the same holds as long as msync
 * reaches stable storage (it does on local file systems); with
 * PMEM_IS_PMEM_FORCE=1 on a non-DAX file system only PostgreSQL crashes are
 * survived (the flushes reach the page cache, not the device).
 *
 * Changes of single entries are made durable at commit (one fence or one
 * msync per dirty range), replayed ones every 1,024 records.  Before the first unsynced change it sets REDO_DIRTY in the
 * file header, and after each sync it clears the bit and records the synced
 * position.  If an OS crash then loses replayed changes that the next redo
 * start point no longer covers, the next recovery finds the bit set with a
 * position before its redo start and has the index rebuilt.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmwal.c
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
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "pmhash.h"

#define XLOG_PMHASH_CREATE		0x00
#define XLOG_PMHASH_INSERT		0x10
#define XLOG_PMHASH_DELETE		0x20
#define XLOG_PMHASH_REBUILD		0x30
#define XLOG_PMHASH_COPY		0x40

typedef struct xl_pmhash_create
{
	RelFileNode node;
	uint64		generation;
	uint32		shard_bits;
	uint32		flags;
} xl_pmhash_create;

/* CREATE flags */
#define XLOG_PMHASH_CREATE_TRANSACTIONAL	0x0001	/* undone if the record's
													 * transaction aborts */

/*
 * INSERT: a batch of entries one backend inserted, each stamped in the file
 * with a WAL position no earlier than since.  Followed by count packed
 * (hash, TID) pairs of 10 bytes.
 */
typedef struct xl_pmhash_insert
{
	RelFileNode node;
	uint32		count;
	XLogRecPtr	since;
} xl_pmhash_insert;

#define PACKED_ENTRY_SIZE	(sizeof(uint32) + sizeof(ItemPointerData))

/*
 * DELETE and REBUILD: a shard and its entries, encoded by pmh_codec.c: for
 * DELETE only TIDs (sorted), for REBUILD the whole content (sorted by hash).
 */
typedef struct xl_pmhash_entries
{
	RelFileNode node;
	uint32		shard;
	uint32		fill_permille;	/* REBUILD: bucket fill of the new layout */
	uint64		count;
} xl_pmhash_entries;

typedef struct xl_pmhash_copy
{
	RelFileNode from;
	RelFileNode to;
} xl_pmhash_copy;

/* Startup process: files whose records could not be applied. */
static List *unapplied_files = NIL;
static uint64 records_since_sync = 0;

/* Log the creation of an empty index file. */
XLogRecPtr
pmh_log_create(const RelFileNode *node, uint64 generation, uint32 shard_bits, bool transactional)
{
	xl_pmhash_create xlrec;

	xlrec.node = *node;
	xlrec.generation = generation;
	xlrec.shard_bits = shard_bits;
	xlrec.flags = transactional ? XLOG_PMHASH_CREATE_TRANSACTIONAL : 0;
	XLogBeginInsert();
	XLogRegisterData((char *) &xlrec, sizeof(xlrec));
	return XLogInsert(RM_PMHASH_ID, XLOG_PMHASH_CREATE);
}

/* Log a batch of inserted entries, stamped in the file no earlier than since. */
XLogRecPtr
pmh_log_inserts(const RelFileNode *node, const PmhEntry *entries, uint32 count,
				XLogRecPtr since)
{
	xl_pmhash_insert xlrec;
	char	   *packed = palloc(count * PACKED_ENTRY_SIZE);
	XLogRecPtr	lsn;

	for (uint32 i = 0; i < count; i++)
	{
		memcpy(packed + i * PACKED_ENTRY_SIZE, &entries[i].hash, sizeof(uint32));
		memcpy(packed + i * PACKED_ENTRY_SIZE + sizeof(uint32), &entries[i].tid,
			   sizeof(ItemPointerData));
	}
	xlrec.node = *node;
	xlrec.count = count;
	xlrec.since = since;
	XLogBeginInsert();
	XLogRegisterData((char *) &xlrec, sizeof(xlrec));
	XLogRegisterData(packed, count * PACKED_ENTRY_SIZE);
	lsn = XLogInsert(RM_PMHASH_ID, XLOG_PMHASH_INSERT);
	pfree(packed);
	return lsn;
}

/* qsort comparator: entries by TID. */
static int
entry_tid_cmp(const void *a, const void *b)
{
	return pmh_tid_cmp(((const PmhEntry *) a)->tid, ((const PmhEntry *) b)->tid);
}

/* Log a shard's entries, compactly encoded, as a DELETE or REBUILD record. */
static XLogRecPtr
log_entries(const RelFileNode *node, bool rebuild, uint32 shard, double fill,
			const PmhEntry *entries, uint64 count)
{
	xl_pmhash_entries xlrec;
	uint8	   *encoded = palloc_extended(pmh_encoded_max(count), MCXT_ALLOC_HUGE);
	size_t		len;
	XLogRecPtr	lsn;

	len = pmh_encode_entries(entries, count, rebuild, encoded);
	xlrec.node = *node;
	xlrec.shard = shard;
	xlrec.fill_permille = (uint32) (fill * 1000);
	xlrec.count = count;
	XLogBeginInsert();
	XLogRegisterData((char *) &xlrec, sizeof(xlrec));
	if (len > 0)
		XLogRegisterData((char *) encoded, len);
	lsn = XLogInsert(RM_PMHASH_ID, rebuild ? XLOG_PMHASH_REBUILD : XLOG_PMHASH_DELETE);
	pfree(encoded);
	return lsn;
}

/* Log the whole content of a rebuilt shard, sorted by hash. */
XLogRecPtr
pmh_log_rebuild(const RelFileNode *node, uint32 shard, double fill,
				const PmhEntry *entries, uint64 count)
{
	return log_entries(node, true, shard, fill, entries, count);
}

/* Log the entries VACUUM deleted from a shard (sorted here by TID). */
XLogRecPtr
pmh_log_delete(const RelFileNode *node, uint32 shard, PmhEntry *entries, uint64 count)
{
	qsort(entries, count, sizeof(PmhEntry), entry_tid_cmp);
	return log_entries(node, false, shard, 0, entries, count);
}

/*
 * The entries of a DELETE or REBUILD record, decoded into palloc'd memory;
 * NULL (logged) if the record is malformed.
 */
static PmhEntry *
record_entries(XLogReaderState *record, bool with_hash)
{
	xl_pmhash_entries *xlrec = (xl_pmhash_entries *) XLogRecGetData(record);
	PmhEntry   *entries = palloc_extended(Max(xlrec->count, 1) * sizeof(PmhEntry),
										  MCXT_ALLOC_HUGE);

	if (pmh_decode_entries((uint8 *) xlrec + sizeof(xl_pmhash_entries),
						   XLogRecGetDataLen(record) - sizeof(xl_pmhash_entries),
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

/* Log that an index file was copied to a new relfilenode. */
XLogRecPtr
pmh_log_copy(const RelFileNode *from, const RelFileNode *to)
{
	xl_pmhash_copy xlrec;

	xlrec.from = *from;
	xlrec.to = *to;
	XLogBeginInsert();
	XLogRegisterData((char *) &xlrec, sizeof(xlrec));
	return XLogInsert(RM_PMHASH_ID, XLOG_PMHASH_COPY);
}

/* Remember a file whose records replay had to skip. */
static void
note_unapplied(const RelFileNode *node)
{
	ListCell   *lc;
	RelFileNode *copy;

	foreach(lc, unapplied_files)
	{
		if (RelFileNodeEquals(*(RelFileNode *) lfirst(lc), *node))
			return;
	}
	copy = MemoryContextAlloc(TopMemoryContext, sizeof(RelFileNode));
	*copy = *node;
	unapplied_files = lappend(unapplied_files, copy);
	ereport(LOG,
			(errmsg("pmhash: WAL for index file %u/%u/%u cannot be replayed; the index will be rebuilt from its table after recovery",
					node->spcNode, node->dbNode, node->relNode)));
}

/*
 * Open an index file for a replayed change; NULL (noted) if it cannot take
 * records.  The caller must pmh_leave().
 */
static PmhIndex *
redo_open(const RelFileNode *node)
{
	PmhIndex   *ix = pmh_open_for_redo(node);

	if (ix == NULL)
		note_unapplied(node);
	else
		pmh_redo_will_change(ix);
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
	PmhIndex   *ix = redo_open(&xlrec->node);

	if (ix == NULL)
		return;
	for (uint32 i = 0; i < xlrec->count; i++)
	{
		uint32		hash;
		PmhTid		tid;
		uint32		shard;
		PmhShardState *state;

		memcpy(&hash, packed + i * PACKED_ENTRY_SIZE, sizeof(uint32));
		memcpy(&tid, packed + i * PACKED_ENTRY_SIZE + sizeof(uint32), sizeof(PmhTid));
		shard = pmh_shard_of(hash, ix->table.shard_bits);
		state = &ix->slot->shards[shard];
		LWLockAcquire(pmh_shard_lock(ix->slot, shard), LW_EXCLUSIVE);
		if (!state->broken)
		{
			PmhSegment	seg;
			PmhStatus	st;

			pmh_shard_segment(ix, shard, &seg);
			st = pmh_table_insert(&ix->table, &seg, &state->counts, hash, tid,
								  record->EndRecPtr, PMH_INSERT_IF_ABSENT, xlrec->since);
			if (st == PMH_CORRUPT || st == PMH_FULL)
				state->broken = true;
		}
		LWLockRelease(pmh_shard_lock(ix->slot, shard));
	}
	pmh_leave();
}

typedef struct DeletedSet
{
	PmhEntry   *entries;
	uint64		count;
} DeletedSet;

/* Replay callback: whether a TID is among the deleted ones. */
static int
in_deleted_set(void *arg, PmhTid tid)
{
	DeletedSet *set = arg;
	PmhEntry	key;

	key.tid = tid;
	return bsearch(&key, set->entries, set->count, sizeof(PmhEntry), entry_tid_cmp) != NULL;
}

/* Replay a VACUUM deletion: one pass over the shard, deleting by set. */
static void
redo_delete(XLogReaderState *record)
{
	xl_pmhash_entries *xlrec = (xl_pmhash_entries *) XLogRecGetData(record);
	PmhIndex   *ix = redo_open(&xlrec->node);
	PmhShardState *state;
	DeletedSet	set;
	PmhDeleteOps ops = {in_deleted_set, NULL, NULL, &set};

	if (ix == NULL)
		return;
	set.count = xlrec->count;
	set.entries = record_entries(record, false);
	if (set.entries == NULL)
	{
		pmh_leave();
		return;
	}

	state = &ix->slot->shards[xlrec->shard];
	LWLockAcquire(pmh_shard_lock(ix->slot, xlrec->shard), LW_EXCLUSIVE);
	if (!state->broken)
	{
		PmhSegment	seg;
		uint64		removed;

		pmh_shard_segment(ix, xlrec->shard, &seg);
		if (seg.unit != 0 &&
			pmh_bulk_delete(&seg, &ops, record->EndRecPtr, &ix->persist, &state->counts,
							&removed) != PMH_OK)
			state->broken = true;
	}
	LWLockRelease(pmh_shard_lock(ix->slot, xlrec->shard));
	pmh_leave();
	pfree(set.entries);
}

/* Replay a rebuild: the shard's content becomes the record's. */
static void
redo_rebuild(XLogReaderState *record)
{
	xl_pmhash_entries *xlrec = (xl_pmhash_entries *) XLogRecGetData(record);
	PmhIndex   *ix = redo_open(&xlrec->node);
	PmhShardState *state;
	PmhEntry   *entries;
	PmhSegment	seg;
	PmhStatus	st;

	if (ix == NULL)
		return;
	entries = record_entries(record, true);
	state = &ix->slot->shards[xlrec->shard];
	if (entries == NULL)
	{
		state->broken = true;
		pmh_leave();
		return;
	}
	LWLockAcquire(pmh_shard_lock(ix->slot, xlrec->shard), LW_EXCLUSIVE);
	/* a broken shard's segment is not used: it is replaced as if absent */
	if (state->broken)
		pmh_table_segment(&ix->table, xlrec->shard, 0, 0, &seg);
	else
		pmh_shard_segment(ix, xlrec->shard, &seg);
	st = pmh_table_rebuild(&ix->table, &seg, entries, xlrec->count, 1,
						   xlrec->fill_permille / 1000.0, record->EndRecPtr, &state->counts);
	state->broken = st != PMH_OK;
	LWLockRelease(pmh_shard_lock(ix->slot, xlrec->shard));
	pmh_leave();
	pfree(entries);
}

/* Replay the creation of an index file. */
static void
redo_create(XLogReaderState *record)
{
	xl_pmhash_create *xlrec = (xl_pmhash_create *) XLogRecGetData(record);
	FullTransactionId creator = InvalidFullTransactionId;

	if (xlrec->flags & XLOG_PMHASH_CREATE_TRANSACTIONAL)
		creator = pmh_recent_full_xid(XLogRecGetXid(record));
	pmh_create_for_redo(&xlrec->node, xlrec->generation, xlrec->shard_bits, creator);
}

/* Replay the copy of an index file to a new relfilenode. */
static void
redo_copy(XLogReaderState *record)
{
	xl_pmhash_copy *xlrec = (xl_pmhash_copy *) XLogRecGetData(record);

	if (!pmh_copy_file(&xlrec->from, &xlrec->to))
		note_unapplied(&xlrec->to);
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
			redo_delete(record);
			break;
		case XLOG_PMHASH_REBUILD:
			redo_rebuild(record);
			break;
		case XLOG_PMHASH_COPY:
			redo_copy(record);
			break;
		default:
			elog(PANIC, "pmhash_redo: unknown op code %u", info);
	}
	/* on ordinary files, bound what an OS crash of a standby can lose */
	if (++records_since_sync >= 1024)
	{
		pmh_redo_synced(record->EndRecPtr);
		records_since_sync = 0;
	}
}

/* rm_desc: readable records for pg_walinspect. */
static void
pmhash_desc(StringInfo buf, XLogReaderState *record)
{
	uint8		info = XLogRecGetInfo(record) & ~XLR_INFO_MASK;
	char	   *data = XLogRecGetData(record);

	switch (info)
	{
		case XLOG_PMHASH_CREATE:
			{
				xl_pmhash_create *xlrec = (xl_pmhash_create *) data;

				appendStringInfo(buf, "rel %u/%u/%u; generation " UINT64_FORMAT "; shards %u%s",
								 xlrec->node.spcNode, xlrec->node.dbNode, xlrec->node.relNode,
								 xlrec->generation, 1U << xlrec->shard_bits,
								 (xlrec->flags & XLOG_PMHASH_CREATE_TRANSACTIONAL) ? "; transactional" : "");
				break;
			}
		case XLOG_PMHASH_INSERT:
			{
				xl_pmhash_insert *xlrec = (xl_pmhash_insert *) data;

				appendStringInfo(buf, "rel %u/%u/%u; entries %u; stamped since %X/%X",
								 xlrec->node.spcNode, xlrec->node.dbNode, xlrec->node.relNode,
								 xlrec->count, LSN_FORMAT_ARGS(xlrec->since));
				break;
			}
		case XLOG_PMHASH_DELETE:
		case XLOG_PMHASH_REBUILD:
			{
				xl_pmhash_entries *xlrec = (xl_pmhash_entries *) data;

				appendStringInfo(buf, "rel %u/%u/%u; shard %u; entries " UINT64_FORMAT,
								 xlrec->node.spcNode, xlrec->node.dbNode, xlrec->node.relNode,
								 xlrec->shard, xlrec->count);
				break;
			}
		case XLOG_PMHASH_COPY:
			{
				xl_pmhash_copy *xlrec = (xl_pmhash_copy *) data;

				appendStringInfo(buf, "from rel %u/%u/%u; to rel %u/%u/%u",
								 xlrec->from.spcNode, xlrec->from.dbNode, xlrec->from.relNode,
								 xlrec->to.spcNode, xlrec->to.dbNode, xlrec->to.relNode);
				break;
			}
	}
}

/* rm_identify */
static const char *
pmhash_identify(uint8 info)
{
	switch (info & ~XLR_INFO_MASK)
	{
		case XLOG_PMHASH_CREATE:
			return "CREATE";
		case XLOG_PMHASH_INSERT:
			return "INSERT";
		case XLOG_PMHASH_DELETE:
			return "DELETE";
		case XLOG_PMHASH_REBUILD:
			return "REBUILD";
		case XLOG_PMHASH_COPY:
			return "COPY";
	}
	return NULL;
}

/*
 * rm_startup: before replay, flag what a crash may have left unverified, or
 * distrust every file if a restored backup did not contain them.
 */
static void
pmhash_startup(void)
{
	bool		distrust = pmh_directory_restore_begin();

	pmh_recovery_flag_files(GetRedoRecPtr(), distrust);
}

/* rm_cleanup: after replay, make it durable and hand over to normal running. */
static void
pmhash_cleanup(void)
{
	ListCell   *lc;

	pmh_redo_synced(GetXLogReplayRecPtr(NULL));
	pmh_directory_restore_end(GetXLogReplayRecPtr(NULL));
	pmh_recovery_finish();
	foreach(lc, unapplied_files)
		pmh_mark_needs_rebuild((RelFileNode *) lfirst(lc));
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
pmh_wal_register(void)
{
	RegisterCustomRmgr(RM_PMHASH_ID, &pmhash_rmgr);
}
