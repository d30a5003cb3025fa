/*-------------------------------------------------------------------------
 *
 * pmfilename.c
 *	  Names and identities of index files.
 *
 * An index file is named after its index's database and relfilenode, not
 * its tablespace (ALTER DATABASE SET TABLESPACE can change that under it),
 * and, for a temporary index, its owning backend: <db>_<relfilenode>.pmh or
 * t<backend>_<db>_<relfilenode>.pmh in pmhash.directory.  This file writes
 * and parses that format, and only this one.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmfilename.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>

#include "utils/rel.h"

#include "pmhash.h"

/*
 * The file identity of an index relation: database, relfilenode, and the
 * owning backend of a temporary index.  The tablespace is left out, as in
 * the file name, since moving a database changes it under the index.
 */
void
pmhash_file_key(Relation index, PmhashFileKey *key)
{
	memset(key, 0, sizeof(PmhashFileKey));
	key->node = index->rd_locator;
	key->node.spcOid = InvalidOid;
	key->backend = index->rd_backend;
}

/* Path of an index file, in pmhash.directory, named after database and relfilenode. */
void
pmhash_file_path(const PmhashFileKey *key, char *path)
{
	if (key->backend == INVALID_PROC_NUMBER)
		snprintf(path, MAXPGPATH, "%s/%u_%u.pmh", pmhash_directory,
				 key->node.dbOid, key->node.relNumber);
	else
		snprintf(path, MAXPGPATH, "%s/t%d_%u_%u.pmh", pmhash_directory,
				 key->backend, key->node.dbOid, key->node.relNumber);
}

/* The key of a permanent index's file. */
void
pmhash_permanent_key(const RelFileLocator *node, PmhashFileKey *key)
{
	memset(key, 0, sizeof(PmhashFileKey));
	key->node = *node;
	key->node.spcOid = InvalidOid;
	key->backend = INVALID_PROC_NUMBER;
}

/* Parse an index file name into its identity; false if it is not one. */
bool
pmhash_parse_file_name(const char *name, Oid *db, Oid *rel, ProcNumber *backend)
{
	int			b;
	char		tail[8];

	if (sscanf(name, "t%d_%u_%u.%7s", &b, db, rel, tail) == 4 && strcmp(tail, "pmh") == 0)
		*backend = b;
	else if (sscanf(name, "%u_%u.%7s", db, rel, tail) == 3 && strcmp(tail, "pmh") == 0)
		*backend = INVALID_PROC_NUMBER;
	else
		return false;
	return true;
}

/*
 * Whether a path names a regular file itself, not a symbolic link: pmhash
 * never follows a link out of pmhash.directory, so that whoever can write
 * there cannot make the server map, read or change another file.  false
 * with errno ENOENT if there is nothing there.
 */
bool
pmhash_is_plain_file(const char *path)
{
	struct stat st;

	if (lstat(path, &st) != 0)
		return false;
	errno = S_ISREG(st.st_mode) ? 0 : ELOOP;
	return S_ISREG(st.st_mode);
}
