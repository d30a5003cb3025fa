/*-------------------------------------------------------------------------
 *
 * pmdirectory.c
 *	  The directory of index files: who owns it, and whether it was
 *	  restored from a base backup.
 *
 * One server owns pmhash.directory: the postmaster holds an exclusive
 * flock() on pmhash.lock in it for its whole life (its children inherit
 * the descriptor), so a second cluster pointed at the same directory, such
 * as a backup restored on the same host, refuses to start instead of
 * sharing files that carry the same relfilenodes.
 *
 * A base backup copies the directory only when it lies inside the data
 * directory (the default).  When recovery starts from a backup (its
 * backup_label was read), files in a directory outside the data directory
 * are not part of the backup and may be newer than the recovery target;
 * they are marked to be rebuilt.  Recovery from a backup also leaves
 * pmhash.restored, which holds the position where that recovery ended: an
 * index whose metapage was written before that position and whose file is
 * missing lost it to the restore, and is rebuilt from its table on first
 * use instead of failing.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmdirectory.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include "access/xlogrecovery.h"
#include "common/controldata_utils.h"
#include "common/string.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/lwlock.h"

#include "pmhash.h"

#define LOCK_FILE_NAME		"pmhash.lock"
#define RESTORE_FILE_NAME	"pmhash.restored"
#define RESTORE_IN_PROGRESS "in progress"

/* Create the directory of index files if it does not exist. */
void
pmhash_directory_ensure(void)
{
	if (MakePGDirectory(pmhash_directory) != 0 && errno != EEXIST)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create pmhash directory \"%s\": %m", pmhash_directory)));
}

/*
 * Postmaster: take ownership of the directory for the life of the server.
 * The descriptor is deliberately kept open.
 */
void
pmhash_directory_lock(void)
{
	char		path[MAXPGPATH];
	int			fd;

	pmhash_directory_ensure();
	snprintf(path, MAXPGPATH, "%s/%s", pmhash_directory, LOCK_FILE_NAME);
	fd = open(path, O_RDWR | O_CREAT, S_IRUSR | S_IWUSR);
	if (fd < 0)
		ereport(FATAL,
				(errcode_for_file_access(),
				 errmsg("could not open pmhash lock file \"%s\": %m", path)));
	if (flock(fd, LOCK_EX | LOCK_NB) != 0)
	{
		char		owner[MAXPGPATH];
		ssize_t		len = pread(fd, owner, sizeof(owner) - 1, 0);

		owner[Max(len, 0)] = '\0';
		if (pg_strip_crlf(owner) == 0)
			strlcpy(owner, "?", sizeof(owner));
		ereport(FATAL,
				(errcode(ERRCODE_LOCK_FILE_EXISTS),
				 errmsg("pmhash directory \"%s\" is in use by another server", pmhash_directory),
				 errdetail("The server with data directory \"%s\" holds \"%s\".",
						   owner, path),
				 errhint("Give each cluster its own pmhash.directory.")));
	}
	if (ftruncate(fd, 0) != 0 || pwrite(fd, DataDir, strlen(DataDir), 0) < 0)
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("could not write pmhash lock file \"%s\": %m", path)));
}

/* Whether the directory lies inside the data directory (and so in base backups). */
static bool
directory_in_data_directory(void)
{
	char		dir[PATH_MAX];
	char		data[PATH_MAX];
	size_t		len;

	if (realpath(pmhash_directory, dir) == NULL || realpath(DataDir, data) == NULL)
		return !is_absolute_path(pmhash_directory);
	len = strlen(data);
	return strncmp(dir, data, len) == 0 && (dir[len] == '/' || dir[len] == '\0');
}

/* Whether this recovery started from a base backup that has not yet been fully replayed. */
bool
pmhash_recovering_from_backup(void)
{
	bool		crc_ok;
	ControlFileData *control;
	bool		result;

	LWLockAcquire(ControlFileLock, LW_SHARED);
	control = get_controlfile(DataDir, &crc_ok);
	LWLockRelease(ControlFileLock);
	result = crc_ok && (control->backupStartPoint != InvalidXLogRecPtr ||
						control->backupEndRequired);
	pfree(control);
	return result;
}

/* Write the restore marker durably: an end position, or "in progress". */
static void
write_restore_marker(XLogRecPtr end)
{
	char		path[MAXPGPATH];
	char		tmp[MAXPGPATH];
	char		text[64];
	int			fd;

	if (end == InvalidXLogRecPtr)
		strlcpy(text, RESTORE_IN_PROGRESS "\n", sizeof(text));
	else
		snprintf(text, sizeof(text), "%X/%X\n", LSN_FORMAT_ARGS(end));
	snprintf(path, MAXPGPATH, "%s/%s", pmhash_directory, RESTORE_FILE_NAME);
	snprintf(tmp, MAXPGPATH, "%s.tmp", path);
	fd = OpenTransientFile(tmp, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t) strlen(text) ||
		pg_fsync(fd) != 0)
		ereport(FATAL,
				(errcode_for_file_access(),
				 errmsg("could not write pmhash file \"%s\": %m", tmp)));
	CloseTransientFile(fd);
	durable_rename(tmp, path, FATAL);
}

/*
 * Read the restore marker: false if there is none; otherwise *end is the
 * position where the restore's recovery ended (Invalid while in progress).
 */
static bool
read_restore_marker(XLogRecPtr *end)
{
	char		path[MAXPGPATH];
	char		text[64];
	int			fd;
	ssize_t		len;
	uint32		hi;
	uint32		lo;

	snprintf(path, MAXPGPATH, "%s/%s", pmhash_directory, RESTORE_FILE_NAME);
	fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	if (fd < 0)
		return false;
	len = read(fd, text, sizeof(text) - 1);
	CloseTransientFile(fd);
	text[Max(len, 0)] = '\0';
	*end = InvalidXLogRecPtr;
	if (sscanf(text, "%X/%X", &hi, &lo) == 2)
		*end = ((uint64) hi << 32) | lo;
	return true;
}

/*
 * Startup process, before replay: whether recovery starts from a base
 * backup.  If so the restore marker says so, and files of a directory
 * outside the data directory, which the backup did not contain, are
 * marked to be rebuilt.
 */
bool
pmhash_directory_restore_begin(void)
{
	if (!pmhash_recovering_from_backup())
		return false;
	pmhash_directory_ensure();
	write_restore_marker(InvalidXLogRecPtr);
	return !directory_in_data_directory();
}

/* Startup process, after replay: record where the restore's recovery ended. */
void
pmhash_directory_restore_end(XLogRecPtr end)
{
	XLogRecPtr	marked;

	if (read_restore_marker(&marked) && marked == InvalidXLogRecPtr)
		write_restore_marker(end);
}

/*
 * Whether an index whose metapage was written at meta_lsn may have lost its
 * file to a restore from a base backup.
 */
bool
pmhash_directory_lost_to_restore(XLogRecPtr meta_lsn)
{
	XLogRecPtr	end;

	return read_restore_marker(&end) && end != InvalidXLogRecPtr && meta_lsn <= end;
}
