/*-------------------------------------------------------------------------
 *
 * pmstorage.c
 *	  Index files on disk: creation, copies, header state and removal.
 *
 * A file is created under the file lock (against the orphan sweep), with
 * mode 0600, replacing any file of the same name, made durable with its
 * directory entry; a transactional creation names its transaction in the
 * header, so that the orphan sweep removes the file if a crash prevents
 * both the commit and the undo (src/README, File lifecycle).  The mutable
 * part of a header (state bits, creator) is updated in place.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmstorage.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <libpmem.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/xact.h"
#include "access/xlog.h"
#include "storage/bufmgr.h"
#include "storage/fd.h"
#include "storage/smgr.h"

#include "pmhash.h"
#include "pmxlog.h"

#define INITIAL_SPARE_UNITS		64		/* room after the descriptors at creation */

/*
 * Create a fresh, empty index file with its header and empty descriptors,
 * replacing any file of the same name.  The header names its creator (the
 * current transaction if transactional, else the one given for replay), so
 * that the file cleaner removes it if a crash prevents both the commit and
 * the undo of the abort, which the caller arranges (pmhash_remember_created).
 */
void
pmhash_create_file(const PmhashFileKey *key, const char *path, uint32 shard_bits, uint64 generation,
				uint32 state, bool durable, bool transactional, FullTransactionId creator)
{
	PmhFileHeader hdr;
	uint32		flags = key->backend != INVALID_PROC_NUMBER ? PMH_FILE_TEMP : 0;
	size_t		len;
	int			is_pmem;
	char	   *base;

	/* as PostgreSQL checks its own pages when the cluster has checksums */
	if (DataChecksumsEnabled())
		flags |= PMH_FILE_CHECKSUMS;
	pmhash_directory_ensure();
	LWLockAcquire(pmhash_file_lock(), LW_EXCLUSIVE);
	if (unlink(path) != 0 && errno != ENOENT)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not remove old pmhash file \"%s\": %m", path)));
	pmh_header_init(&hdr, key->node.spcOid, key->node.dbOid, key->node.relNumber,
					key->backend == INVALID_PROC_NUMBER ? -1 : key->backend,
					generation, shard_bits, flags);
	hdr.state = state;
	if (transactional)
		creator = GetCurrentFullTransactionId();
	hdr.creator_xid = U64FromFullTransactionId(creator);
	len = (hdr.data_unit + INITIAL_SPARE_UNITS) * PMH_UNIT_SIZE;
	base = pmem_map_file(path, len, PMEM_FILE_CREATE | PMEM_FILE_EXCL, 0600, &len, &is_pmem);
	LWLockRelease(pmhash_file_lock());
	if (base == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create pmhash file \"%s\": %m", path),
				 errhint("Check that pmhash.directory (\"%s\") is writable and has free space.",
						 pmhash_directory)));
	memcpy(base, &hdr, sizeof(hdr));
	if (durable)
	{
		pmhash_shadow_forget(path);
		pmhash_persist_range(base, len, is_pmem, path);
	}
	pmem_unmap(base, len);
	if (durable)
		fsync_fname(pmhash_directory, true);
}

/*
 * Replay of CREATE: an empty file in the given state, replacing any previous
 * one; creator is the transaction that created it, if the creation was
 * transactional.
 */
void
pmhash_create_for_redo(const RelFileLocator *node, uint64 generation, uint32 shard_bits,
					uint32 state, FullTransactionId creator)
{
	PmhashFileKey	key;
	char		path[MAXPGPATH];

	pmhash_permanent_key(node, &key);
	pmhash_file_path(&key, path);
	pmhash_forget_file(&key);
	pmhash_drop_local(&key);
	pmhash_create_file(&key, path, shard_bits, generation, state, true, false, creator);
}

/*
 * Map a new, zeroed file of len bytes for a copy, in place of any file at
 * path (under the file lock, against the orphan sweep), after forgetting
 * the share and mapping of the file it replaces; NULL, with errno set, if
 * it cannot be created.
 */
static char *
map_new_copy(const PmhashFileKey *key, const char *path, size_t len, size_t *mapped_len,
			 int *is_pmem)
{
	char	   *base;

	pmhash_forget_file(key);
	pmhash_drop_local(key);
	pmhash_directory_ensure();
	LWLockAcquire(pmhash_file_lock(), LW_EXCLUSIVE);
	(void) unlink(path);
	base = pmem_map_file(path, len, PMEM_FILE_CREATE | PMEM_FILE_EXCL, 0600, mapped_len, is_pmem);
	LWLockRelease(pmhash_file_lock());
	return base;
}

/*
 * Copy the file of an index that core moved to a new relfilenode (ALTER
 * INDEX SET TABLESPACE, CREATE DATABASE from a template), rewriting the
 * identity in its header; if logged, log the copy's whole content, which
 * replay writes as it was (the source may have changed by then).  False if
 * the source cannot be read.
 */
bool
pmhash_copy_file(const RelFileLocator *from, const RelFileLocator *to, bool logged)
{
	PmhashFileKey	src_key;
	PmhashFileKey	dst_key;
	char		src[MAXPGPATH];
	char		dst[MAXPGPATH];
	size_t		src_len;
	size_t		dst_len;
	int			src_pmem;
	int			dst_pmem;
	char	   *src_base;
	char	   *dst_base;
	PmhFileHeader *hdr;

	pmhash_permanent_key(from, &src_key);
	pmhash_permanent_key(to, &dst_key);
	pmhash_file_path(&src_key, src);
	pmhash_file_path(&dst_key, dst);
	src_base = NULL;
	if (pmhash_is_plain_file(src))
		src_base = pmem_map_file(src, 0, 0, 0, &src_len, &src_pmem);
	if (src_base == NULL)
		return false;
	dst_base = map_new_copy(&dst_key, dst, src_len, &dst_len, &dst_pmem);
	if (dst_base == NULL)
	{
		int			save_errno = errno;

		pmem_unmap(src_base, src_len);
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create pmhash file \"%s\": %m", dst)));
	}
	memcpy(dst_base, src_base, src_len);
	hdr = (PmhFileHeader *) dst_base;
	hdr->spc_oid = to->spcOid;	/* informational: names ignore it */
	hdr->db_oid = to->dbOid;
	hdr->rel_node = to->relNumber;
	hdr->checksum = pmh_header_checksum(hdr);
	/* the copy holds no replayed change that a later sync would clear */
	hdr->state &= ~PMH_STATE_REDO_DIRTY;
	if (logged)
		pmhash_log_copy(to, dst_base, dst_len);
	pmhash_shadow_forget(dst);
	pmhash_persist_range(dst_base, dst_len, dst_pmem, dst);
	pmem_unmap(dst_base, dst_len);
	pmem_unmap(src_base, src_len);
	fsync_fname(pmhash_directory, true);
	return true;
}

/*
 * Replay of COPY_DATA: write size bytes of a copied file at offset; the
 * first part creates the file anew, file_size long and zeroed, the last
 * makes it durable.  False (logged) if the file cannot be written.
 */
bool
pmhash_copy_data_for_redo(const RelFileLocator *node, uint64 file_size, uint64 offset,
						  const char *data, uint32 size, uint32 flags)
{
	PmhashFileKey	key;
	char		path[MAXPGPATH];
	int			fd;
	bool		ok;

	pmhash_permanent_key(node, &key);
	pmhash_file_path(&key, path);
	if (flags & XLOG_PMHASH_COPY_FIRST)
	{
		size_t		len;
		int			is_pmem;
		char	   *base;

		base = map_new_copy(&key, path, file_size, &len, &is_pmem);
		if (base == NULL)
		{
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not create pmhash file \"%s\": %m", path)));
			return false;
		}
		pmem_unmap(base, len);
		pmhash_shadow_forget(path);
	}
	fd = OpenTransientFile(path, O_RDWR | PG_BINARY);
	ok = fd >= 0 && pg_pwrite(fd, data, size, (off_t) offset) == size;
	if (!ok)
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not write pmhash file \"%s\": %m", path)));
	if (fd >= 0)
		CloseTransientFile(fd);
	if (ok && (flags & XLOG_PMHASH_COPY_LAST))
	{
		pmhash_fsync_file(path);
		fsync_fname(pmhash_directory, true);
	}
	return ok;
}

/*
 * Leave an empty file marked to be rebuilt for an index whose file is
 * missing after recovery, with the build generation of its metapage.
 */
void
pmhash_create_placeholder(const RelFileLocator *node)
{
	PmhashFileKey	key;
	char		path[MAXPGPATH];
	SMgrRelation smgr = smgropen(*node, INVALID_PROC_NUMBER);
	Buffer		buf;
	PmhashMetaData meta;

	if (!smgrexists(smgr, MAIN_FORKNUM) || smgrnblocks(smgr, MAIN_FORKNUM) == 0)
		return;
	buf = ReadBufferWithoutRelcache(*node, MAIN_FORKNUM, PMHASH_META_BLKNO, RBM_NORMAL,
									NULL, true);
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	memcpy(&meta, PageGetContents(BufferGetPage(buf)), sizeof(meta));
	UnlockReleaseBuffer(buf);
	if (meta.magic != PMHASH_META_MAGIC || meta.shard_bits > PMH_MAX_SHARD_BITS)
		return;
	pmhash_permanent_key(node, &key);
	pmhash_file_path(&key, path);
	pmhash_create_file(&key, path, meta.shard_bits, meta.build_generation,
				PMH_STATE_NEEDS_REBUILD, true, false, InvalidFullTransactionId);
}

/*
 * Read a file's header: NULL if it is sound, else why not (pmh_older_format
 * for a file of the previous format version).
 */
const char *
pmhash_read_file_header(const char *path, PmhFileHeader *hdr)
{
	int			fd = OpenTransientFile(path, O_RDONLY | O_NOFOLLOW | PG_BINARY);
	const char *err = "The file header cannot be read.";

	if (fd < 0)
		return err;
	/* the header alone: the file's length is checked when it is attached */
	if (read(fd, hdr, sizeof(*hdr)) == sizeof(*hdr))
		err = pmh_header_check(hdr, UINT64_MAX);
	CloseTransientFile(fd);
	return err;
}

/*
 * Durably update the mutable part of a file's header: set state bits, and
 * forget its creator once the creating transaction is known to have
 * committed.  Other servers' processes may have the file mapped; each
 * field is written on its own.
 */
static void
update_file_header(const char *path, uint64 set_bits, bool settle_creator)
{
	size_t		len;
	int			is_pmem;
	char	   *base = NULL;
	PmhFileHeader *hdr;

	if (pmhash_is_plain_file(path))
		base = pmem_map_file(path, 0, 0, 0, &len, &is_pmem);
	if (base == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not map pmhash file \"%s\": %m", path)));
	hdr = (PmhFileHeader *) base;
	if (set_bits != 0)
		hdr->state |= set_bits;
	if (settle_creator)
		hdr->creator_xid = 0;
	pmhash_persist_range(base, sizeof(PmhFileHeader), is_pmem, path);
	pmem_unmap(base, len);
}

/* Set state bits in a file's header, durably. */
void
pmhash_set_file_state(const char *path, uint64 set_bits)
{
	update_file_header(path, set_bits, false);
}

/* Record durably that a file's creating transaction committed. */
void
pmhash_settle_file_creator(const char *path)
{
	update_file_header(path, 0, true);
}

/* Remove a file, ignoring one that is already gone. */
void
pmhash_unlink_file(const char *path)
{
	if (unlink(path) != 0 && errno != ENOENT)
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("could not remove pmhash file \"%s\": %m", path)));
}
