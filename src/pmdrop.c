/*-------------------------------------------------------------------------
 *
 * pmdrop.c
 *	  Removing index files at the right moment: after the commit that drops
 *	  or replaces an index, after the abort of the transaction that created
 *	  one, and, for files left behind by a crash, by a background sweep.
 *
 * Core drops an index's main fork through its pending-delete list; just
 * before commit we read that list and remove the matching files once the
 * commit is done.  Files created by an aborted (sub)transaction are removed
 * at its abort.  Temporary indexes are tracked by this backend and removed
 * when their relation is gone, or when the session ends.  Any file whose
 * main fork no longer exists is an orphan, which the file cleaner removes
 * at startup and every minute, and so is a file whose header names a
 * creating transaction that neither committed nor is still running (a
 * crash cut it short before its abort could remove the file).  Creation
 * and the sweep are serialized so that a reused relfilenode never loses
 * its new file.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmdrop.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>
#include <unistd.h>

#include "access/htup_details.h"
#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_class.h"
#include "catalog/pg_database.h"
#include "catalog/pg_tablespace_d.h"
#include "catalog/storage.h"
#include "common/relpath.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/procarray.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "pmhash.h"

#define SWEEP_INTERVAL_MS	60000

typedef struct TrackedFile
{
	PmhFileKey	key;
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

/* Remove an index file and everything that refers to it. */
static void
forget_and_unlink(const PmhFileKey *key, const char *path)
{
	pmh_forget_file(key);
	pmh_drop_local(key);
	pmh_unlink_file(path);
}

/* Stop tracking a temporary file. */
static void
untrack_temp(const PmhFileKey *key)
{
	ListCell   *lc;

	foreach(lc, temp_files)
	{
		TrackedFile *tf = lfirst(lc);

		if (memcmp(&tf->key, key, sizeof(PmhFileKey)) == 0)
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

		pmh_unlink_file(tf->path);
	}
	temp_files = NIL;
}

/* Append a record of a file, made in the current subtransaction, to a list. */
static List *
track(List *list, MemoryContext cxt, const PmhFileKey *key, Oid relid, const char *path)
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
pmh_remember_created(const PmhFileKey *key, Oid relid, const char *path)
{
	created_files = track(created_files, TopMemoryContext, key, relid, path);
	if (key->backend != InvalidBackendId)
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
unlink_after_commit(const PmhFileKey *key, const char *path)
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
	RelFileNode *nodes;
	int			nnodes = smgrGetPendingDeletes(true, &nodes);
	ListCell   *lc;

	for (int i = 0; i < nnodes; i++)
	{
		PmhFileKey	key;
		char		path[MAXPGPATH];
		struct stat st;

		memset(&key, 0, sizeof(key));
		key.node = nodes[i];
		key.node.spcNode = InvalidOid;
		key.backend = InvalidBackendId;
		pmh_file_path(&key, path);
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
			gone = ((Form_pg_class) GETSTRUCT(tuple))->relfilenode != tf->key.node.relNode;
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
		if (tf->key.backend != InvalidBackendId)
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
			pmh_flush_pending_all();
			pmh_sync_all_dirty();
			collect_commit_unlinks();
			break;
		case XACT_EVENT_PRE_PREPARE:
			pmh_flush_pending_all();
			pmh_sync_all_dirty();
			break;
		case XACT_EVENT_COMMIT:
			foreach(lc, commit_unlinks)
			{
				TrackedFile *tf = lfirst(lc);

				if (tf->key.backend != InvalidBackendId)
					untrack_temp(&tf->key);
				forget_and_unlink(&tf->key, tf->path);
			}
			commit_unlinks = NIL;
			clear_created();
			if (sweep_at_commit)
				pmh_sweep_orphans(DEBUG1);
			sweep_at_commit = false;
			break;
		case XACT_EVENT_PREPARE:
			commit_unlinks = NIL;
			clear_created();
			sweep_at_commit = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			pmh_leave_all();
			pmh_discard_pending_all();
			remove_created(InvalidSubTransactionId);
			commit_unlinks = NIL;
			sweep_at_commit = false;
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
			pmh_leave_all();
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
pmh_drop_init(void)
{
	RegisterXactCallback(xact_callback, NULL);
	RegisterSubXactCallback(subxact_callback, NULL);
	prev_object_access_hook = object_access_hook;
	object_access_hook = object_access;
}

/* Parse an index file name into its identity; false if it is not one. */
static bool
parse_file_name(const char *name, Oid *db, Oid *rel, BackendId *backend)
{
	int			b;
	char		tail[8];

	if (sscanf(name, "t%d_%u_%u.%7s", &b, db, rel, tail) == 4 && strcmp(tail, "pmh") == 0)
		*backend = b;
	else if (sscanf(name, "%u_%u.%7s", db, rel, tail) == 3 && strcmp(tail, "pmh") == 0)
		*backend = InvalidBackendId;
	else
		return false;
	return true;
}

/* Whether the main fork of a relation exists in tablespace spc. */
static bool
main_fork_in(Oid spc, Oid db, Oid rel, BackendId backend, RelFileNode *node)
{
	char	   *path;
	struct stat st;
	bool		exists;

	node->spcNode = spc;
	node->dbNode = db;
	node->relNode = rel;
	path = relpathbackend(*node, backend, MAIN_FORKNUM);
	exists = stat(path, &st) == 0 || errno != ENOENT;
	pfree(path);
	return exists;
}

/*
 * Whether the main fork of a relation exists in any tablespace (file names
 * leave the tablespace out); if so, node gets its full identity.
 */
bool
pmh_find_main_fork(Oid db, Oid rel, BackendId backend, RelFileNode *node)
{
	DIR		   *dir;
	struct dirent *de;
	bool		found;

	if (main_fork_in(DEFAULTTABLESPACE_OID, db, rel, backend, node))
		return true;
	dir = AllocateDir("pg_tblspc");
	found = false;
	while (!found && dir != NULL && (de = ReadDir(dir, "pg_tblspc")) != NULL)
	{
		Oid			spc = (Oid) strtoul(de->d_name, NULL, 10);

		if (spc != InvalidOid)
			found = main_fork_in(spc, db, rel, backend, node);
	}
	if (dir != NULL)
		FreeDir(dir);
	return found;
}

/*
 * The 64-bit id of a transaction id that is not in the future and not
 * older than 2^31 transactions.
 */
FullTransactionId
pmh_recent_full_xid(TransactionId xid)
{
	FullTransactionId next = ReadNextFullTransactionId();
	uint32		epoch = EpochFromFullTransactionId(next);

	if (!TransactionIdIsNormal(xid))
		return InvalidFullTransactionId;
	if (xid > XidFromFullTransactionId(next) && epoch > 0)
		epoch--;
	return FullTransactionIdFromEpochAndXid(epoch, xid);
}

typedef enum CreatorOutcome
{
	CREATOR_UNKNOWN,			/* running, too old to tell, or in recovery */
	CREATOR_COMMITTED,
	CREATOR_FAILED				/* aborted, or cut short by a crash */
} CreatorOutcome;

/* What became of the transaction that created a file. */
static CreatorOutcome
creator_outcome(uint64 creator)
{
	FullTransactionId fxid = FullTransactionIdFromU64(creator);
	TransactionId xid = XidFromFullTransactionId(fxid);
	CreatorOutcome outcome = CREATOR_UNKNOWN;

	/* a standby cannot tell a crashed primary's transaction from a running one */
	if (RecoveryInProgress() || !FullTransactionIdIsNormal(fxid))
		return CREATOR_UNKNOWN;
	/* as txid_status() does: commit status survives only back to oldestClogXid */
	LWLockAcquire(XactTruncationLock, LW_SHARED);
	if (FullTransactionIdPrecedes(fxid, ReadNextFullTransactionId()) &&
		FullTransactionIdFollowsOrEquals(fxid,
										 pmh_recent_full_xid(ShmemVariableCache->oldestClogXid)) &&
		!TransactionIdIsInProgress(xid))
		outcome = TransactionIdDidCommit(xid) ? CREATOR_COMMITTED : CREATOR_FAILED;
	LWLockRelease(XactTruncationLock);
	return outcome;
}

/*
 * Remove index files whose main fork is gone, or whose creating transaction
 * was cut short by a crash (core leaves the main fork of such a relation
 * behind; the index does not exist).  Files whose creator committed forget
 * it.
 */
void
pmh_sweep_orphans(int elevel)
{
	DIR		   *dir = AllocateDir(pmhash_directory);
	struct dirent *de;

	if (dir == NULL)
		return;
	while ((de = ReadDirExtended(dir, pmhash_directory, LOG)) != NULL)
	{
		Oid			db;
		Oid			rel;
		BackendId	backend;
		RelFileNode node;
		PmhFileHeader hdr;
		char		path[MAXPGPATH];

		if (!parse_file_name(de->d_name, &db, &rel, &backend))
			continue;
		snprintf(path, MAXPGPATH, "%s/%s", pmhash_directory, de->d_name);
		LWLockAcquire(pmh_file_lock(), LW_EXCLUSIVE);
		if (!pmh_find_main_fork(db, rel, backend, &node))
		{
			if (unlink(path) == 0)
				ereport(elevel,
						(errmsg("removed orphaned pmhash file \"%s\"", path)));
		}
		else if (pmh_read_file_header(path, &hdr) && hdr.creator_xid != 0)
		{
			switch (creator_outcome(hdr.creator_xid))
			{
				case CREATOR_COMMITTED:
					pmh_settle_file_creator(path);
					break;
				case CREATOR_FAILED:
					if (unlink(path) == 0)
						ereport(elevel,
								(errmsg("removed pmhash file \"%s\" of an index whose creating transaction did not commit",
										path)));
					break;
				case CREATOR_UNKNOWN:
					break;
			}
		}
		LWLockRelease(pmh_file_lock());
	}
	FreeDir(dir);
}

/* The file cleaner: sweep at startup, then every minute. */
void
pmhash_worker_main(Datum arg pg_attribute_unused())
{
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();

	for (;;)
	{
		pmh_sweep_orphans(LOG);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 SWEEP_INTERVAL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		if (ShutdownRequestPending)
			proc_exit(0);
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
	}
}
