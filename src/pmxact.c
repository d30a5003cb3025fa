/*-------------------------------------------------------------------------
 *
 * pmxact.c
 *	  What pmhash does at transaction boundaries: the steps before a commit
 *	  record, and the files a commit removes or an abort undoes.
 *
 * Before the commit record (src/README, Persistence paths): the pending
 * INSERT records of every index are written, every dirty range is made
 * durable, and the files of relations whose storage the commit drops are
 * collected, to be removed once the commit is done.  Core drops an index's
 * main fork through its pending-delete list; the files follow it.  Files
 * created by an aborted (sub)transaction are removed at its abort.
 * Temporary index files are tracked by this backend and removed with their
 * relation, or when the session ends.  A dropped database leaves orphans to
 * sweep at commit.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmxact.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>
#include <unistd.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_class.h"
#include "catalog/pg_database.h"
#include "catalog/storage.h"
#include "storage/ipc.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "pmhash.h"

typedef struct TrackedFile
{
	PmhashFileKey	key;
	Oid			relid;			/* the index, for temporary files */
	SubTransactionId subid;		/* creating subtransaction, while uncommitted */
	char		path[MAXPGPATH];
} TrackedFile;

static List *created_files = NIL;	/* created by the current transaction */
static List *temp_files = NIL;	/* temporary index files of this backend */
static List *commit_unlinks = NIL;	/* to remove once the commit is done */
static bool sweep_at_commit = false;
static bool exit_callback_registered = false;
static object_access_hook_type prev_object_access_hook = NULL;
static bool any_pending = false;
static bool log_at_once = false;	/* the transaction ran INSERT ... ON CONFLICT */

/* WAL-log the inserted entries of one index that are not logged yet. */
static void
log_pending(PmhashLocal *ix)
{
	if (ix->npending == 0)
		return;
	pmhash_log_inserts(&ix->node, ix->pending, ix->npending, ix->pending_since);
	ix->npending = 0;
}

/*
 * Log every entry the transaction inserts from now on at once, not in a
 * batch: it runs an INSERT ... ON CONFLICT, whose speculative insertion of
 * a row may be undone by a conflict (the row dead to every transaction)
 * while the transaction goes on, and a removal of the row's entry must not
 * precede the entry's INSERT record (src/README, Dead entries).
 */
void
pmhash_log_inserts_at_once(void)
{
	log_at_once = true;
}

/* Apply fn to every index that may hold unlogged entries, if any does. */
static void
visit_pending(void (*fn) (PmhashLocal *ix))
{
	if (any_pending)
		pmhash_foreach_local(fn);
	any_pending = false;
}

/* WAL-log every inserted entry not logged yet (before the commit record). */
static void
flush_pending_all(void)
{
	visit_pending(log_pending);
}

/* Forget one index's unlogged entries (their transaction aborted). */
static void
discard_pending(PmhashLocal *ix)
{
	ix->npending = 0;
}

/* Forget every unlogged entry: the transaction aborted, its tuples are dead. */
static void
discard_pending_all(void)
{
	visit_pending(discard_pending);
}

/* The subtransaction whose abort discard_aborted_pending applies. */
static SubTransactionId aborted_subid;

/*
 * Forget one index's unlogged entries of the aborted subtransaction and of
 * its children: the last ones queued, as every subtransaction started since
 * it has a larger id.
 */
static void
discard_aborted_pending(PmhashLocal *ix)
{
	while (ix->npending > 0 && ix->pending_subids[ix->npending - 1] >= aborted_subid)
		ix->npending--;
}

/*
 * Remember an entry applied with stamp lsn, to be logged with others in one
 * INSERT record.  Replay inserts only what is absent, and a REBUILD record
 * of the shard either includes the entry or comes before this one, so the
 * delay loses nothing; the record is written before the commit record.
 * An entry whose tuple dies before its transaction ends (its subtransaction
 * aborts, or a speculative insertion is undone) must not be logged after a
 * removal of it: an aborted subtransaction's entries are forgotten, and a
 * transaction that runs INSERT ... ON CONFLICT logs its entries at once
 * (src/README, Dead entries).
 */
void
pmhash_queue_insert(PmhashLocal *ix, uint32 hash, PmhTid tid, XLogRecPtr lsn)
{
	if (ix->pending == NULL)
	{
		ix->pending = MemoryContextAlloc(TopMemoryContext, PMHASH_INSERT_BATCH * sizeof(PmhEntry));
		ix->pending_subids = MemoryContextAlloc(TopMemoryContext,
												PMHASH_INSERT_BATCH * sizeof(SubTransactionId));
	}
	if (ix->npending == 0)
		ix->pending_since = lsn;
	ix->pending[ix->npending].hash = hash;
	ix->pending[ix->npending].tid = tid;
	ix->pending[ix->npending].flags = 0;
	ix->pending_subids[ix->npending] = GetCurrentSubTransactionId();
	any_pending = true;
	if (++ix->npending == PMHASH_INSERT_BATCH || log_at_once)
		log_pending(ix);
}

/* Remove an index file and everything that refers to it. */
static void
forget_and_unlink(const PmhashFileKey *key, const char *path)
{
	pmhash_forget_file(key);
	pmhash_drop_local(key);
	pmhash_unlink_file(path);
}

/* Stop tracking a temporary file. */
static void
untrack_temp(const PmhashFileKey *key)
{
	ListCell   *lc;

	foreach(lc, temp_files)
	{
		TrackedFile *tf = lfirst(lc);

		if (memcmp(&tf->key, key, sizeof(PmhashFileKey)) == 0)
		{
			temp_files = foreach_delete_current(temp_files, lc);
			pfree(tf);
			return;
		}
	}
}

/* At session end, remove the files of this session's temporary indexes. */
static void
remove_temp_files(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	ListCell   *lc;

	foreach(lc, temp_files)
	{
		TrackedFile *tf = lfirst(lc);

		pmhash_unlink_file(tf->path);
	}
	temp_files = NIL;
}

/* Append a record of a file, made in the current subtransaction, to a list. */
static List *
track(List *list, MemoryContext cxt, const PmhashFileKey *key, Oid relid, const char *path)
{
	TrackedFile *tf = MemoryContextAlloc(cxt, sizeof(TrackedFile));
	MemoryContext old = MemoryContextSwitchTo(cxt);

	tf->key = *key;
	tf->relid = relid;
	tf->subid = GetCurrentSubTransactionId();
	strlcpy(tf->path, path, MAXPGPATH);
	list = lappend(list, tf);
	MemoryContextSwitchTo(old);
	return list;
}

/* Track a file just created, so that an abort removes it. */
void
pmhash_remember_created(const PmhashFileKey *key, Oid relid, const char *path)
{
	created_files = track(created_files, TopMemoryContext, key, relid, path);
	if (key->backend != INVALID_PROC_NUMBER)
	{
		temp_files = track(temp_files, TopMemoryContext, key, relid, path);
		if (!exit_callback_registered)
		{
			before_shmem_exit(remove_temp_files, 0);
			exit_callback_registered = true;
		}
	}
}

/* Queue a file for removal after commit. */
static void
unlink_after_commit(const PmhashFileKey *key, const char *path)
{
	commit_unlinks = track(commit_unlinks, TopTransactionContext, key, InvalidOid, path);
}

/*
 * Just before commit: the files of relations whose storage the commit
 * drops (DROP, TRUNCATE, REINDEX, VACUUM FULL, ...) are removed after it.
 */
static void
collect_commit_unlinks(void)
{
	RelFileLocator *nodes;
	int			nnodes = smgrGetPendingDeletes(true, &nodes);
	ListCell   *lc;

	for (int i = 0; i < nnodes; i++)
	{
		PmhashFileKey	key;
		char		path[MAXPGPATH];
		struct stat st;

		memset(&key, 0, sizeof(key));
		key.node = nodes[i];
		key.node.spcOid = InvalidOid;
		key.backend = INVALID_PROC_NUMBER;
		pmhash_file_path(&key, path);
		if (stat(path, &st) == 0)
			unlink_after_commit(&key, path);
	}
	if (nnodes > 0)
		pfree(nodes);

	/* temporary indexes that were dropped or got a new relfilenode */
	foreach(lc, temp_files)
	{
		TrackedFile *tf = lfirst(lc);
		HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(tf->relid));
		bool		gone = !HeapTupleIsValid(tuple);

		if (!gone)
		{
			gone = ((Form_pg_class) GETSTRUCT(tuple))->relfilenode != tf->key.node.relNumber;
			ReleaseSysCache(tuple);
		}
		if (gone)
			unlink_after_commit(&tf->key, tf->path);
	}
}

/* Remove the files created by a subtransaction (or, with subid 0, all). */
static void
remove_created(SubTransactionId subid)
{
	ListCell   *lc;

	foreach(lc, created_files)
	{
		TrackedFile *tf = lfirst(lc);

		if (subid != InvalidSubTransactionId && tf->subid != subid)
			continue;
		if (tf->key.backend != INVALID_PROC_NUMBER)
			untrack_temp(&tf->key);
		forget_and_unlink(&tf->key, tf->path);
		created_files = foreach_delete_current(created_files, lc);
		pfree(tf);
	}
}

/* Forget the creation records of a finished transaction. */
static void
clear_created(void)
{
	list_free_deep(created_files);
	created_files = NIL;
}

/* Transaction callback. */
static void
xact_callback(XactEvent event, void *arg pg_attribute_unused())
{
	ListCell   *lc;

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			flush_pending_all();
			pmhash_sync_for_commit();
			collect_commit_unlinks();
			break;
		case XACT_EVENT_PRE_PREPARE:
			flush_pending_all();
			pmhash_sync_for_commit();
			break;
		case XACT_EVENT_COMMIT:
			foreach(lc, commit_unlinks)
			{
				TrackedFile *tf = lfirst(lc);

				if (tf->key.backend != INVALID_PROC_NUMBER)
					untrack_temp(&tf->key);
				forget_and_unlink(&tf->key, tf->path);
			}
			commit_unlinks = NIL;
			clear_created();
			if (sweep_at_commit)
				pmhash_sweep_orphans(DEBUG1);
			sweep_at_commit = false;
			log_at_once = false;
			break;
		case XACT_EVENT_PREPARE:
			commit_unlinks = NIL;
			clear_created();
			sweep_at_commit = false;
			log_at_once = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			pmhash_leave_all();
			pmhash_pause_after(0, NULL);
			discard_pending_all();
			remove_created(InvalidSubTransactionId);
			commit_unlinks = NIL;
			sweep_at_commit = false;
			log_at_once = false;
			break;
		default:
			break;
	}
}

/* Subtransaction callback. */
static void
subxact_callback(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg pg_attribute_unused())
{
	ListCell   *lc;

	switch (event)
	{
		case SUBXACT_EVENT_ABORT_SUB:
			pmhash_leave_all();
			pmhash_pause_after(0, NULL);
			/* its tuples are dead; a removal of their entries may be logged already */
			aborted_subid = mySubid;
			if (any_pending)
				pmhash_foreach_local(discard_aborted_pending);
			remove_created(mySubid);
			/* drops of the aborted subtransaction do not happen */
			foreach(lc, commit_unlinks)
			{
				TrackedFile *tf = lfirst(lc);

				if (tf->subid == mySubid)
					commit_unlinks = foreach_delete_current(commit_unlinks, lc);
			}
			break;
		case SUBXACT_EVENT_COMMIT_SUB:
			foreach(lc, created_files)
			{
				TrackedFile *tf = lfirst(lc);

				if (tf->subid == mySubid)
					tf->subid = parentSubid;
			}
			foreach(lc, commit_unlinks)
			{
				TrackedFile *tf = lfirst(lc);

				if (tf->subid == mySubid)
					tf->subid = parentSubid;
			}
			break;
		default:
			break;
	}
}

/*
 * Object access hook: a dropped database leaves orphans to sweep at commit;
 * a dropped temporary index (even by ON COMMIT DROP, after PRE_COMMIT) has
 * its file removed at commit.
 */
static void
object_access(ObjectAccessType access, Oid classId, Oid objectId, int subId, void *arg)
{
	ListCell   *lc;

	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);
	if (access != OAT_DROP)
		return;
	if (classId == DatabaseRelationId)
		sweep_at_commit = true;
	if (classId != RelationRelationId || subId != 0)
		return;
	foreach(lc, temp_files)
	{
		TrackedFile *tf = lfirst(lc);

		if (tf->relid == objectId)
			unlink_after_commit(&tf->key, tf->path);
	}
}

/* Register the callbacks (from _PG_init, inherited by every backend). */
void
pmhash_xact_init(void)
{
	RegisterXactCallback(xact_callback, NULL);
	RegisterSubXactCallback(subxact_callback, NULL);
	prev_object_access_hook = object_access_hook;
	object_access_hook = object_access;
}
