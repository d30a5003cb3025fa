/*-------------------------------------------------------------------------
 *
 * pmshadow.c
 *	  Shadow copies of index files, for tests that simulate an operating
 *	  system crash on the msync path.
 *
 * With pmhash.os_crash_shadows on (a test setting), every range of an
 * ordinary (msync) index file that pmhash makes durable is also written
 * into "<file>.shadow" beside it, once the sync succeeded.  A shadow
 * therefore holds what an operating system crash is guaranteed to leave
 * of the file.  A test stops the server immediately and puts each shadow
 * in place of its file (keeping some pages of the file, as write-back
 * could have) before it restarts the server; a file without a shadow was
 * never durable.  Copies into one shadow are serialized by a lock on it
 * and read the mapping while they hold it, so a shadow never goes back to
 * older content than a later sync made durable.  Files on persistent
 * memory get no shadow: /dev/shm does not survive an operating system
 * crash at all.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmshadow.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/file.h>
#include <unistd.h>

#include "storage/fd.h"

#include "pmhash.h"

/* Path of the shadow of an index file. */
static void
shadow_path(const char *path, char *shadow)
{
	snprintf(shadow, MAXPGPATH, "%s.shadow", path);
}

/* Open and lock the shadow of an index file. */
static int
shadow_open(const char *path, char *shadow)
{
	int			fd;

	shadow_path(path, shadow);
	fd = OpenTransientFile(shadow, O_RDWR | O_CREAT | PG_BINARY);
	if (fd < 0 || flock(fd, LOCK_EX) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open or lock pmhash shadow file \"%s\": %m", shadow)));
	return fd;
}

/* Write all of buf at offset of a file, or fail naming it. */
static void
write_fully(int fd, const char *buf, uint64 len, uint64 offset, const char *path)
{
	while (len > 0)
	{
		ssize_t		n = pg_pwrite(fd, buf, len, (off_t) offset);

		if (n <= 0)
		{
			if (n == 0)
				errno = ENOSPC;
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not write file \"%s\": %m", path)));
		}
		buf += n;
		offset += n;
		len -= n;
	}
}

/*
 * A range of a file mapped at base was made durable: copy it into the
 * file's shadow.
 */
void
pmhash_shadow_synced(const char *path, const char *base, uint64 offset, uint64 len)
{
	char		shadow[MAXPGPATH];
	int			fd;

	if (!pmhash_os_crash_shadows || len == 0)
		return;
	fd = shadow_open(path, shadow);
	write_fully(fd, base + offset, len, offset, shadow);
	CloseTransientFile(fd);
}

/* A whole file was made durable: copy it into its shadow (fd reads it). */
void
pmhash_shadow_synced_file(const char *path, int fd)
{
	char		shadow[MAXPGPATH];
	char	   *buf;
	int			sfd;
	uint64		offset = 0;
	ssize_t		n;

	if (!pmhash_os_crash_shadows)
		return;
	buf = palloc(BLCKSZ * 16);
	sfd = shadow_open(path, shadow);
	while ((n = pg_pread(fd, buf, BLCKSZ * 16, (off_t) offset)) > 0)
	{
		write_fully(sfd, buf, n, offset, shadow);
		offset += n;
	}
	if (n < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read pmhash file \"%s\": %m", path)));
	CloseTransientFile(sfd);
	pfree(buf);
}

/* A file is created anew: its old shadow, if any, no longer applies. */
void
pmhash_shadow_forget(const char *path)
{
	char		shadow[MAXPGPATH];

	if (!pmhash_os_crash_shadows)
		return;
	shadow_path(path, shadow);
	if (unlink(shadow) != 0 && errno != ENOENT)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not remove pmhash shadow file \"%s\": %m", shadow)));
}
