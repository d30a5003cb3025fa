/*-------------------------------------------------------------------------
 *
 * pmattach.c
 *	  Attaching index files to shared memory and opening them for an
 *	  operation.
 *
 * The first backend that opens an index checks its file against the
 * metapage (header, identity, generation), checks every descriptor and
 * segment header, and fills the index's share (its state in shared memory)
 * with what it found; later backends map the file and check its header
 * against the share.  Every operation then takes the table's geometry from
 * the share and each segment's from the mirror, never from the file again
 * (src/README, Shared and local state; Writers; Damaged files).
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
#include "pmxlog.h"

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
ops_publish(void *arg, uint32 shard, const PmhPublication *pub)
{
	PmhashShardState *state = pmhash_shard_state(((PmhashLocal *) arg)->share, shard);

	pmh_mirror_publish(&state->mirror, pub);
	state->broken = false;
}

/* Table callback: current mapping. */
static char *
ops_base(void *arg)
{
	return ((PmhashLocal *) arg)->base;
}

/* Table callback: units of the current mapping. */
static uint64
ops_mapped_units(void *arg)
{
	return ((PmhashLocal *) arg)->mapped_len / PMH_UNIT_SIZE;
}

/* Table callback: show readers a new shard map. */
static void
ops_publish_map(void *arg, uint64 map)
{
	pg_atomic_write_u64(&((PmhashLocal *) arg)->share->shard_map, map);
}

/* Table callback: lock the descriptor array, shared or exclusively. */
static void
ops_lock_descriptors(void *arg, int exclusive)
{
	LWLockAcquire(pmhash_descriptor_lock(((PmhashLocal *) arg)->share),
				  exclusive ? LW_EXCLUSIVE : LW_SHARED);
}

/* Table callback: release the descriptor array's lock. */
static void
ops_unlock_descriptors(void *arg)
{
	LWLockRelease(pmhash_descriptor_lock(((PmhashLocal *) arg)->share));
}

/*
 * Log the shard map once per attachment of the share, before the first
 * record that names a slot, when the index is logged (src/README, The
 * shard map in the WAL).
 */
void
pmhash_log_map_once(PmhashLocal *ix)
{
	if (ix->logged && !ix->share->map_logged)
	{
		pmhash_log_map(&ix->node, pg_atomic_read_u64(&ix->share->shard_map));
		ix->share->map_logged = true;
	}
}

/* Table callback: log a split shard's entries, when the index is logged. */
static void
ops_log_split(void *arg, uint32 slot, uint64 map, const PmhEntry *entries, uint64 count)
{
	PmhashLocal   *ix = arg;

	if (ix->logged)
		pmhash_log_split(&ix->node, slot, map, entries, count);
}

/* Table callback: log the content of a rebuilt shard, when the index is logged. */
static void
ops_log_rebuild(void *arg, uint32 shard, const PmhEntry *entries, uint64 count, double fill)
{
	PmhashLocal   *ix = arg;

	if (ix->logged)
	{
		pmhash_log_map_once(ix);
		pmhash_log_rebuild(&ix->node, shard, fill, entries, count);
	}
}

/*
 * Set up the core table view and persistence of a mapped, attached file,
 * with the geometry its share holds (checked when the file was attached),
 * not what the file's header says now.
 */
static void
setup_table(PmhashLocal *ix)
{
	ix->durable = ix->share->durable;
	ix->ops = (PmhTableOps) {ops_alloc_memory, ops_free_memory, pmhash_space_alloc,
		pmhash_space_free, ops_publish, ops_publish_map, ops_lock_descriptors,
		ops_unlock_descriptors, ops_base, ops_mapped_units, ops_log_rebuild, ops_log_split, ix};
	ix->persist = ix->deferred ? (PmhPersist) {NULL, NULL, NULL, NULL, ix} : pmhash_normal_persist(ix);
	ix->table.ops = &ix->ops;
	ix->table.persist = &ix->persist;
	ix->table.shard_bits = ix->share->shard_bits;
	ix->table.file_generation = ix->share->build_generation;
	ix->table.checksums = ix->share->checksums;
}

/*
 * Finish the last split of a file's map if a crash cut it short after the
 * map moved: its low slot still publishes the old segment, one bit
 * shallower than the map says (pmh_table_finish_split).  NULL, or why not.
 */
static const char *
finish_split(PmhashLocal *ix, uint64 map)
{
	uint32		last = pmh_map_last_split(map, ix->table.shard_bits);
	PmhashShardState *state;
	PmhPublication pub;
	PmhSegment	seg;

	if (last == UINT32_MAX)
		return NULL;
	state = pmhash_shard_state(ix->share, last);
	if (!pmh_mirror_read(&state->mirror, &pub) || pub.depth == pmh_map_depth(map, last) ||
		state->broken)
		return NULL;
	pmh_table_segment(&ix->table, last, &pub, &seg);
	if (pmh_table_finish_split(&ix->table, &seg, 0, &state->counts) != PMH_OK)
		return psprintf("shard %u: the split a crash cut short cannot be finished", last);
	return NULL;
}

/* Attach callback: fill a shard's mirror and counters. */
static void
attach_visit(void *arg, uint32 shard, const PmhPublication *pub, const PmhCounts *counts,
			 int broken)
{
	PmhashShardState *state = pmhash_shard_state((PmhashShare *) arg, shard);

	pmh_mirror_publish(&state->mirror, pub);
	state->counts = *counts;
	state->broken = broken != 0;
}

/*
 * Check a freshly mapped file against what it should be; NULL if sound.
 * The header is copied to *hdr first, so that what was checked is what the
 * caller uses.  generation 0 skips the build check (replay has no metapage
 * at hand).
 */
static const char *
check_header(PmhashLocal *ix, uint64 generation, PmhFileHeader *hdr)
{
	const char *err;

	if (ix->mapped_len < sizeof(PmhFileHeader))
		return "The file is shorter than a file header.";
	memcpy(hdr, ix->base, sizeof(PmhFileHeader));
	err = pmh_header_check(hdr, ix->mapped_len / PMH_UNIT_SIZE);
	if (err == NULL &&
		(hdr->db_oid != ix->key.node.dbOid || hdr->rel_node != ix->key.node.relNumber))
		err = "The file belongs to another relation; it was copied or moved.";
	if (err == NULL && generation != 0 && hdr->build_generation != generation)
		err = "The file does not belong to this build of the index.";
	return err;
}

/*
 * Check the header of a mapped file against the share it is attached to: it
 * may have been damaged, or the file replaced, since the share was filled.
 * NULL if it agrees.
 */
const char *
pmhash_check_attached_header(PmhashLocal *ix)
{
	PmhFileHeader hdr;
	const char *err = check_header(ix, ix->share->build_generation, &hdr);

	if (err == NULL && hdr.shard_bits != ix->share->shard_bits)
		err = "The file header does not match the index's attached geometry.";
	return err;
}

/*
 * Map a file whose share another backend attached, if it is the file the
 * share describes.  NULL if so, else why not (and nothing is mapped).
 */
static const char *
map_attached(PmhashLocal *ix, PmhashShare *share, const char *path)
{
	const char *err;

	pmhash_map_file(ix, path);
	ix->share = share;
	err = pmhash_check_attached_header(ix);
	if (err != NULL)
	{
		pmhash_unmap_local(ix);
		return err;
	}
	ix->share_gen = share->share_gen;
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
lost_to_restore(PmhashLocal *ix, const char *path, XLogRecPtr meta_lsn)
{
	struct stat st;

	return ix->key.backend == INVALID_PROC_NUMBER && !RecoveryInProgress() &&
		stat(path, &st) != 0 && errno == ENOENT &&
		pmhash_directory_lost_to_restore(meta_lsn);
}

/*
 * The header states in which a file cannot serve an operation on index:
 * one to be rebuilt from the table, and one whose rebuild has not finished,
 * except to the backend rebuilding it and to replay (index NULL), which
 * continues a rebuild from its WAL.
 */
static uint64
unusable_states(PmhashLocal *ix, Relation index)
{
	if (index == NULL || ix->building)
		return PMH_STATE_NEEDS_REBUILD;
	return PMH_STATE_NEEDS_REBUILD | PMH_STATE_BUILDING;
}

/*
 * Attach a file to shared memory (or find it attached) and map it.  Called
 * without an announcement of ours, so that waiting for readers is safe.
 * index is NULL during replay, which cannot read the metapage and takes
 * what it finds; during recovery, shards that fail validation are marked
 * broken instead of failing the whole file.
 */
static AttachResult
attach(Relation index, PmhashLocal *ix)
{
	PmhashMetaData meta;
	PmhFileHeader hdr;
	PmhashShare    *share;
	char		path[MAXPGPATH];
	char		msg[256];
	const char *err = NULL;
	bool		lenient = RecoveryInProgress();

	pmhash_file_path(&ix->key, path);
	LWLockAcquire(pmhash_share_table_lock(), LW_EXCLUSIVE);
	share = pmhash_share_find(&ix->key);
	if (share != NULL)
	{
		if (ix->share != share || ix->share_gen != share->share_gen || ix->base == NULL)
		{
			PG_TRY();
			{
				err = map_attached(ix, share, path);
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
		LWLockRelease(pmhash_share_table_lock());
		if (err == NULL)
			return ATTACHED;
		if (index == NULL)
			return UNUSABLE;
		pmhash_raise_damaged(NameStr(ix->name), file_damage(path, err));
	}

	if (index != NULL)
	{
		XLogRecPtr	meta_lsn;

		pmhash_read_meta(index, &meta, &meta_lsn);
		if (meta.flags & PMHASH_META_INIT_FORK)
		{
			/*
			 * An unlogged index reset by crash recovery: start an empty file.
			 * This is not part of the transaction: an abort must not undo it.
			 */
			pmhash_make_meta(&meta, pmhash_new_generation(), meta.shard_bits, 0);
			pmhash_create_file(&ix->key, path, meta.shard_bits,
						meta.build_generation, 0, true, false, InvalidFullTransactionId);
			pmhash_write_meta(index, MAIN_FORKNUM, &meta);
		}
		else if (lost_to_restore(ix, path, meta_lsn))
		{
			/* a placeholder that has the index rebuilt from its table */
			ereport(LOG,
					(errmsg("pmhash: the file of index \"%s\" is not part of the restored base backup; rebuilding the index from its table",
							RelationGetRelationName(index))));
			pmhash_create_file(&ix->key, path, meta.shard_bits, meta.build_generation,
						PMH_STATE_NEEDS_REBUILD, true, false, InvalidFullTransactionId);
		}
	}
	else
	{
		struct stat st;

		if (stat(path, &st) != 0)
		{
			LWLockRelease(pmhash_share_table_lock());
			return UNUSABLE;
		}
	}
	PG_TRY();
	{
		pmhash_map_file(ix, path);
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
		LWLockRelease(pmhash_share_table_lock());
		return UNUSABLE;
	}
	err = check_header(ix, index ? meta.build_generation : 0, &hdr);
	/* a file of the previous format is rebuilt from the table (pmbuild.c) */
	if ((err == NULL && (hdr.state & unusable_states(ix, index))) || err == pmh_older_format)
	{
		pmhash_unmap_local(ix);
		LWLockRelease(pmhash_share_table_lock());
		return index ? NEEDS_REBUILD : UNUSABLE;
	}
	if (err)
	{
		pmhash_unmap_local(ix);
		LWLockRelease(pmhash_share_table_lock());
		if (index == NULL)
			return UNUSABLE;
		pmhash_raise_damaged(NameStr(ix->name), file_damage(path, err));
	}

	share = pmhash_share_assign(&ix->key, hdr.shard_bits, pmh_map_slots(hdr.shard_map));
	share->build_generation = hdr.build_generation;
	pg_atomic_write_u64(&share->shard_map, hdr.shard_map);
	share->checksums = (hdr.flags & PMH_FILE_CHECKSUMS) != 0;
	share->durable = ix->key.backend == INVALID_PROC_NUMBER;
	strlcpy(share->path, path, MAXPGPATH);
	pg_atomic_write_u64(&share->file_units, ix->mapped_len / PMH_UNIT_SIZE);
	ix->share = share;
	setup_table(ix);
	err = pmh_table_attach(&ix->table, hdr.shard_map, ix->mapped_len / PMH_UNIT_SIZE,
						   &share->freemap, lenient, attach_visit, share, msg, sizeof(msg));
	if (err == NULL)
		err = finish_split(ix, hdr.shard_map);
	if (err)
	{
		pmhash_share_release(share);
		pmhash_unmap_local(ix);
		LWLockRelease(pmhash_share_table_lock());
		if (index == NULL)
			return UNUSABLE;
		pmhash_raise_damaged(NameStr(ix->name), err);
	}
	share->state = PMHASH_SHARE_READY;
	ix->share_gen = share->share_gen;
	LWLockRelease(pmhash_share_table_lock());
	return ATTACHED;
}

/*
 * Raise an error if the file mapped for an attached index no longer carries
 * its build generation: the file was overwritten in place (say, by a copy of
 * another index's file), and the segments the mirror describes
 * are not there any more.  The caller is announced; a truncated file makes
 * this read fault, which becomes an ERROR too.
 */
static void
check_mapped_generation(PmhashLocal *ix)
{
	const volatile PmhFileHeader *hdr = (const volatile PmhFileHeader *) ix->base;

	if (likely(hdr->build_generation == ix->table.file_generation))
		return;
	pmhash_leave();
	pmhash_raise_damaged(NameStr(ix->name),
					  psprintf("File \"%s\": The file was overwritten while the index was in use.",
							   ix->share->path));
}

/* Whether a local entry is attached to a live share (announced caller). */
static bool
still_attached(PmhashLocal *ix)
{
	return ix->share != NULL && ix->base != NULL &&
		ix->share->share_gen == ix->share_gen && ix->share->state == PMHASH_SHARE_READY;
}

/*
 * Open an index's file for one operation: returns its local state with this
 * backend announced as a reader, or NULL if recovery left the file to be
 * rebuilt from its table (pmhash_open does that).  The caller must pmhash_leave()
 * when done.
 */
PmhashLocal *
pmhash_open_file(Relation index)
{
	PmhashLocal  **cached = (PmhashLocal **) index->rd_amcache;
	PmhashLocal   *ix = cached ? *cached : NULL;

	pmhash_check_preloaded();
	pmhash_prune_locals();
	if (ix == NULL || !RelFileLocatorEquals(ix->node, index->rd_locator) ||
		ix->key.backend != index->rd_backend)
	{
		/*
		 * Local entries are never freed, so the relcache entry may keep a
		 * pointer to one (in a chunk of its own, which it frees).
		 */
		PmhashFileKey	key;

		pmhash_file_key(index, &key);
		ix = pmhash_local_entry(&key);
		if (cached == NULL)
			cached = MemoryContextAlloc(index->rd_indexcxt, sizeof(PmhashLocal *));
		*cached = ix;
		index->rd_amcache = cached;
	}
	ix->logged = RelationNeedsWAL(index);
	ix->node = index->rd_locator;
	namestrcpy(&ix->name, RelationGetRelationName(index));
	pmhash_fault_set_index(NameStr(ix->name));
	for (;;)
	{
		pmhash_enter();
		if (still_attached(ix))
		{
			check_mapped_generation(ix);
			if (likely(!(((const volatile PmhFileHeader *) ix->base)->state &
						 unusable_states(ix, index))))
				return ix;
			/* a rebuild from the table failed or did not finish */
			pmhash_leave();
			return NULL;
		}
		pmhash_leave();
		if (attach(index, ix) == NEEDS_REBUILD)
			return NULL;
	}
}

/*
 * Open a permanent index file for WAL replay, by its identity alone.  NULL
 * if the file is missing or cannot be used.  The caller must pmhash_leave().
 */
PmhashLocal *
pmhash_open_for_redo(const RelFileLocator *node)
{
	PmhashFileKey	key;
	PmhashLocal   *ix;

	pmhash_permanent_key(node, &key);
	pmhash_prune_locals();
	ix = pmhash_local_entry(&key);
	ix->logged = false;
	ix->node = *node;
	snprintf(NameStr(ix->name), NAMEDATALEN, "with relfilenode %u", node->relNumber);
	for (;;)
	{
		pmhash_enter();
		if (still_attached(ix))
			return ix;
		pmhash_leave();
		if (attach(NULL, ix) != ATTACHED)
			return NULL;
	}
}

/*
 * Create the file of a new index build (replacing any previous file of the
 * same relfilenode), log it, and write its metapage; returns it opened as by
 * pmhash_open.  A transactional build is undone by an abort; any other (the
 * rebuild from the table) is marked unfinished, in the file and in its WAL
 * record, until pmhash_finish_build, so that after a crash part way through
 * it is rebuilt again rather than used half built.
 */
PmhashLocal *
pmhash_create(Relation index, uint32 shard_bits, bool deferred, bool transactional)
{
	PmhashFileKey	key;
	PmhashMetaData meta;
	char		path[MAXPGPATH];
	PmhashLocal   *ix;

	pmhash_check_preloaded();
	pmhash_file_key(index, &key);
	pmhash_file_path(&key, path);
	pmhash_forget_file(&key);
	pmhash_drop_local(&key);

	pmhash_make_meta(&meta, pmhash_new_generation(), shard_bits, 0);
	pmhash_create_file(&key, path, shard_bits, meta.build_generation,
				transactional ? 0 : PMH_STATE_BUILDING,
				key.backend == INVALID_PROC_NUMBER, transactional, InvalidFullTransactionId);
	if (transactional)
		pmhash_remember_created(&key, RelationGetRelid(index), path);
	if (RelationNeedsWAL(index))
		pmhash_log_create(&index->rd_locator, meta.build_generation, shard_bits,
						  transactional ? XLOG_PMHASH_CREATE_TRANSACTIONAL : XLOG_PMHASH_CREATE_BUILDING);
	pmhash_write_meta(index, MAIN_FORKNUM, &meta);

	ix = pmhash_local_entry(&key);
	ix->deferred = deferred;
	ix->building = !transactional;
	ix = pmhash_open_file(index);
	if (ix == NULL)
		elog(ERROR, "new pmhash file \"%s\" is marked to be rebuilt", path);
	return ix;
}
