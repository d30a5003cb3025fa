/*-------------------------------------------------------------------------
 *
 * pmmap.c
 *	  A backend's mappings of index files, and making their changes durable.
 *
 * Each backend keeps one local entry per index file it has used (never
 * freed, so that relcache entries may point to it): its mapping of the
 * whole file, its table view, the ranges it dirtied and the INSERT records
 * it has not written yet.  Mappings follow the file when it grows and are
 * dropped when its share is released.  Persistence: per-entry changes are
 * recorded as dirty ranges, cache lines on DAX and pages on an ordinary
 * file, and made durable at pre-commit; structural changes at once; during
 * replay, REDO_DIRTY in the header marks a file with replayed changes not
 * yet synced (src/README, Persistence paths and Recovery).
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmmap.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <libpmem.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/xlog.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/pmsignal.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "pmhash.h"

static HTAB *local_indexes = NULL;
static uint64 forget_seen = 0;
static bool any_dirty = false;
static XLogRecPtr left_upto = InvalidXLogRecPtr;	/* pmhash_sync_for_commit */
static bool exit_callback_registered = false;
static uint64 page_size = 0;	/* the OS's, read at the first mapping */

/* The backend-local entry of a file, created empty if new. */
PmhashLocal *
pmhash_local_entry(const PmhashFileKey *key)
{
	PmhashLocal   *ix;
	bool		found;

	if (local_indexes == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(PmhashFileKey);
		ctl.entrysize = sizeof(PmhashLocal);
		ctl.hcxt = TopMemoryContext;
		local_indexes = hash_create("pmhash local indexes", 64, &ctl,
									HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	ix = hash_search(local_indexes, key, HASH_ENTER, &found);
	if (!found)
	{
		memset((char *) ix + sizeof(PmhashFileKey), 0, sizeof(PmhashLocal) - sizeof(PmhashFileKey));
		ix->key = *key;
	}
	return ix;
}

/* Unmap a local entry's file. */
void
pmhash_unmap_local(PmhashLocal *ix)
{
	if (ix->base)
	{
		pmhash_fault_unregister(ix->base);
		pmem_unmap(ix->base, ix->mapped_len);
	}
	ix->base = NULL;
	ix->mapped_len = 0;
	ix->share = NULL;
	ix->ndirty = 0;
}

/*
 * Forget this backend's mapping of a file and what it had pending for it.
 * The entry itself stays, so that pointers to it (rd_amcache) stay valid.
 */
void
pmhash_drop_local(const PmhashFileKey *key)
{
	PmhashLocal   *ix;

	if (local_indexes == NULL)
		return;
	ix = hash_search(local_indexes, key, HASH_FIND, NULL);
	if (ix == NULL)
		return;
	pmhash_unmap_local(ix);
	ix->npending = 0;
	ix->deferred = false;
}

/* Write header state bits and redo position of a mapped file durably. */
static void
update_header(PmhashLocal *ix, uint64 set_bits, uint64 clear_bits, XLogRecPtr redo_lsn)
{
	PmhFileHeader *hdr = (PmhFileHeader *) ix->base;

	hdr->state = (hdr->state | set_bits) & ~clear_bits;
	if (redo_lsn != InvalidXLogRecPtr)
		hdr->redo_lsn = redo_lsn;
	pmhash_persist_range(ix->base, sizeof(PmhFileHeader), ix->is_pmem, ix->share->path);
}

/*
 * Unmap files whose shares were released (dropped or evicted indexes),
 * making their recorded changes durable first; a file that replay changed
 * then holds no unsynced replayed change, and its header says so, since no
 * later sync of replay reaches an unmapped file.
 */
void
pmhash_prune_locals(void)
{
	HASH_SEQ_STATUS status;
	PmhashLocal   *ix;
	uint64		counter = pmhash_forget_counter();

	if (counter == forget_seen || local_indexes == NULL)
		return;
	forget_seen = counter;
	hash_seq_init(&status, local_indexes);
	while ((ix = hash_seq_search(&status)) != NULL)
	{
		if (ix->share == NULL || ix->share->share_gen != ix->share_gen ||
			ix->share->state != PMHASH_SHARE_READY)
		{
			if (ix->ndirty > 0 && ix->base != NULL)
				pmhash_sync_dirty(ix);
			if (ix->redo_dirty && ix->base != NULL)
				update_header(ix, 0, PMH_STATE_REDO_DIRTY, InvalidXLogRecPtr);
			ix->redo_dirty = false;
			pmhash_unmap_local(ix);
		}
	}
}

/* Map (or remap) a file into this backend; errors name the index of ix. */
void
pmhash_map_file(PmhashLocal *ix, const char *path)
{
	struct stat st;
	size_t		len;
	int			is_pmem;
	char	   *base;

	if (!pmhash_is_plain_file(path) && errno != ENOENT)
		pmhash_raise_damaged(NameStr(ix->name),
							 psprintf("File \"%s\" is not a regular file: pmhash does not follow symbolic links.",
									  path));
	/* libpmem refuses an empty file with an obscure error; a short one is damaged */
	if (stat(path, &st) == 0 && st.st_size < PMH_HEADER_UNITS * PMH_UNIT_SIZE)
		pmhash_raise_damaged(NameStr(ix->name),
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
		pmhash_fault_unregister(ix->base);
		pmem_unmap(ix->base, ix->mapped_len);
	}
	ix->base = base;
	ix->mapped_len = len;
	ix->is_pmem = is_pmem;
	if (page_size == 0)
		page_size = (uint64) sysconf(_SC_PAGESIZE);
	pmhash_fault_register(base, len);
}

/* Make sure the mapping covers the file up to end_unit, remapping if it grew. */
void
pmhash_ensure_mapped(PmhashLocal *ix, uint64 end_unit)
{
	if (end_unit * PMH_UNIT_SIZE <= ix->mapped_len)
		return;
	pmhash_map_file(ix, ix->share->path);
	if (end_unit * PMH_UNIT_SIZE > ix->mapped_len)
		pmhash_raise_damaged(NameStr(ix->name),
						  psprintf("File \"%s\" is shorter than the index's segments: it was truncated.",
								   ix->share->path));
}

/* Call fn for every index file this backend knows. */
void
pmhash_foreach_local(void (*fn) (PmhashLocal *ix))
{
	HASH_SEQ_STATUS status;
	PmhashLocal   *ix;

	if (local_indexes == NULL)
		return;
	hash_seq_init(&status, local_indexes);
	while ((ix = hash_seq_search(&status)) != NULL)
		fn(ix);
}

/* Flush callback on DAX. */
void
pmhash_pmem_flush(void *arg pg_attribute_unused(), const void *addr, size_t len)
{
	pmem_flush(addr, len);
}

/* Drain callback on DAX. */
void
pmhash_pmem_drain(void *arg pg_attribute_unused())
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
	PmhashLocal   *ix = arg;
	uint64		granule = ix->is_pmem ? 64 : page_size;
	uint64		start = (uint64) ((const char *) addr - ix->base) / granule * granule;
	uint64		end = ((uint64) ((const char *) addr - ix->base) + len + granule - 1) / granule * granule;

	if (!ix->is_pmem)
	{
		/* the syncer must see the change; its records follow dirty_since */
		if (ix->ndirty == 0)
			ix->dirty_since = GetXLogInsertRecPtr();
		pmhash_share_mark_unsynced(ix->share);
	}
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
			pmhash_sync_dirty(ix);
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

/* msync a range of a file mapped at base, or fail. */
static void
msync_range(char *base, uint64 offset, uint64 len, const char *path)
{
	if (pmem_msync(base + offset, len) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not sync pmhash file \"%s\": %m", path)));
	pmhash_shadow_synced(path, base, offset, len);
}

/* Structural persistence steps this backend takes before it pauses; 0: none. */
static int	steps_to_pause = 0;
static int	pause_step;			/* the step asked for */
static const char *pause_setting;	/* the setting that asked for it */

/*
 * Pause after the given number of structural persistence steps from now,
 * 0 for never (pmhash.split_pause_step and pmhash.rebuild_pause_step, the
 * setting named, testing aids).
 */
void
pmhash_pause_after(int steps, const char *setting)
{
	steps_to_pause = steps;
	pause_step = steps;
	pause_setting = setting;
}

/*
 * Count a structural persistence step towards a pause, and at the step
 * asked for, log it and wait, locks held, for the test to kill the process
 * or stop the server (at most ten minutes; then carry on).
 */
void
pmhash_count_step(void)
{
	if (steps_to_pause == 0 || --steps_to_pause > 0)
		return;
	ereport(LOG,
			(errmsg("pmhash: process %d paused after persistence step %d (%s)",
					MyProcPid, pause_step, pause_setting)));
	for (int i = 0; i < 60000 && PostmasterIsAlive(); i++)
		pg_usleep(10000L);
}

/*
 * Persist callback of durable files, for structural changes (a rebuilt
 * segment, its descriptor, a split's steps): flush and fence the range now
 * on DAX, msync it now on an ordinary file, also when the syncer runs.
 * Each step must be durable before the next store that depends on it, since
 * nothing orders the write-back of mapped pages (src/README, Persistence
 * paths).
 */
static void
persist_structural(void *arg, const void *addr, size_t len)
{
	PmhashLocal   *ix = arg;

	if (ix->is_pmem)
		pmem_persist(addr, len);
	else
		msync_range(ix->base, (uint64) ((const char *) addr - ix->base), len, ix->share->path);
	pmhash_count_step();
}

/* Order callback of durable files on DAX: flush and fence lines a later store depends on. */
static void
persist_order(void *arg pg_attribute_unused(), const void *addr, size_t len)
{
	pmem_persist(addr, len);
}

/* Make the dirty ranges of one file durable: flush and fence, or msync. */
void
pmhash_sync_dirty(PmhashLocal *ix)
{
	for (int i = 0; i < ix->ndirty; i++)
	{
		uint64		start = ix->dirty[2 * i];
		uint64		end = Min(ix->dirty[2 * i + 1], ix->mapped_len);

		if (end <= start)
			continue;
		if (ix->is_pmem)
			pmem_flush(ix->base + start, end - start);
		else
			msync_range(ix->base, start, end - start, ix->share->path);
	}
	if (ix->is_pmem && ix->ndirty > 0)
		pmem_drain();
	ix->ndirty = 0;
}

/*
 * Backend exit: make durable the files whose changes commits of this
 * backend left to the syncer, unless it already did or will make a further
 * round (its defer floor is still set; it clears the floor before its last
 * round).  At a clean shutdown the syncer may stop first, and no recovery
 * would replay those changes.  A backend exits at the end of every
 * connection, and one fsync writes back every page of the file that any
 * backend dirtied: syncing at each exit would put a whole-file writeback
 * in front of other commits' WAL flushes at every disconnection.
 */
static void
sync_left_at_exit(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	HASH_SEQ_STATUS status;
	PmhashLocal   *ix;

	if (local_indexes == NULL || pmhash_durable_position() >= left_upto)
		return;
	/* this backend flagged its files before reading the floor */
	pg_memory_barrier();
	if (pmhash_defer_floor() != InvalidXLogRecPtr)
		return;
	hash_seq_init(&status, local_indexes);
	while ((ix = hash_seq_search(&status)) != NULL)
	{
		char		path[MAXPGPATH];

		if (!ix->left_to_syncer)
			continue;
		pmhash_file_path(&ix->key, path);
		pmhash_fsync_file(path);
		ix->left_to_syncer = false;
	}
}

/*
 * Make one file's dirty ranges durable now, or leave them to the syncer if
 * they are in an ordinary file and were all made after its defer floor
 * (floor, 0 while the syncer does not run); returns whether it left them.
 */
static bool
sync_or_leave(PmhashLocal *ix, XLogRecPtr floor)
{
	if (ix->ndirty == 0 || ix->base == NULL)
		return false;
	if (!ix->is_pmem && floor != InvalidXLogRecPtr && ix->dirty_since >= floor)
	{
		ix->ndirty = 0;
		ix->left_to_syncer = true;
		return true;
	}
	pmhash_sync_dirty(ix);
	return false;
}

/* Remember that changes whose records lie before now were left to the syncer. */
static void
note_left_to_syncer(void)
{
	left_upto = GetXLogInsertRecPtr();
	if (!exit_callback_registered)
		before_shmem_exit(sync_left_at_exit, 0);
	exit_callback_registered = true;
}

/*
 * Pre-commit: make this backend's changes durable before the commit record
 * (src/README, Durability hazards, 2).  The changes to an ordinary file
 * made after the syncer's defer floor are left to it instead: it syncs
 * them within pmhash.sync_interval, and crash recovery replays them from
 * the durable position until then.
 */
void
pmhash_sync_for_commit(void)
{
	HASH_SEQ_STATUS status;
	PmhashLocal   *ix;
	XLogRecPtr	floor;
	bool		left = false;

	if (!any_dirty || local_indexes == NULL)
		return;
	floor = pmhash_defer_floor();
	hash_seq_init(&status, local_indexes);
	while ((ix = hash_seq_search(&status)) != NULL)
		left |= sync_or_leave(ix, floor);
	any_dirty = false;
	if (left)
		note_left_to_syncer();
}

/*
 * Make one file's changes durable now, or leave them to the syncer, as a
 * commit would: for a change that others rely on before this transaction
 * ends (a removal of dead entries, after which VACUUM may free their rows'
 * line pointers).
 */
void
pmhash_sync_or_leave(PmhashLocal *ix)
{
	if (sync_or_leave(ix, pmhash_defer_floor()))
		note_left_to_syncer();
}

/* Make durable every file this backend dirtied (replay). */
void
pmhash_sync_all_dirty(void)
{
	HASH_SEQ_STATUS status;
	PmhashLocal   *ix;

	if (!any_dirty || local_indexes == NULL)
		return;
	hash_seq_init(&status, local_indexes);
	while ((ix = hash_seq_search(&status)) != NULL)
	{
		if (ix->ndirty > 0 && ix->base != NULL)
			pmhash_sync_dirty(ix);
	}
	any_dirty = false;
}

/*
 * The persistence callbacks a file gets when not in a bulk build.  Changes
 * of single entries only have to be durable before the commit record (see
 * src/README, Persistence paths), so their flushes are recorded and done, with one fence or one
 * msync per range, at commit; structural changes sync at once.  On DAX a
 * unit's cache lines can reach the medium apart, so the lines that a later
 * store to the same unit depends on are flushed and fenced before it
 * (durability hazards 2 and 6); an ordinary file writes a unit within one
 * sector and needs no order.
 */
PmhPersist
pmhash_normal_persist(PmhashLocal *ix)
{
	if (!ix->durable)
		return (PmhPersist) {NULL, NULL, NULL, NULL, ix};
	return (PmhPersist) {record_dirty, NULL, persist_structural, ix->is_pmem ? persist_order : NULL, ix};
}

/* Make the first len bytes of a file mapped at base durable (DAX or ordinary file). */
void
pmhash_persist_range(char *base, size_t len, int is_pmem, const char *path)
{
	if (is_pmem)
		pmem_persist(base, len);
	else
		msync_range(base, 0, len, path);
}

/*
 * Replay is about to change a file: if this is its first change since the
 * last sync, record durably that the file holds replayed changes not yet
 * durable, and in which boot of the operating system.  An OS crash of a
 * standby then cannot silently lose them, and a crash of PostgreSQL alone,
 * which loses none, does not count as one (see pmhash_recovery_flag_files).
 */
void
pmhash_redo_will_change(PmhashLocal *ix)
{
	if (!ix->durable || ix->redo_dirty)
		return;
	(void) pmhash_boot_id(((PmhFileHeader *) ix->base)->redo_boot);
	update_header(ix, PMH_STATE_REDO_DIRTY, 0, InvalidXLogRecPtr);
	ix->redo_dirty = true;
}

/* Clear durably the mark of a file whose rebuild from the table is unfinished. */
void
pmhash_mark_built(PmhashLocal *ix)
{
	update_header(ix, 0, PMH_STATE_BUILDING, InvalidXLogRecPtr);
	ix->building = false;
}

/* Replay synced everything up to lsn: files hold no unsynced replayed change. */
void
pmhash_redo_synced(XLogRecPtr lsn)
{
	HASH_SEQ_STATUS status;
	PmhashLocal   *ix;

	pmhash_sync_all_dirty();
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
