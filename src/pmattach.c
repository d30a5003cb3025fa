/*-------------------------------------------------------------------------
 *
 * pmattach.c
 *	  Attaching index files to shared memory and opening them for an
 *	  operation.
 *
 * The first backend that opens an index checks its file against the
 * metapage (header, identity, generation), checks every descriptor and
 * segment header, and fills a shared-memory slot with what it found; later
 * backends map the file and check its header against the slot.  Every
 * operation then takes the table's geometry from the slot and each
 * segment's from the mirror, never from the file again (src/README, Shared
 * and local state; Writers: Attach, eviction and release; Damaged files).
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmattach.c
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

/* How attach() found a file. */
typedef enum AttachResult
{
	ATTACHED,
	NEEDS_REBUILD,				/* recovery left it to be rebuilt from the heap */
	UNUSABLE					/* replay only: missing or damaged */
} AttachResult;

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
	ix->ops = (PmhTableOps) {ops_alloc_memory, ops_free_memory, pmh_space_alloc,
		pmh_space_free, ops_publish, ops_base, ops_mapped_units, ops_log_rebuild, ix};
	ix->persist = ix->deferred ? (PmhPersist) {NULL, NULL, NULL, ix} : pmh_normal_persist(ix);
	ix->table.ops = &ix->ops;
	ix->table.persist = &ix->persist;
	ix->table.shard_bits = ix->slot->shard_bits;
	ix->table.file_generation = ix->slot->build_generation;
	ix->table.dir_unit = PMH_HEADER_UNITS;
	ix->table.checksums = ix->slot->checksums;
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

	pmh_map_file(ix, path);
	ix->slot = slot;
	err = pmh_check_attached_header(ix);
	if (err != NULL)
	{
		pmh_unmap_local(ix);
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
			pmh_make_meta(&meta, pmh_new_generation(), meta.shard_bits, 0);
			pmh_create_file(&ix->key, path, meta.shard_bits,
						meta.build_generation, 0, true, false, InvalidFullTransactionId);
			pmh_write_meta(index, MAIN_FORKNUM, &meta);
		}
		else if (lost_to_restore(ix, path, meta_lsn))
		{
			/* a placeholder that has the index rebuilt from its table */
			ereport(LOG,
					(errmsg("pmhash: the file of index \"%s\" is not part of the restored base backup; rebuilding the index from its table",
							RelationGetRelationName(index))));
			pmh_create_file(&ix->key, path, meta.shard_bits, meta.build_generation,
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
		pmh_map_file(ix, path);
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
		pmh_unmap_local(ix);
		LWLockRelease(pmh_slot_table_lock());
		return index ? NEEDS_REBUILD : UNUSABLE;
	}
	if (err)
	{
		pmh_unmap_local(ix);
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
		pmh_unmap_local(ix);
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
	pmh_prune_locals();
	if (ix == NULL || !RelFileNodeEquals(ix->node, index->rd_node) ||
		ix->key.backend != index->rd_backend)
	{
		/*
		 * Local entries are never freed, so the relcache entry may keep a
		 * pointer to one (in a chunk of its own, which it frees).
		 */
		PmhFileKey	key;

		pmh_file_key(index, &key);
		ix = pmh_local_entry(&key);
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

	pmh_permanent_key(node, &key);
	pmh_prune_locals();
	ix = pmh_local_entry(&key);
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

	pmh_make_meta(&meta, pmh_new_generation(), shard_bits, 0);
	pmh_create_file(&key, path, shard_bits, meta.build_generation, 0,
				key.backend == InvalidBackendId, transactional, InvalidFullTransactionId);
	if (transactional)
		pmh_remember_created(&key, RelationGetRelid(index), path);
	if (RelationNeedsWAL(index))
		pmh_log_create(&index->rd_node, meta.build_generation, shard_bits, transactional);
	pmh_write_meta(index, MAIN_FORKNUM, &meta);

	ix = pmh_local_entry(&key);
	ix->deferred = deferred;
	ix = pmh_open_file(index);
	if (ix == NULL)
		elog(ERROR, "new pmhash file \"%s\" is marked to be rebuilt", path);
	return ix;
}
