/*-------------------------------------------------------------------------
 *
 * pmfile.c
 *	  Index files: naming, creation, mapping, attaching to shared memory,
 *	  the metapage, persistence and file-space allocation.
 *
 * Each index has a small ordinary main fork whose block 0 is a metapage
 * recording the build generation of its pmhash file; core's transactional
 * storage carries the main fork through DROP, TRUNCATE, REINDEX and
 * recovery, and the file is named after the main fork's database and
 * relfilenode (not its tablespace, which ALTER DATABASE SET TABLESPACE can
 * change under it).  A file whose header does not match its metapage is
 * reported as damaged.
 *
 * Persistence (src/README, Persistence paths): per-entry changes are
 * recorded as dirty ranges, cache lines on DAX and pages on an ordinary
 * file, and made durable at pre-commit; structural changes at once.
 * Temporary indexes are never synced.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmfile.c
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
#include "access/xloginsert.h"
#include "common/pg_prng.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/fd.h"
#include "storage/smgr.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "pmhash.h"

#define INITIAL_SPARE_UNITS		64		/* room after the directory at creation */
#define LARGE_GROWTH_UNITS		8192	/* growth granularity of large files: 2 MiB */
#define SMALL_GROWTH_UNITS		64		/* growth granularity of small files: 16 kB */

/* How attach() found a file. */
typedef enum AttachResult
{
	ATTACHED,
	NEEDS_REBUILD,				/* recovery left it to be rebuilt from the heap */
	UNUSABLE					/* replay only: missing or damaged */
} AttachResult;

static HTAB *local_indexes = NULL;
static uint64 forget_seen = 0;
static bool any_dirty = false;

static void map_file(PmhIndex *ix, const char *path);
static void persist_range(char *base, size_t len, int is_pmem, const char *path);
static void reclaim_retired(PmhSlot *slot);

/*
 * The file identity of an index relation: database, relfilenode, and the
 * owning backend of a temporary index.  The tablespace is left out, as in
 * the file name, since moving a database changes it under the index.
 */
void
pmh_file_key(Relation index, PmhFileKey *key)
{
	memset(key, 0, sizeof(PmhFileKey));
	key->node = index->rd_node;
	key->node.spcNode = InvalidOid;
	key->backend = index->rd_backend;
}

/* Path of an index file, in pmhash.directory, named after database and relfilenode. */
void
pmh_file_path(const PmhFileKey *key, char *path)
{
	if (key->backend == InvalidBackendId)
		snprintf(path, MAXPGPATH, "%s/%u_%u.pmh", pmhash_directory,
				 key->node.dbNode, key->node.relNode);
	else
		snprintf(path, MAXPGPATH, "%s/t%d_%u_%u.pmh", pmhash_directory,
				 key->backend, key->node.dbNode, key->node.relNode);
}

/* The key of a permanent index's file. */
static void
permanent_key(const RelFileNode *node, PmhFileKey *key)
{
	memset(key, 0, sizeof(PmhFileKey));
	key->node = *node;
	key->node.spcNode = InvalidOid;
	key->backend = InvalidBackendId;
}

/* Report a damaged index; the hint says how to repair it. */
void
pmh_raise_damaged(const char *index_name, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INDEX_CORRUPTED),
			 errmsg("pmhash index \"%s\" is damaged", index_name),
			 errdetail("%s", detail),
			 errhint("Rebuild the index with REINDEX INDEX %s.", quote_identifier(index_name))));
}

/* The backend-local entry of a file, created empty if new. */
static PmhIndex *
local_entry(const PmhFileKey *key)
{
	PmhIndex   *ix;
	bool		found;

	if (local_indexes == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(PmhFileKey);
		ctl.entrysize = sizeof(PmhIndex);
		ctl.hcxt = TopMemoryContext;
		local_indexes = hash_create("pmhash local indexes", 64, &ctl,
									HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	ix = hash_search(local_indexes, key, HASH_ENTER, &found);
	if (!found)
	{
		memset((char *) ix + sizeof(PmhFileKey), 0, sizeof(PmhIndex) - sizeof(PmhFileKey));
		ix->key = *key;
	}
	return ix;
}

/* Unmap a local entry's file. */
static void
unmap_local(PmhIndex *ix)
{
	if (ix->base)
	{
		pmh_fault_unregister(ix->base);
		pmem_unmap(ix->base, ix->mapped_len);
	}
	ix->base = NULL;
	ix->mapped_len = 0;
	ix->slot = NULL;
	ix->ndirty = 0;
}

/*
 * Forget this backend's mapping of a file and what it had pending for it.
 * The entry itself stays, so that pointers to it (rd_amcache) stay valid.
 */
void
pmh_drop_local(const PmhFileKey *key)
{
	PmhIndex   *ix;

	if (local_indexes == NULL)
		return;
	ix = hash_search(local_indexes, key, HASH_FIND, NULL);
	if (ix == NULL)
		return;
	unmap_local(ix);
	ix->npending = 0;
	ix->deferred = false;
}

/* Unmap files whose slots were released (dropped or evicted indexes). */
static void
prune_locals(void)
{
	HASH_SEQ_STATUS status;
	PmhIndex   *ix;
	uint64		counter = pmh_forget_counter();

	if (counter == forget_seen || local_indexes == NULL)
		return;
	forget_seen = counter;
	hash_seq_init(&status, local_indexes);
	while ((ix = hash_seq_search(&status)) != NULL)
	{
		if (ix->slot == NULL || ix->slot->slot_gen != ix->slot_gen ||
			ix->slot->state != PMH_SLOT_READY)
		{
			if (ix->ndirty > 0 && ix->base != NULL)
				pmh_sync_dirty(ix);
			unmap_local(ix);
		}
	}
}

/* Flush callback on DAX. */
void
pmh_pmem_flush(void *arg pg_attribute_unused(), const void *addr, size_t len)
{
	pmem_flush(addr, len);
}

/* Drain callback on DAX. */
void
pmh_pmem_drain(void *arg pg_attribute_unused())
{
	pmem_drain();
}

/*
 * Flush callback of durable files: remember the dirty range, rounded to
 * cache lines (DAX) or pages (msync), to make it durable at commit or at
 * the next sync.  DAX keeps a list of ranges, since flushing costs per
 * line; msync keeps one range spanning them all, since one msync writes
 * back only the dirty pages of its range and costs a device flush per
 * call.
 */
static void
record_dirty(void *arg, const void *addr, size_t len)
{
	PmhIndex   *ix = arg;
	uint64		granule = ix->is_pmem ? 64 : (uint64) sysconf(_SC_PAGESIZE);
	uint64		start = (uint64) ((const char *) addr - ix->base) / granule * granule;
	uint64		end = ((uint64) ((const char *) addr - ix->base) + len + granule - 1) / granule * granule;

	if (ix->ndirty > 0)
	{
		uint64	   *last = &ix->dirty[2 * (ix->ndirty - 1)];

		if (!ix->is_pmem || (start >= last[0] && start <= last[1]))
		{
			last[0] = Min(last[0], start);
			last[1] = Max(last[1], end);
			return;
		}
	}
	if (ix->ndirty == ix->maxdirty)
	{
		if (ix->maxdirty >= 4096)
			pmh_sync_dirty(ix);
		else
		{
			ix->maxdirty = Max(16, ix->maxdirty * 2);
			ix->dirty = ix->dirty ?
				repalloc(ix->dirty, 2 * ix->maxdirty * sizeof(uint64)) :
				MemoryContextAlloc(TopMemoryContext, 2 * ix->maxdirty * sizeof(uint64));
		}
	}
	ix->dirty[2 * ix->ndirty] = start;
	ix->dirty[2 * ix->ndirty + 1] = end;
	ix->ndirty++;
	any_dirty = true;
}

/* Sync callback of durable files: make the recorded ranges durable now. */
static void
sync_dirty(void *arg)
{
	pmh_sync_dirty((PmhIndex *) arg);
}

/* Make the dirty ranges of one file durable: flush and fence, or msync. */
void
pmh_sync_dirty(PmhIndex *ix)
{
	for (int i = 0; i < ix->ndirty; i++)
	{
		uint64		start = ix->dirty[2 * i];
		uint64		end = Min(ix->dirty[2 * i + 1], ix->mapped_len);

		if (end <= start)
			continue;
		if (ix->is_pmem)
			pmem_flush(ix->base + start, end - start);
		else if (pmem_msync(ix->base + start, end - start) != 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not sync pmhash file \"%s\": %m", ix->slot->path)));
	}
	if (ix->is_pmem && ix->ndirty > 0)
		pmem_drain();
	ix->ndirty = 0;
}

/* Call fn for every index file this backend knows. */
void
pmh_foreach_local(void (*fn) (PmhIndex *ix))
{
	HASH_SEQ_STATUS status;
	PmhIndex   *ix;

	if (local_indexes == NULL)
		return;
	hash_seq_init(&status, local_indexes);
	while ((ix = hash_seq_search(&status)) != NULL)
		fn(ix);
}

/* Make durable every file this backend dirtied (at commit, and during replay). */
void
pmh_sync_all_dirty(void)
{
	HASH_SEQ_STATUS status;
	PmhIndex   *ix;

	if (!any_dirty || local_indexes == NULL)
		return;
	hash_seq_init(&status, local_indexes);
	while ((ix = hash_seq_search(&status)) != NULL)
	{
		if (ix->ndirty > 0 && ix->base != NULL)
			pmh_sync_dirty(ix);
	}
	any_dirty = false;
}

/* Write header state bits and redo position of a mapped file durably. */
static void
update_header(PmhIndex *ix, uint64 set_bits, uint64 clear_bits, XLogRecPtr redo_lsn)
{
	PmhFileHeader *hdr = (PmhFileHeader *) ix->base;

	hdr->state = (hdr->state | set_bits) & ~clear_bits;
	if (redo_lsn != InvalidXLogRecPtr)
		hdr->redo_lsn = redo_lsn;
	persist_range(ix->base, sizeof(PmhFileHeader), ix->is_pmem, ix->slot->path);
}

/*
 * Replay is about to change a file: if this is its first change since the
 * last sync, record durably that the file holds replayed changes not yet
 * durable.  An OS crash of a standby then cannot silently lose them (see
 * pmh_recovery_flag_files).
 */
void
pmh_redo_will_change(PmhIndex *ix)
{
	if (!ix->durable || ix->redo_dirty)
		return;
	update_header(ix, PMH_STATE_REDO_DIRTY, 0, InvalidXLogRecPtr);
	ix->redo_dirty = true;
}

/* Replay synced everything up to lsn: files hold no unsynced replayed change. */
void
pmh_redo_synced(XLogRecPtr lsn)
{
	HASH_SEQ_STATUS status;
	PmhIndex   *ix;

	pmh_sync_all_dirty();
	if (local_indexes == NULL)
		return;
	hash_seq_init(&status, local_indexes);
	while ((ix = hash_seq_search(&status)) != NULL)
	{
		if (ix->redo_dirty && ix->base != NULL)
			update_header(ix, 0, PMH_STATE_REDO_DIRTY, lsn);
		ix->redo_dirty = false;
	}
}

/*
 * The persistence callbacks a file gets when not in a bulk build.  Changes
 * of single entries only have to be durable before the commit record (see
 * src/README, Persistence paths), so their flushes are recorded and done, with one fence or one
 * msync per range, at commit; structural changes sync at once.
 */
static PmhPersist
normal_persist(PmhIndex *ix)
{
	if (!ix->durable)
		return (PmhPersist) {NULL, NULL, NULL, ix};
	return (PmhPersist) {record_dirty, NULL, sync_dirty, ix};
}

/*
 * Give back the free tail of a freshly built file: growth left up to half
 * of it unused.  Nobody else maps the file during a build.
 */
static void
trim_file(PmhIndex *ix)
{
	PmhSlot    *slot = ix->slot;
	PmhFreeMap *map = &slot->freemap;
	uint64		file_units;
	PmhExtent  *last;
	uint64		keep;
	int			fd;

	LWLockAcquire(pmh_alloc_lock(slot), LW_EXCLUSIVE);
	reclaim_retired(slot);
	file_units = pg_atomic_read_u64(&slot->file_units);
	last = map->count > 0 ? &map->extents[map->count - 1] : NULL;
	if (last == NULL || last->unit + last->count != file_units ||
		last->count < 2 * SMALL_GROWTH_UNITS)
	{
		LWLockRelease(pmh_alloc_lock(slot));
		return;
	}
	keep = (last->unit + SMALL_GROWTH_UNITS - 1) / SMALL_GROWTH_UNITS * SMALL_GROWTH_UNITS;
	fd = OpenTransientFile(slot->path, O_RDWR | PG_BINARY);
	if (fd < 0 || ftruncate(fd, (off_t) (keep * PMH_UNIT_SIZE)) != 0)
	{
		if (fd >= 0)
			CloseTransientFile(fd);
		LWLockRelease(pmh_alloc_lock(slot));
		return;					/* keeping the space is harmless */
	}
	CloseTransientFile(fd);
	if (keep > last->unit)
		last->count = keep - last->unit;
	else
		map->count--;
	pg_atomic_write_u64(&slot->file_units, keep);
	LWLockRelease(pmh_alloc_lock(slot));
	/* the mapping must not reach past the end of the file */
	map_file(ix, slot->path);
}

/* Make a deferred (bulk-built) file durable as a whole. */
void
pmh_finish_deferred(PmhIndex *ix)
{
	trim_file(ix);
	ix->deferred = false;
	if (ix->durable)
	{
		if (ix->is_pmem)
			pmem_persist(ix->base, ix->mapped_len);
		else if (pmem_msync(ix->base, ix->mapped_len) != 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not sync pmhash file \"%s\": %m", ix->slot->path)));
	}
	ix->persist = normal_persist(ix);
}

/* Make sure the mapping covers the file up to end_unit, remapping if it grew. */
void
pmh_ensure_mapped(PmhIndex *ix, uint64 end_unit)
{
	if (end_unit * PMH_UNIT_SIZE <= ix->mapped_len)
		return;
	map_file(ix, ix->slot->path);
	if (end_unit * PMH_UNIT_SIZE > ix->mapped_len)
		pmh_raise_damaged(NameStr(ix->name),
						  psprintf("File \"%s\" is shorter than the index's segments: it was truncated.",
								   ix->slot->path));
}

/* Map (or remap) a file into this backend; errors name the index of ix. */
static void
map_file(PmhIndex *ix, const char *path)
{
	struct stat st;
	size_t		len;
	int			is_pmem;
	char	   *base;

	/* libpmem refuses an empty file with an obscure error; a short one is damaged */
	if (stat(path, &st) == 0 && st.st_size < PMH_HEADER_UNITS * PMH_UNIT_SIZE)
		pmh_raise_damaged(NameStr(ix->name),
						  psprintf("File \"%s\" is shorter than a file header: it was truncated.",
								   path));
	base = pmem_map_file(path, 0, 0, 0, &len, &is_pmem);
	if (base == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\" of pmhash index \"%s\": %m",
						path, NameStr(ix->name)),
				 errhint("Rebuild the index with REINDEX INDEX %s.",
						 quote_identifier(NameStr(ix->name)))));
	if (ix->base)
	{
		pmh_fault_unregister(ix->base);
		pmem_unmap(ix->base, ix->mapped_len);
	}
	ix->base = base;
	ix->mapped_len = len;
	ix->is_pmem = is_pmem;
	pmh_fault_register(base, len);
}

/* Table callback: working memory. */
static void *
ops_alloc_memory(void *arg pg_attribute_unused(), size_t size)
{
	return palloc_extended(size, MCXT_ALLOC_HUGE);
}

/* Table callback: free working memory. */
static void
ops_free_memory(void *arg pg_attribute_unused(), void *ptr)
{
	pfree(ptr);
}

/* Free retired segments that no reader can see any more (allocation lock held). */
static void
reclaim_retired(PmhSlot *slot)
{
	int			keep = 0;

	for (int i = 0; i < slot->nretired; i++)
	{
		PmhRetired *r = &slot->retired[i];

		if (pmh_readers_done(r->epoch))
		{
			if (pmh_freemap_release(&slot->freemap, r->unit, r->units) != 0)
				elog(WARNING, "pmhash file \"%s\": segment at unit " UINT64_FORMAT " freed twice",
					 slot->path, r->unit);
		}
		else
			slot->retired[keep++] = *r;
	}
	slot->nretired = keep;
}

/*
 * Grow a file so that units more units fit, and add the space to the free
 * map (allocation lock held).
 */
static void
grow_file(PmhSlot *slot, uint64 units, const char *index_name)
{
	struct stat st;
	uint64		cur = pg_atomic_read_u64(&slot->file_units);
	uint64		want = Max(cur + units, cur + cur / 8);
	uint64		step = want >= 8 * LARGE_GROWTH_UNITS ? LARGE_GROWTH_UNITS : SMALL_GROWTH_UNITS;
	int			fd;
	int			rc;

	want = (want + step - 1) / step * step;
	fd = OpenTransientFile(slot->path, O_RDWR | PG_BINARY);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open pmhash file \"%s\": %m", slot->path)));
	/* extending a truncated file would hide its loss behind zeros */
	if (fstat(fd, &st) != 0 || (uint64) st.st_size < cur * PMH_UNIT_SIZE)
	{
		CloseTransientFile(fd);
		pmh_raise_damaged(index_name,
						  psprintf("File \"%s\" is shorter than the index's segments: it was truncated.",
								   slot->path));
	}
	rc = posix_fallocate(fd, 0, (off_t) (want * PMH_UNIT_SIZE));
	if (rc == EOPNOTSUPP || rc == EINVAL)
		rc = ftruncate(fd, (off_t) (want * PMH_UNIT_SIZE)) == 0 ? 0 : errno;
	CloseTransientFile(fd);
	if (rc != 0)
	{
		errno = rc;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not extend pmhash file \"%s\" to %llu bytes: %m",
						slot->path, (unsigned long long) (want * PMH_UNIT_SIZE)),
				 errhint("Free some space on the file system of pmhash.directory.")));
	}
	pg_atomic_write_u64(&slot->file_units, want);
	pmh_freemap_release(&slot->freemap, cur, want - cur);
}

/* Table callback: file space for a new segment. */
static uint64
ops_alloc_space(void *arg, uint64 units)
{
	PmhIndex   *ix = arg;
	PmhSlot    *slot = ix->slot;
	uint64		unit;

	LWLockAcquire(pmh_alloc_lock(slot), LW_EXCLUSIVE);
	reclaim_retired(slot);
	unit = pmh_freemap_alloc(&slot->freemap, units);
	if (unit == 0)
	{
		grow_file(slot, units, NameStr(ix->name));
		unit = pmh_freemap_alloc(&slot->freemap, units);
	}
	LWLockRelease(pmh_alloc_lock(slot));
	if (unit != 0)
		pmh_ensure_mapped(ix, unit + units);
	return unit;
}

/*
 * Table callback: a segment is no longer published.  It is freed once every
 * reader that might have seen it is done; this never waits.
 */
static void
ops_free_space(void *arg, uint64 unit, uint64 units)
{
	PmhSlot    *slot = ((PmhIndex *) arg)->slot;
	uint64		epoch = pmh_retire_epoch();

	LWLockAcquire(pmh_alloc_lock(slot), LW_EXCLUSIVE);
	reclaim_retired(slot);
	if (slot->nretired == PMHASH_MAX_RETIRED)
	{
		/* a reader is stuck: leave the oldest segment to the next attach */
		memmove(&slot->retired[0], &slot->retired[1],
				(PMHASH_MAX_RETIRED - 1) * sizeof(PmhRetired));
		slot->nretired--;
	}
	slot->retired[slot->nretired].unit = unit;
	slot->retired[slot->nretired].units = units;
	slot->retired[slot->nretired].epoch = epoch;
	slot->nretired++;
	LWLockRelease(pmh_alloc_lock(slot));
}

/* Table callback: show a new segment to readers. */
static void
ops_publish(void *arg, uint32 shard, uint64 desc, uint32 nposting)
{
	PmhShardState *state = &((PmhIndex *) arg)->slot->shards[shard];

	pmh_mirror_publish(&state->mirror, desc, nposting);
	state->broken = false;
}

/* Table callback: current mapping. */
static char *
ops_base(void *arg)
{
	return ((PmhIndex *) arg)->base;
}

/* Table callback: units of the current mapping. */
static uint64
ops_mapped_units(void *arg)
{
	return ((PmhIndex *) arg)->mapped_len / PMH_UNIT_SIZE;
}

/* Table callback: log the content of a rebuilt shard, when the index is logged. */
static uint64
ops_log_rebuild(void *arg, uint32 shard, const PmhEntry *entries, uint64 count, double fill)
{
	PmhIndex   *ix = arg;

	if (!ix->logged)
		return 0;
	return pmh_log_rebuild(&ix->node, shard, fill, entries, count);
}

/*
 * Set up the core table view and persistence of a mapped, attached file,
 * with the geometry its slot holds (checked when the file was attached),
 * not what the file's header says now.
 */
static void
setup_table(PmhIndex *ix)
{
	ix->durable = ix->slot->durable;
	ix->ops = (PmhTableOps) {ops_alloc_memory, ops_free_memory, ops_alloc_space,
		ops_free_space, ops_publish, ops_base, ops_mapped_units, ops_log_rebuild, ix};
	ix->persist = ix->deferred ? (PmhPersist) {NULL, NULL, NULL, ix} : normal_persist(ix);
	ix->table.ops = &ix->ops;
	ix->table.persist = &ix->persist;
	ix->table.shard_bits = ix->slot->shard_bits;
	ix->table.file_generation = ix->slot->build_generation;
	ix->table.dir_unit = PMH_HEADER_UNITS;
	ix->table.checksums = ix->slot->checksums;
}

/* Read and check the metapage of an index (and its LSN, if lsn is not NULL). */
void
pmh_read_meta(Relation index, PmhashMetaData *meta, XLogRecPtr *lsn)
{
	Buffer		buf;
	Page		page;
	PmhashPageOpaqueData *opaque;
	PmhashMetaData *m;

	if (RelationGetNumberOfBlocks(index) == 0)
		pmh_raise_damaged(RelationGetRelationName(index), "The index has no metapage.");
	buf = ReadBuffer(index, PMHASH_META_BLKNO);
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	opaque = (PmhashPageOpaqueData *) PageGetSpecialPointer(page);
	m = (PmhashMetaData *) PageGetContents(page);
	if (PageIsNew(page) || PageGetSpecialSize(page) != MAXALIGN(sizeof(PmhashPageOpaqueData)) ||
		opaque->page_id != PMHASH_PAGE_ID || m->magic != PMHASH_META_MAGIC ||
		m->version != PMHASH_META_VERSION || m->shard_bits > PMH_MAX_SHARD_BITS)
	{
		UnlockReleaseBuffer(buf);
		pmh_raise_damaged(RelationGetRelationName(index),
						  "The metapage is not a pmhash metapage.");
	}
	memcpy(meta, m, sizeof(PmhashMetaData));
	if (lsn)
		*lsn = PageGetLSN(page);
	UnlockReleaseBuffer(buf);
}

/* Lay out a metapage in a page image. */
static void
fill_meta_page(Page page, const PmhashMetaData *meta)
{
	PmhashPageOpaqueData *opaque;

	PageInit(page, BLCKSZ, sizeof(PmhashPageOpaqueData));
	opaque = (PmhashPageOpaqueData *) PageGetSpecialPointer(page);
	opaque->page_id = PMHASH_PAGE_ID;
	memcpy(PageGetContents(page), meta, sizeof(PmhashMetaData));
	((PageHeader) page)->pd_lower = (PageGetContents(page) + sizeof(PmhashMetaData)) - (char *) page;
}

/*
 * Write the metapage of a fork: the main fork through shared buffers, the
 * init fork of an unlogged index directly (as contrib/bloom does).
 */
void
pmh_write_meta(Relation index, ForkNumber fork, const PmhashMetaData *meta)
{
	if (fork == MAIN_FORKNUM)
	{
		Buffer		buf;

		if (RelationGetNumberOfBlocks(index) == 0)
			buf = ReadBufferExtended(index, MAIN_FORKNUM, P_NEW, RBM_NORMAL, NULL);
		else
			buf = ReadBuffer(index, PMHASH_META_BLKNO);
		Assert(BufferGetBlockNumber(buf) == PMHASH_META_BLKNO);
		LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
		START_CRIT_SECTION();
		fill_meta_page(BufferGetPage(buf), meta);
		MarkBufferDirty(buf);
		if (RelationNeedsWAL(index))
			log_newpage_buffer(buf, true);
		END_CRIT_SECTION();
		UnlockReleaseBuffer(buf);
	}
	else
	{
		PGAlignedBlock block;

		fill_meta_page(block.data, meta);
		PageSetChecksumInplace(block.data, PMHASH_META_BLKNO);
		smgrwrite(RelationGetSmgr(index), fork, PMHASH_META_BLKNO, block.data, true);
		log_newpage(&(RelationGetSmgr(index))->smgr_rnode.node, fork,
					PMHASH_META_BLKNO, block.data, true);
		smgrimmedsync(RelationGetSmgr(index), fork);
	}
}

/* Make a freshly written range durable (DAX or ordinary file). */
static void
persist_range(char *base, size_t len, int is_pmem, const char *path)
{
	if (is_pmem)
		pmem_persist(base, len);
	else if (pmem_msync(base, len) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not sync pmhash file \"%s\": %m", path)));
}

/*
 * Create a fresh, empty index file with its header and an empty directory,
 * replacing any file of the same name.  A transactional creation is undone
 * if the (sub)transaction aborts; the header names its creator (the current
 * transaction, or the one given for replay), so that the file cleaner
 * removes it if a crash prevents both the commit and the undo.
 */
static void
create_file(const PmhFileKey *key, Oid relid, const char *path, uint32 shard_bits,
			uint64 generation, uint32 state, bool durable, bool transactional,
			FullTransactionId creator)
{
	PmhFileHeader hdr;
	uint32		flags = key->backend != InvalidBackendId ? PMH_FILE_TEMP : 0;
	size_t		len;
	int			is_pmem;
	char	   *base;

	/* as PostgreSQL checks its own pages when the cluster has checksums */
	if (DataChecksumsEnabled())
		flags |= PMH_FILE_CHECKSUMS;
	pmh_directory_ensure();
	LWLockAcquire(pmh_file_lock(), LW_EXCLUSIVE);
	if (unlink(path) != 0 && errno != ENOENT)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not remove old pmhash file \"%s\": %m", path)));
	pmh_header_init(&hdr, key->node.spcNode, key->node.dbNode, key->node.relNode,
					key->backend == InvalidBackendId ? -1 : key->backend,
					generation, shard_bits, flags);
	hdr.state = state;
	if (transactional)
		creator = GetCurrentFullTransactionId();
	hdr.creator_xid = U64FromFullTransactionId(creator);
	len = (hdr.data_unit + INITIAL_SPARE_UNITS) * PMH_UNIT_SIZE;
	base = pmem_map_file(path, len, PMEM_FILE_CREATE | PMEM_FILE_EXCL, 0600, &len, &is_pmem);
	LWLockRelease(pmh_file_lock());
	if (base == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create pmhash file \"%s\": %m", path),
				 errhint("Check that pmhash.directory (\"%s\") is writable and has free space.",
						 pmhash_directory)));
	memcpy(base, &hdr, sizeof(hdr));
	if (durable)
		persist_range(base, len, is_pmem, path);
	pmem_unmap(base, len);
	if (durable)
		fsync_fname(pmhash_directory, true);
	if (transactional)
		pmh_remember_created(key, relid, path);
}

/* A random, nonzero build generation. */
static uint64
new_generation(void)
{
	uint64		gen = 0;

	while (gen == 0)
	{
		if (!pg_strong_random(&gen, sizeof(gen)))
			gen = pg_prng_uint64(&pg_global_prng_state);
	}
	return gen;
}

/* Metapage contents for a file. */
static void
make_meta(PmhashMetaData *meta, uint64 generation, uint32 shard_bits, uint32 flags)
{
	memset(meta, 0, sizeof(PmhashMetaData));
	meta->magic = PMHASH_META_MAGIC;
	meta->version = PMHASH_META_VERSION;
	meta->build_generation = generation;
	meta->shard_bits = shard_bits;
	meta->flags = flags;
	strlcpy(meta->directory, pmhash_directory, MAXPGPATH);
}

/* Attach callback: fill a shard's mirror and counters. */
static void
attach_visit(void *arg, uint32 shard, uint64 desc, uint32 nposting, const PmhCounts *counts,
			 int broken)
{
	PmhSlot    *slot = arg;

	pmh_mirror_publish(&slot->shards[shard].mirror, desc, nposting);
	slot->shards[shard].counts = *counts;
	slot->shards[shard].broken = broken != 0;
}

/*
 * Check a freshly mapped file against what it should be; NULL if sound.
 * The header is copied to *hdr first, so that what was checked is what the
 * caller uses.  generation 0 skips the build check (replay has no metapage
 * at hand).
 */
static const char *
check_header(PmhIndex *ix, uint64 generation, PmhFileHeader *hdr)
{
	const char *err;

	if (ix->mapped_len < sizeof(PmhFileHeader))
		return "The file is shorter than a file header.";
	memcpy(hdr, ix->base, sizeof(PmhFileHeader));
	err = pmh_header_check(hdr, ix->mapped_len / PMH_UNIT_SIZE);
	if (err == NULL &&
		(hdr->db_oid != ix->key.node.dbNode || hdr->rel_node != ix->key.node.relNode))
		err = "The file belongs to another relation; it was copied or moved.";
	if (err == NULL && generation != 0 && hdr->build_generation != generation)
		err = "The file does not belong to this build of the index.";
	return err;
}

/*
 * Check the header of a mapped file against the slot it is attached to: it
 * may have been damaged, or the file replaced, since the slot was filled.
 * NULL if it agrees.
 */
const char *
pmh_check_attached_header(PmhIndex *ix)
{
	PmhFileHeader hdr;
	const char *err = check_header(ix, ix->slot->build_generation, &hdr);

	if (err == NULL && hdr.shard_bits != ix->slot->shard_bits)
		err = "The file header does not match the index's attached geometry.";
	return err;
}

/*
 * Map a file whose slot another backend attached, if it is the file the
 * slot describes.  NULL if so, else why not (and nothing is mapped).
 */
static const char *
map_attached(PmhIndex *ix, PmhSlot *slot, const char *path)
{
	const char *err;

	map_file(ix, path);
	ix->slot = slot;
	err = pmh_check_attached_header(ix);
	if (err != NULL)
	{
		unmap_local(ix);
		return err;
	}
	ix->slot_gen = slot->slot_gen;
	setup_table(ix);
	return NULL;
}

/* The detail of an error about a damaged file. */
static char *
file_damage(const char *path, const char *err)
{
	return psprintf("File \"%s\": %s", path, err);
}

/*
 * Whether the file of a permanent index is missing because a restore from a
 * base backup did not contain it (and can be recreated: not in recovery).
 */
static bool
lost_to_restore(PmhIndex *ix, const char *path, XLogRecPtr meta_lsn)
{
	struct stat st;

	return ix->key.backend == InvalidBackendId && !RecoveryInProgress() &&
		stat(path, &st) != 0 && errno == ENOENT &&
		pmh_directory_lost_to_restore(meta_lsn);
}

/*
 * Attach a file to shared memory (or find it attached) and map it.  Called
 * without an announcement of ours, so that waiting for readers is safe.
 * index is NULL during replay, which cannot read the metapage and takes
 * what it finds; during recovery, shards that fail validation are marked
 * broken instead of failing the whole file.
 */
static AttachResult
attach(Relation index, PmhIndex *ix)
{
	PmhashMetaData meta;
	PmhFileHeader hdr;
	PmhSlot    *slot;
	char		path[MAXPGPATH];
	char		msg[256];
	const char *err = NULL;
	bool		lenient = RecoveryInProgress();

	pmh_file_path(&ix->key, path);
	LWLockAcquire(pmh_slot_table_lock(), LW_EXCLUSIVE);
	slot = pmh_slot_find(&ix->key);
	if (slot != NULL)
	{
		if (ix->slot != slot || ix->slot_gen != slot->slot_gen || ix->base == NULL)
		{
			PG_TRY();
			{
				err = map_attached(ix, slot, path);
			}
			PG_CATCH();
			{
				if (index != NULL)
					PG_RE_THROW();
				FlushErrorState();
				err = "The file cannot be mapped.";
			}
			PG_END_TRY();
		}
		LWLockRelease(pmh_slot_table_lock());
		if (err == NULL)
			return ATTACHED;
		if (index == NULL)
			return UNUSABLE;
		pmh_raise_damaged(NameStr(ix->name), file_damage(path, err));
	}

	if (index != NULL)
	{
		XLogRecPtr	meta_lsn;

		pmh_read_meta(index, &meta, &meta_lsn);
		if (meta.flags & PMHASH_META_INIT_FORK)
		{
			/*
			 * An unlogged index reset by crash recovery: start an empty file.
			 * This is not part of the transaction: an abort must not undo it.
			 */
			make_meta(&meta, new_generation(), meta.shard_bits, 0);
			create_file(&ix->key, RelationGetRelid(index), path, meta.shard_bits,
						meta.build_generation, 0, true, false, InvalidFullTransactionId);
			pmh_write_meta(index, MAIN_FORKNUM, &meta);
		}
		else if (lost_to_restore(ix, path, meta_lsn))
		{
			/* a placeholder that has the index rebuilt from its table */
			ereport(LOG,
					(errmsg("pmhash: the file of index \"%s\" is not part of the restored base backup; rebuilding the index from its table",
							RelationGetRelationName(index))));
			create_file(&ix->key, InvalidOid, path, meta.shard_bits, meta.build_generation,
						PMH_STATE_NEEDS_REBUILD, true, false, InvalidFullTransactionId);
		}
	}
	else
	{
		struct stat st;

		if (stat(path, &st) != 0)
		{
			LWLockRelease(pmh_slot_table_lock());
			return UNUSABLE;
		}
	}
	PG_TRY();
	{
		map_file(ix, path);
	}
	PG_CATCH();
	{
		if (index != NULL)
			PG_RE_THROW();
		FlushErrorState();
	}
	PG_END_TRY();
	if (ix->base == NULL)
	{
		LWLockRelease(pmh_slot_table_lock());
		return UNUSABLE;
	}
	err = check_header(ix, index ? meta.build_generation : 0, &hdr);
	if (err == NULL && (hdr.state & PMH_STATE_NEEDS_REBUILD))
	{
		unmap_local(ix);
		LWLockRelease(pmh_slot_table_lock());
		return index ? NEEDS_REBUILD : UNUSABLE;
	}
	if (err)
	{
		unmap_local(ix);
		LWLockRelease(pmh_slot_table_lock());
		if (index == NULL)
			return UNUSABLE;
		pmh_raise_damaged(NameStr(ix->name), file_damage(path, err));
	}

	slot = pmh_slot_assign(&ix->key, hdr.shard_bits);
	slot->build_generation = hdr.build_generation;
	slot->checksums = (hdr.flags & PMH_FILE_CHECKSUMS) != 0;
	slot->durable = ix->key.backend == InvalidBackendId;
	strlcpy(slot->path, path, MAXPGPATH);
	pg_atomic_write_u64(&slot->file_units, ix->mapped_len / PMH_UNIT_SIZE);
	ix->slot = slot;
	setup_table(ix);
	err = pmh_table_attach(&ix->table, ix->mapped_len / PMH_UNIT_SIZE, &slot->freemap,
						   lenient, attach_visit, slot, msg, sizeof(msg));
	if (err)
	{
		pmh_slot_release(slot);
		unmap_local(ix);
		LWLockRelease(pmh_slot_table_lock());
		if (index == NULL)
			return UNUSABLE;
		pmh_raise_damaged(NameStr(ix->name), err);
	}
	slot->state = PMH_SLOT_READY;
	ix->slot_gen = slot->slot_gen;
	LWLockRelease(pmh_slot_table_lock());
	return ATTACHED;
}

/*
 * Raise an error if the file mapped for an attached index no longer carries
 * its build generation: the file was overwritten in place (say, by a copy of
 * another index's file), and the segments the directory mirror describes
 * are not there any more.  The caller is announced; a truncated file makes
 * this read fault, which becomes an ERROR too.
 */
static void
check_mapped_generation(PmhIndex *ix)
{
	const volatile PmhFileHeader *hdr = (const volatile PmhFileHeader *) ix->base;

	if (likely(hdr->build_generation == ix->table.file_generation))
		return;
	pmh_leave();
	pmh_raise_damaged(NameStr(ix->name),
					  psprintf("File \"%s\": The file was overwritten while the index was in use.",
							   ix->slot->path));
}

/* Whether a local entry is attached to a live slot (announced caller). */
static bool
still_attached(PmhIndex *ix)
{
	return ix->slot != NULL && ix->base != NULL &&
		ix->slot->slot_gen == ix->slot_gen && ix->slot->state == PMH_SLOT_READY;
}

/*
 * Open an index's file for one operation: returns its local state with this
 * backend announced as a reader, or NULL if recovery left the file to be
 * rebuilt from its table (pmh_open does that).  The caller must pmh_leave()
 * when done.
 */
PmhIndex *
pmh_open_file(Relation index)
{
	PmhIndex  **cached = (PmhIndex **) index->rd_amcache;
	PmhIndex   *ix = cached ? *cached : NULL;

	pmhash_check_preloaded();
	prune_locals();
	if (ix == NULL || !RelFileNodeEquals(ix->node, index->rd_node) ||
		ix->key.backend != index->rd_backend)
	{
		/*
		 * Local entries are never freed, so the relcache entry may keep a
		 * pointer to one (in a chunk of its own, which it frees).
		 */
		PmhFileKey	key;

		pmh_file_key(index, &key);
		ix = local_entry(&key);
		if (cached == NULL)
			cached = MemoryContextAlloc(index->rd_indexcxt, sizeof(PmhIndex *));
		*cached = ix;
		index->rd_amcache = cached;
	}
	ix->logged = RelationNeedsWAL(index);
	ix->node = index->rd_node;
	namestrcpy(&ix->name, RelationGetRelationName(index));
	pmh_fault_set_index(NameStr(ix->name));
	for (;;)
	{
		pmh_enter();
		if (still_attached(ix))
		{
			check_mapped_generation(ix);
			return ix;
		}
		pmh_leave();
		if (attach(index, ix) == NEEDS_REBUILD)
			return NULL;
	}
}

/*
 * Open a permanent index file for WAL replay, by its identity alone.  NULL
 * if the file is missing or cannot be used.  The caller must pmh_leave().
 */
PmhIndex *
pmh_open_for_redo(const RelFileNode *node)
{
	PmhFileKey	key;
	PmhIndex   *ix;

	permanent_key(node, &key);
	prune_locals();
	ix = local_entry(&key);
	ix->logged = false;
	ix->node = *node;
	snprintf(NameStr(ix->name), NAMEDATALEN, "with relfilenode %u", node->relNode);
	for (;;)
	{
		pmh_enter();
		if (still_attached(ix))
			return ix;
		pmh_leave();
		if (attach(NULL, ix) != ATTACHED)
			return NULL;
	}
}

/*
 * Create the file of a new index build (replacing any previous file of the
 * same relfilenode), log it, and write its metapage; returns it opened as by
 * pmh_open.  A transactional build is undone by an abort.
 */
PmhIndex *
pmh_create(Relation index, uint32 shard_bits, bool deferred, bool transactional)
{
	PmhFileKey	key;
	PmhashMetaData meta;
	char		path[MAXPGPATH];
	PmhIndex   *ix;

	pmhash_check_preloaded();
	pmh_file_key(index, &key);
	pmh_file_path(&key, path);
	pmh_forget_file(&key);
	pmh_drop_local(&key);

	make_meta(&meta, new_generation(), shard_bits, 0);
	create_file(&key, RelationGetRelid(index), path, shard_bits, meta.build_generation, 0,
				key.backend == InvalidBackendId, transactional, InvalidFullTransactionId);
	if (RelationNeedsWAL(index))
		pmh_log_create(&index->rd_node, meta.build_generation, shard_bits, transactional);
	pmh_write_meta(index, MAIN_FORKNUM, &meta);

	ix = local_entry(&key);
	ix->deferred = deferred;
	ix = pmh_open_file(index);
	if (ix == NULL)
		elog(ERROR, "new pmhash file \"%s\" is marked to be rebuilt", path);
	return ix;
}

/*
 * Replay of CREATE: an empty file, replacing any previous one; creator is
 * the transaction that created it, if the creation was transactional.
 */
void
pmh_create_for_redo(const RelFileNode *node, uint64 generation, uint32 shard_bits,
					FullTransactionId creator)
{
	PmhFileKey	key;
	char		path[MAXPGPATH];

	permanent_key(node, &key);
	pmh_file_path(&key, path);
	pmh_forget_file(&key);
	pmh_drop_local(&key);
	create_file(&key, InvalidOid, path, shard_bits, generation, 0, true, false, creator);
}

/*
 * Copy the file of an index that core moved to a new relfilenode (ALTER
 * INDEX SET TABLESPACE, CREATE DATABASE from a template), rewriting the
 * identity in its header.  False if the source cannot be read.
 */
bool
pmh_copy_file(const RelFileNode *from, const RelFileNode *to)
{
	PmhFileKey	src_key;
	PmhFileKey	dst_key;
	char		src[MAXPGPATH];
	char		dst[MAXPGPATH];
	size_t		src_len;
	size_t		dst_len;
	int			src_pmem;
	int			dst_pmem;
	char	   *src_base;
	char	   *dst_base;
	PmhFileHeader *hdr;

	permanent_key(from, &src_key);
	permanent_key(to, &dst_key);
	pmh_file_path(&src_key, src);
	pmh_file_path(&dst_key, dst);
	src_base = pmem_map_file(src, 0, 0, 0, &src_len, &src_pmem);
	if (src_base == NULL)
		return false;
	pmh_forget_file(&dst_key);
	pmh_drop_local(&dst_key);
	pmh_directory_ensure();
	LWLockAcquire(pmh_file_lock(), LW_EXCLUSIVE);
	(void) unlink(dst);
	dst_base = pmem_map_file(dst, src_len, PMEM_FILE_CREATE | PMEM_FILE_EXCL, 0600,
							 &dst_len, &dst_pmem);
	LWLockRelease(pmh_file_lock());
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
	hdr->spc_oid = to->spcNode;	/* informational: names ignore it */
	hdr->db_oid = to->dbNode;
	hdr->rel_node = to->relNode;
	hdr->checksum = pmh_header_checksum(hdr);
	persist_range(dst_base, dst_len, dst_pmem, dst);
	pmem_unmap(dst_base, dst_len);
	pmem_unmap(src_base, src_len);
	fsync_fname(pmhash_directory, true);
	return true;
}

/*
 * Leave an empty file marked to be rebuilt for an index whose file is
 * missing after recovery, with the build generation of its metapage.
 */
void
pmh_create_placeholder(const RelFileNode *node)
{
	PmhFileKey	key;
	char		path[MAXPGPATH];
	SMgrRelation smgr = smgropen(*node, InvalidBackendId);
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
	permanent_key(node, &key);
	pmh_file_path(&key, path);
	create_file(&key, InvalidOid, path, meta.shard_bits, meta.build_generation,
				PMH_STATE_NEEDS_REBUILD, true, false, InvalidFullTransactionId);
}

/* Metapage of the init fork of an unlogged index. */
void
pmh_write_init_meta(Relation index, uint32 shard_bits)
{
	PmhashMetaData meta;

	make_meta(&meta, 0, shard_bits, PMHASH_META_INIT_FORK);
	pmh_write_meta(index, INIT_FORKNUM, &meta);
}

/* Read a file's header; false if it cannot be read or is not sound. */
bool
pmh_read_file_header(const char *path, PmhFileHeader *hdr)
{
	int			fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	bool		ok;

	if (fd < 0)
		return false;
	ok = read(fd, hdr, sizeof(*hdr)) == sizeof(*hdr) &&
		pmh_header_check(hdr, PMH_HEADER_UNITS + pmh_directory_units(hdr->shard_bits)) == NULL;
	CloseTransientFile(fd);
	return ok;
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
	char	   *base = pmem_map_file(path, 0, 0, 0, &len, &is_pmem);
	PmhFileHeader *hdr;

	if (base == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not map pmhash file \"%s\": %m", path)));
	hdr = (PmhFileHeader *) base;
	if (set_bits != 0)
		hdr->state |= set_bits;
	if (settle_creator)
		hdr->creator_xid = 0;
	persist_range(base, sizeof(PmhFileHeader), is_pmem, path);
	pmem_unmap(base, len);
}

/* Set state bits in a file's header, durably. */
void
pmh_set_file_state(const char *path, uint64 set_bits)
{
	update_file_header(path, set_bits, false);
}

/* Record durably that a file's creating transaction committed. */
void
pmh_settle_file_creator(const char *path)
{
	update_file_header(path, 0, true);
}

/* Remove a file, ignoring one that is already gone. */
void
pmh_unlink_file(const char *path)
{
	if (unlink(path) != 0 && errno != ENOENT)
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("could not remove pmhash file \"%s\": %m", path)));
}
