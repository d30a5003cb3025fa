/*-------------------------------------------------------------------------
 *
 * pmcleaner.c
 *	  The file cleaner: removing index files that a crash or a dropped
 *	  database left behind, at startup, every minute and after such a
 *	  commit.
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
 *	  src/pmcleaner.c
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


/* Whether the main fork of a relation exists in tablespace spc. */
static bool
main_fork_in(Oid spc, Oid db, Oid rel, ProcNumber backend, RelFileLocator *node)
{
	char	   *path;
	struct stat st;
	bool		exists;

	node->spcOid = spc;
	node->dbOid = db;
	node->relNumber = rel;
	path = pmhash_relpath(*node, backend, MAIN_FORKNUM);
	exists = stat(path, &st) == 0 || errno != ENOENT;
	pfree(path);
	return exists;
}

/*
 * Whether the main fork of a relation exists in any tablespace (file names
 * leave the tablespace out); if so, node gets its full identity.
 */
bool
pmhash_find_main_fork(Oid db, Oid rel, ProcNumber backend, RelFileLocator *node)
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
pmhash_recent_full_xid(TransactionId xid)
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
										 pmhash_recent_full_xid(TransamVariables->oldestClogXid)) &&
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
pmhash_sweep_orphans(int elevel)
{
	DIR		   *dir = AllocateDir(pmhash_directory);
	struct dirent *de;

	if (dir == NULL)
		return;
	while ((de = ReadDirExtended(dir, pmhash_directory, LOG)) != NULL)
	{
		Oid			db;
		Oid			rel;
		ProcNumber	backend;
		RelFileLocator node;
		PmhFileHeader hdr;
		char		path[MAXPGPATH];

		if (!pmhash_parse_file_name(de->d_name, &db, &rel, &backend))
			continue;
		snprintf(path, MAXPGPATH, "%s/%s", pmhash_directory, de->d_name);
		LWLockAcquire(pmhash_file_lock(), LW_EXCLUSIVE);
		if (!pmhash_find_main_fork(db, rel, backend, &node))
		{
			if (unlink(path) == 0)
				ereport(elevel,
						(errmsg("removed orphaned pmhash file \"%s\"", path)));
		}
		else if (pmhash_read_file_header(path, &hdr) == NULL && hdr.creator_xid != 0)
		{
			switch (creator_outcome(hdr.creator_xid))
			{
				case CREATOR_COMMITTED:
					pmhash_settle_file_creator(path);
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
		LWLockRelease(pmhash_file_lock());
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

	/*
	 * Join the process array, connected to no database: creator_outcome asks
	 * TransactionIdIsInProgress, which skips the slot its caller's PGPROC
	 * names as its own, and outside the array that may be any backend's, so
	 * a running creator (a long CREATE INDEX) could be taken for one that
	 * failed and its file removed.
	 */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	for (;;)
	{
		pmhash_sweep_orphans(LOG);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 SWEEP_INTERVAL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		/* as a connected process: absorb barriers (DROP DATABASE waits for them) */
		CHECK_FOR_INTERRUPTS();
		if (ShutdownRequestPending)
			proc_exit(0);
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
	}
}
