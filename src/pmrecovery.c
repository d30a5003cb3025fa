/*-------------------------------------------------------------------------
 *
 * pmrecovery.c
 *	  What recovery does to index files before and after WAL replay.
 *
 * Before replay, every entry in a bucket stamped after the redo start point
 * is flagged unverified (by the postmaster as soon as it sees that the
 * server crashed, since PostgreSQL runs no redo, and so no rm_startup,
 * when no WAL follows the last checkpoint; then by the startup process,
 * unless the postmaster already did from the same point): it may be a
 * phantom whose WAL was lost, or a torn slot of a base-backup copy; in a file with checksums, such buckets and
 * posting blocks are resealed, since a crash may have kept a commit without
 * its seal (src/README, Durability hazards).  After replay, everything the
 * startup process changed is made durable, all shared state is dropped so
 * that normal backends re-attach with full validation, and files that
 * replay could not bring up to date are marked to be rebuilt from their
 * table by the first backend that opens them.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmrecovery.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <libpmem.h>
#include <sys/stat.h>

#include "catalog/pg_control.h"
#include "common/controldata_utils.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/fd.h"

#include "pmhash.h"

/*
 * Whether replayed changes of a file may have been lost by an OS crash
 * before they were synced, and will not be replayed again.  Within the boot
 * in which they were made, the page cache still holds them: a crash of
 * PostgreSQL alone (a backend's, an immediate shutdown) loses nothing.
 */
static bool
lost_replayed_changes(const PmhFileHeader *hdr, XLogRecPtr redo_start)
{
	return (hdr->state & PMH_STATE_REDO_DIRTY) && hdr->redo_lsn < redo_start &&
		!pmhash_same_boot(hdr->redo_boot);
}

/* Flag the unverified entries of one file; durable before replay starts. */
static void
flag_file(const char *path, XLogRecPtr redo_start)
{
	size_t		len;
	int			is_pmem;
	char	   *base = NULL;
	PmhPersist	persist = {NULL, NULL, NULL, NULL, NULL};
	uint64		flagged;

	if (pmhash_is_plain_file(path))
		base = pmem_map_file(path, 0, 0, 0, &len, &is_pmem);
	if (base == NULL)
		return;
	if (pmh_header_check((PmhFileHeader *) base, len / PMH_UNIT_SIZE) == NULL &&
		lost_replayed_changes((PmhFileHeader *) base, redo_start))
	{
		pmem_unmap(base, len);
		pmhash_set_file_state(path, PMH_STATE_NEEDS_REBUILD);
		ereport(LOG,
				(errmsg("pmhash: \"%s\" may have lost replayed changes in an operating system crash; the index will be rebuilt from its table when next used",
						path)));
		return;
	}
	if (is_pmem)
	{
		persist.flush = pmhash_pmem_flush;
		persist.drain = pmhash_pmem_drain;
	}
	flagged = pmh_file_flag_unverified(base, len / PMH_UNIT_SIZE, redo_start, &persist);
	/* resealed checksums too, even where nothing was flagged */
	if (!is_pmem)
		pmhash_persist_range(base, len, false, path);
	pmem_unmap(base, len);
	if (flagged > 0)
		ereport(LOG,
				(errmsg("pmhash: %llu entries of \"%s\" changed after the redo point are checked against the heap before use",
						(unsigned long long) flagged, path)));
}

/* Mark a file to be rebuilt from its table, saying why (point: see below). */
static void
distrust_file(const char *path, XLogRecPtr point, PmhashDistrust distrust)
{
	switch (distrust)
	{
		case PMHASH_TRUST_FILES:
			return;
		case PMHASH_DISTRUST_BACKUP:
			ereport(LOG,
					(errmsg("pmhash: \"%s\" is not part of the restored base backup; the index will be rebuilt from its table when next used",
							path)));
			break;
		case PMHASH_DISTRUST_WAL_GONE:
			ereport(LOG,
					(errmsg("pmhash: \"%s\" may lack changes whose WAL from %X/%X is gone; the index will be rebuilt from its table when next used",
							path, LSN_FORMAT_ARGS(point))));
			break;
		case PMHASH_DISTRUST_DURABLE_LOST:
			ereport(LOG,
					(errmsg("pmhash: \"%s\" may lack changes that the syncer had not made durable; the index will be rebuilt from its table when next used",
							path)));
			break;
	}
	pmhash_set_file_state(path, PMH_STATE_NEEDS_REBUILD);
}

/*
 * Before replay: flag the unverified entries of every permanent index file
 * from point (the redo start point, or the syncer's durable position), or,
 * to distrust them all, mark every one to be rebuilt, saying why.
 */
void
pmhash_recovery_flag_files(XLogRecPtr point, PmhashDistrust distrust)
{
	DIR		   *dir = AllocateDir(pmhash_directory);
	struct dirent *de;

	if (dir == NULL)
		return;
	while ((de = ReadDirExtended(dir, pmhash_directory, LOG)) != NULL)
	{
		char		path[MAXPGPATH];
		Oid			db;
		Oid			rel;
		ProcNumber	backend;

		/* temporary and unlogged indexes are gone or reset after a crash */
		if (!pmhash_parse_file_name(de->d_name, &db, &rel, &backend) ||
			backend != INVALID_PROC_NUMBER)
			continue;
		snprintf(path, MAXPGPATH, "%s/%s", pmhash_directory, de->d_name);
		if (distrust == PMHASH_TRUST_FILES)
			flag_file(path, point);
		else
			distrust_file(path, point, distrust);
	}
	FreeDir(dir);
}

/*
 * Postmaster, when shared memory is (re)initialized: if the server crashed
 * (its control file says it was running or in crash recovery), flag what
 * the crash may have left unverified now.  Entries of transactions in
 * flight may have reached the files while their WAL did not; if no WAL
 * follows the last checkpoint, PostgreSQL skips redo and rm_startup with
 * it.  Standbys and archive recovery are left to rm_startup.
 */
void
pmhash_recovery_after_crash(void)
{
	bool		crc_ok;
	ControlFileData *control = get_controlfile(DataDir, &crc_ok);

	if (crc_ok &&
		(control->state == DB_IN_PRODUCTION || control->state == DB_IN_CRASH_RECOVERY))
	{
		pmhash_recovery_flag_files(control->checkPointCopy.redo, PMHASH_TRUST_FILES);
		pmhash_set_flagged_from(control->checkPointCopy.redo);
	}
	pfree(control);
}

/* A share with broken shards after replay: rebuild its file when next opened. */
static void
mark_share_broken(PmhashShare *share)
{
	pmhash_set_file_state(share->path, PMH_STATE_NEEDS_REBUILD);
	ereport(LOG,
			(errmsg("pmhash: \"%s\" could not be fully recovered; the index will be rebuilt from its table when next used",
					share->path)));
}

/* After replay: drop shared state; files with broken shards get rebuilt. */
void
pmhash_recovery_finish(void)
{
	pmhash_shares_detach_all(mark_share_broken);
}

/*
 * A file whose WAL could not be replayed (missing or damaged): mark it to be
 * rebuilt, or leave a placeholder that says so if the index still exists.
 */
void
pmhash_mark_needs_rebuild(const RelFileLocator *node)
{
	PmhashFileKey	key;
	char		path[MAXPGPATH];
	struct stat st;
	RelFileLocator main_node;

	memset(&key, 0, sizeof(key));
	key.node = *node;
	key.node.spcOid = InvalidOid;
	key.backend = INVALID_PROC_NUMBER;
	pmhash_file_path(&key, path);
	if (stat(path, &st) == 0)
	{
		pmhash_set_file_state(path, PMH_STATE_NEEDS_REBUILD);
		return;
	}
	if (!pmhash_find_main_fork(node->dbOid, node->relNumber, INVALID_PROC_NUMBER, &main_node))
		return;
	pmhash_create_placeholder(&main_node);
}
