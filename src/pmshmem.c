/*-------------------------------------------------------------------------
 *
 * pmshmem.c
 *	  Shared memory of pmhash: index shares with their mirrors,
 *	  writer locks, and the epochs that tell when no reader can still be
 *	  inside a retired segment.
 *
 * Everything here can be rebuilt from the index files, so a crash that
 * resets shared memory loses nothing.  An index is attached to a share the
 * first time a backend opens it; its mirror and counters then
 * live in a pool sized by pmhash.max_shards.
 *
 * Readers take no lock.  Every backend that touches an index announces the
 * global epoch it saw in its own cell before reading the mirror
 * and clears the cell when done.  Whoever retires a segment, or a whole
 * share, advances the epoch and waits until no announced epoch is older.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmshmem.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>

#include "access/twophase.h"
#include "common/relpath.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"

#include "pmhash.h"

#define POOL_UNIT		64		/* bytes per unit of the shared pool */
#define SPARE_EXTENTS	64		/* free-map room beyond one extent per shard */

/*
 * the lock array: three global locks, one allocation lock per share,
 * stripes, one descriptor lock per share
 */
#define SHARE_TABLE_LOCK		0
#define FILE_LOCK			1
#define POOL_LOCK			2
#define FIRST_ALLOC_LOCK	3
/* a share's pool space: its chunks of shard states and its free map */
#define POOL_EXTENTS		(pmhash_max_indexes * (PMHASH_SHARD_CHUNKS + 1) + 1)

typedef struct PmhShared
{
	pg_atomic_uint64 epoch;		/* starts at 1; 0 in a cell means idle */
	pg_atomic_uint64 attach_clock;
	pg_atomic_uint64 forget_counter;
	XLogRecPtr	flagged_from;	/* the postmaster flagged files from there */
	pg_atomic_uint64 defer_floor;	/* pmsyncer.c; 0: every commit syncs */
	pg_atomic_uint64 durable_position;	/* last durable position written */
	int			nshares;
	int			nprocs;
	PmhFreeMap	pool_map;		/* free space of the pool, in POOL_UNITs */
} PmhShared;

static PmhShared *shared = NULL;
static PmhExtent *pool_extents;
/* one announcement cell per process, each on a cache line of its own */
typedef union AnnounceCell
{
	pg_atomic_uint64 epoch;
	char		pad[PG_CACHE_LINE_SIZE];
} AnnounceCell;

static AnnounceCell *announce;
static PmhashShare *shares;
static char *pool;
static LWLockPadded *locks;
static int	enter_depth = 0;

/*
 * Bytes of the shared pool: per shard its state and free-map room for two
 * extents (the map's copy when it grows, pmhash_share_reserve, needs the
 * old and the new array at once), per index the spare extents of both.
 */
static Size
pool_size(void)
{
	return mul_size(pmhash_max_shards, sizeof(PmhashShardState) + 2 * sizeof(PmhExtent)) +
		mul_size(pmhash_max_indexes, (2 * SPARE_EXTENTS + 2) * sizeof(PmhExtent) + 2 * POOL_UNIT);
}

/* Number of PGPROC entries, each with an announcement cell. */
static int
proc_count(void)
{
	return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts;
}

/* Total shared memory pmhash needs. */
static Size
shmem_size(void)
{
	Size		size = MAXALIGN(sizeof(PmhShared));

	size = add_size(size, MAXALIGN(mul_size(POOL_EXTENTS, sizeof(PmhExtent))));
	size = add_size(size, PG_CACHE_LINE_SIZE + mul_size(proc_count(), sizeof(AnnounceCell)));
	size = add_size(size, MAXALIGN(mul_size(pmhash_max_indexes, sizeof(PmhashShare))));
	size = add_size(size, POOL_UNIT);
	size = add_size(size, pool_size());
	return size;
}

/* Ask for shared memory and locks (from shmem_request_hook). */
void
pmhash_shmem_request(void)
{
	RequestAddinShmemSpace(shmem_size());
	RequestNamedLWLockTranche("pmhash",
							  FIRST_ALLOC_LOCK + 2 * pmhash_max_indexes + pmhash_shard_locks);
}

/* Carve up and, once, initialize shared memory (from shmem_startup_hook). */
void
pmhash_shmem_startup(void)
{
	bool		found;
	char	   *p;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct("pmhash", shmem_size(), &found);
	p = (char *) shared + MAXALIGN(sizeof(PmhShared));
	pool_extents = (PmhExtent *) p;
	p += MAXALIGN(mul_size(POOL_EXTENTS, sizeof(PmhExtent)));
	announce = (AnnounceCell *) TYPEALIGN(PG_CACHE_LINE_SIZE, p);
	p = (char *) announce + mul_size(proc_count(), sizeof(AnnounceCell));
	shares = (PmhashShare *) p;
	p += MAXALIGN(mul_size(pmhash_max_indexes, sizeof(PmhashShare)));
	pool = (char *) TYPEALIGN(POOL_UNIT, p);
	locks = GetNamedLWLockTranche("pmhash");

	if (!found)
	{
		pg_atomic_init_u64(&shared->epoch, 1);
		pg_atomic_init_u64(&shared->attach_clock, 1);
		pg_atomic_init_u64(&shared->forget_counter, 0);
		shared->flagged_from = InvalidXLogRecPtr;
		pg_atomic_init_u64(&shared->defer_floor, 0);
		pg_atomic_init_u64(&shared->durable_position, 0);
		shared->nshares = pmhash_max_indexes;
		shared->nprocs = proc_count();
		for (int i = 0; i < shared->nprocs; i++)
			pg_atomic_init_u64(&announce[i].epoch, 0);
		memset(shares, 0, mul_size(pmhash_max_indexes, sizeof(PmhashShare)));
		for (int i = 0; i < shared->nshares; i++)
		{
			pg_atomic_init_u64(&shares[i].file_units, 0);
			pg_atomic_init_u32(&shares[i].unsynced, 0);
			shares[i].alloc_lock = FIRST_ALLOC_LOCK + i;
		}
		/* unit 0 of the pool is never handed out: 0 means "none" */
		pmh_freemap_init(&shared->pool_map, pool_extents, POOL_EXTENTS);
		pmh_freemap_release(&shared->pool_map, 1, pool_size() / POOL_UNIT - 1);
	}
	LWLockRelease(AddinShmemInitLock);
}

/* Lock that serializes attaching, evicting and releasing shares. */
LWLock *
pmhash_share_table_lock(void)
{
	return &locks[SHARE_TABLE_LOCK].lock;
}

/* Lock that serializes creating index files with the orphan sweep. */
LWLock *
pmhash_file_lock(void)
{
	return &locks[FILE_LOCK].lock;
}

/*
 * Lock of the shared pool's free map: shares and the chunks of their shard
 * states come from it.  Nothing waits for readers while holding it, so a
 * backend may take it while announced.
 */
static LWLock *
pool_lock(void)
{
	return &locks[POOL_LOCK].lock;
}

/* Take units of the shared pool; 0 if it has no room. */
static uint64
pool_alloc(uint64 units)
{
	uint64		unit;

	LWLockAcquire(pool_lock(), LW_EXCLUSIVE);
	unit = pmh_freemap_alloc(&shared->pool_map, units);
	LWLockRelease(pool_lock());
	return unit;
}

/* Give units back to the shared pool. */
static void
pool_free(uint64 unit, uint64 units)
{
	LWLockAcquire(pool_lock(), LW_EXCLUSIVE);
	pmh_freemap_release(&shared->pool_map, unit, units);
	LWLockRelease(pool_lock());
}

/* Lock that serializes file-space allocation of one index. */
LWLock *
pmhash_alloc_lock(PmhashShare *share)
{
	return &locks[share->alloc_lock].lock;
}

/*
 * Lock of one index's descriptor array: taken shared to store a descriptor,
 * exclusively by the split that moves the array (core move_descriptors).
 */
LWLock *
pmhash_descriptor_lock(PmhashShare *share)
{
	return &locks[FIRST_ALLOC_LOCK + pmhash_max_indexes + pmhash_shard_locks +
				  (share - shares)].lock;
}

/* Writer lock of a shard (striped over pmhash.shard_locks locks). */
LWLock *
pmhash_shard_lock(PmhashShare *share, uint32 shard)
{
	uint32		stripe = ((uint32) (share - shares) * 2654435761u + shard) %
		(uint32) pmhash_shard_locks;

	return &locks[FIRST_ALLOC_LOCK + pmhash_max_indexes + stripe].lock;
}

/*
 * Take the writer locks of two shards, as a split does: in the order of
 * their stripes, and once if they share one.
 */
void
pmhash_lock_shard_pair(PmhashShare *share, uint32 a, uint32 b)
{
	LWLock	   *first = pmhash_shard_lock(share, a);
	LWLock	   *second = pmhash_shard_lock(share, b);

	LWLockAcquire(Min(first, second), LW_EXCLUSIVE);
	if (second != first)
		LWLockAcquire(Max(first, second), LW_EXCLUSIVE);
}

/* Release what pmhash_lock_shard_pair took. */
void
pmhash_unlock_shard_pair(PmhashShare *share, uint32 a, uint32 b)
{
	LWLock	   *first = pmhash_shard_lock(share, a);
	LWLock	   *second = pmhash_shard_lock(share, b);

	if (second != first)
		LWLockRelease(second);
	LWLockRelease(first);
}

/* Announce that this backend may read index memory from now on. */
void
pmhash_enter(void)
{
	if (shared == NULL)
		pmhash_check_preloaded();
	if (enter_depth++ > 0)
		return;
	/* an exchange is a full barrier, and cheaper than a store and a fence */
	(void) pg_atomic_exchange_u64(&announce[GetNumberFromPGProc(MyProc)].epoch,
								  pg_atomic_read_u64(&shared->epoch));
}

/* Clear this backend's announcement after the reads it protected. */
static inline void
clear_announcement(void)
{
	/*
	 * Release ordering suffices: the reads before must complete before the
	 * clearing store.  A full barrier here would wait for every pending
	 * cache-line flush as well.
	 */
	__atomic_store_n(&announce[GetNumberFromPGProc(MyProc)].epoch.value, 0, __ATOMIC_RELEASE);
}

/* End of an announced section. */
void
pmhash_leave(void)
{
	Assert(enter_depth > 0);
	if (--enter_depth > 0)
		return;
	clear_announcement();
}

/* Whether this backend is inside a pmhash operation. */
bool
pmhash_entered(void)
{
	return enter_depth > 0;
}

/* Clear the announcement after an error (transaction or process exit). */
void
pmhash_leave_all(void)
{
	if (shared == NULL || MyProc == NULL || enter_depth == 0)
		return;
	enter_depth = 0;
	clear_announcement();
}

/*
 * Advance the epoch after unpublishing something; what was unpublished may
 * be freed once pmhash_readers_done() holds for the returned epoch.
 */
uint64
pmhash_retire_epoch(void)
{
	return pg_atomic_add_fetch_u64(&shared->epoch, 1);
}

/* Whether every backend announced since epoch, or is idle. */
bool
pmhash_readers_done(uint64 epoch)
{
	for (int i = 0; i < shared->nprocs; i++)
	{
		uint64		seen;

		if (MyProc && i == GetNumberFromPGProc(MyProc))
			continue;
		seen = pg_atomic_read_u64(&announce[i].epoch);
		if (seen != 0 && seen < epoch)
			return false;
	}
	return true;
}

/* Wait until no reader can still see what was retired at epoch. */
void
pmhash_wait_for_readers(uint64 epoch)
{
	while (!pmhash_readers_done(epoch))
		pg_usleep(100L);
}

/* Find the share attached to a file, or NULL (share table lock held). */
PmhashShare *
pmhash_share_find(const PmhashFileKey *key)
{
	for (int i = 0; i < shared->nshares; i++)
	{
		if (shares[i].state == PMHASH_SHARE_READY &&
			memcmp(&shares[i].key, key, sizeof(PmhashFileKey)) == 0)
		{
			shares[i].last_use = pg_atomic_fetch_add_u64(&shared->attach_clock, 1);
			return &shares[i];
		}
	}
	return NULL;
}

/* Whether the main fork of a share's index is gone (the index was dropped). */
static bool
share_is_orphan(PmhashShare *share)
{
	char	   *path = pmhash_relpath(share->key.node, share->key.backend, MAIN_FORKNUM);
	struct stat st;
	bool		orphan = stat(path, &st) != 0 && errno == ENOENT;

	pfree(path);
	return orphan;
}

/*
 * Detach a share: make it unfindable, wait for readers that may still use
 * it, and give its pool space back (share table lock held exclusively).
 * The caller decides about changes not yet synced (the unsynced flag).
 */
void
pmhash_share_release(PmhashShare *share)
{
	uint64		epoch;

	share->state = PMHASH_SHARE_FREE;
	share->share_gen++;
	epoch = pmhash_retire_epoch();
	pmhash_wait_for_readers(epoch);
	if (share->pool_unit != 0)
		pool_free(share->pool_unit, share->pool_units);
	share->pool_unit = 0;
	share->pool_units = 0;
	for (int k = 1; k < PMHASH_SHARD_CHUNKS; k++)
	{
		if (share->chunk_pool[k].unit != 0)
			pool_free(share->chunk_pool[k].unit, share->chunk_pool[k].count);
		share->chunk_pool[k] = (PmhExtent) {0, 0};
		share->chunks[k] = NULL;
	}
	if (share->freemap_pool.unit != 0)
		pool_free(share->freemap_pool.unit, share->freemap_pool.count);
	share->freemap_pool = (PmhExtent) {0, 0};
	pmh_freemap_init(&share->freemap, NULL, 0);
	share->nretired = 0;
	pg_atomic_write_u64(&shared->forget_counter,
						pg_atomic_read_u64(&shared->forget_counter) + 1);
}

/*
 * Evict a share to reuse its place, then sync the changes that commits
 * left to the syncer, which would no longer find the file.
 */
static void
evict(PmhashShare *share)
{
	pmhash_share_release(share);
	/* no one writes to it any more; the path stays until the share is reused */
	if (pg_atomic_exchange_u32(&share->unsynced, 0) != 0)
		pmhash_fsync_file(share->path);
}

/* An attached share to evict: one whose index is gone, else the least used. */
static PmhashShare *
share_victim(void)
{
	PmhashShare    *lru = NULL;

	for (int i = 0; i < shared->nshares; i++)
	{
		if (shares[i].state != PMHASH_SHARE_READY)
			continue;
		if (share_is_orphan(&shares[i]))
			return &shares[i];
		if (lru == NULL || shares[i].last_use < lru->last_use)
			lru = &shares[i];
	}
	return lru;
}

/* A free share, or NULL. */
static PmhashShare *
share_free(void)
{
	for (int i = 0; i < shared->nshares; i++)
	{
		if (shares[i].state == PMHASH_SHARE_FREE)
			return &shares[i];
	}
	return NULL;
}

/* Pool units of n bytes. */
static uint64
pool_units_of(Size bytes)
{
	return (bytes + POOL_UNIT - 1) / POOL_UNIT;
}

/* Fresh states for count slots whose shards have the given depth. */
static void
init_states(PmhashShardState *states, uint32 count, uint32 depth)
{
	for (uint32 s = 0; s < count; s++)
	{
		pmh_mirror_publish(&states[s].mirror, &(PmhPublication) {0, 0, depth});
		memset(&states[s].counts, 0, sizeof(PmhCounts));
		states[s].removals = 0;
		states[s].broken = false;
	}
}

/*
 * Give a share's free map room for capacity extents (pool lock held): a
 * bigger array from the pool, the map copied into it under the allocation
 * lock, the old array freed.  False if the pool has no room.
 */
static bool
grow_freemap(PmhashShare *share, uint32 capacity)
{
	uint64		units = pool_units_of(capacity * sizeof(PmhExtent));
	uint64		unit;
	PmhExtent	old = share->freemap_pool;
	PmhFreeMap *map = &share->freemap;

	if (map->capacity >= capacity)
		return true;
	if ((unit = pmh_freemap_alloc(&shared->pool_map, units)) == 0)
		return false;
	LWLockAcquire(pmhash_alloc_lock(share), LW_EXCLUSIVE);
	if (map->count > 0)
		memcpy(pool + unit * POOL_UNIT, map->extents, map->count * sizeof(PmhExtent));
	map->extents = (PmhExtent *) (pool + unit * POOL_UNIT);
	map->capacity = capacity;
	share->freemap_pool = (PmhExtent) {unit, units};
	LWLockRelease(pmhash_alloc_lock(share));
	if (old.unit != 0)
		pmh_freemap_release(&shared->pool_map, old.unit, old.count);
	return true;
}

/*
 * Make sure a share has the shard states of slots below nslots, taking pool
 * space for the chunks missing (under the pool lock, so that backends
 * making room for the same chunk take it once), and a free map with room
 * for an extent per slot of its chunks: free extents lie between segments,
 * so the map never fills up and no freed space is lost.  The map grows
 * first, so that every chunk has its room in it.  False if the pool has no
 * room for one.  A chunk is complete before readers can see it, and they
 * look only at slots a map they read has.
 */
bool
pmhash_share_reserve(PmhashShare *share, uint32 nslots)
{
	bool		ok = true;
	uint32		room = UINT32_C(2) << share->shard_bits;

	while (room < nslots && room < PMHASH_MAX_SHARDS)
		room <<= 1;
	LWLockAcquire(pool_lock(), LW_EXCLUSIVE);
	if (!grow_freemap(share, room + SPARE_EXTENTS))
	{
		LWLockRelease(pool_lock());
		return false;
	}
	for (uint32 k = 1; k < PMHASH_SHARD_CHUNKS && share->shard_bits + k < 32; k++)
	{
		uint32		first = UINT32_C(1) << (share->shard_bits + k);
		uint64		units = pool_units_of((Size) first * sizeof(PmhashShardState));
		uint64		unit;

		if (first >= nslots)
			break;
		if (share->chunks[k] != NULL)
			continue;
		if ((unit = pmh_freemap_alloc(&shared->pool_map, units)) == 0)
		{
			ok = false;
			break;
		}
		init_states((PmhashShardState *) (pool + unit * POOL_UNIT), first,
					share->shard_bits + k + 1);
		share->chunk_pool[k] = (PmhExtent) {unit, units};
		pg_write_barrier();
		share->chunks[k] = (PmhashShardState *) (pool + unit * POOL_UNIT);
	}
	LWLockRelease(pool_lock());
	return ok;
}

/*
 * Make sure a share has the shard state of a slot that a split is about to
 * add; false if the pool has no room (pmhash.max_shards).  Taken while
 * announced: the pool lock is not one that waits for readers.
 */
bool
pmhash_share_make_room(PmhashShare *share, uint32 slot)
{
	if (slot < (UINT32_C(2) << share->shard_bits) ||
		share->chunks[pg_leftmost_one_pos32(slot) - share->shard_bits] != NULL)
		return true;
	return pmhash_share_reserve(share, slot + 1);
}

/*
 * Give a file a share with room for its shards (nslots of them, built with
 * 2^shard_bits), evicting idle shares if needed (share table lock held
 * exclusively, and no announcement of ours pending: eviction waits for
 * announced readers).  The caller fills it in.
 */
PmhashShare *
pmhash_share_assign(const PmhashFileKey *key, uint32 shard_bits, uint32 nslots)
{
	uint64		nshards = pmh_slot_room(shard_bits);
	uint64		units = pool_units_of(nshards * sizeof(PmhashShardState));
	PmhashShare    *share;
	uint64		unit;

	while ((unit = pool_alloc(units)) == 0)
	{
		share = share_victim();
		if (share == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("not enough pmhash shared memory for an index with %llu shards",
							(unsigned long long) nshards),
					 errhint("Increase pmhash.max_shards (now %d) and restart the server.",
							 pmhash_max_shards)));
		evict(share);
	}
	share = share_free();
	if (share == NULL)
	{
		share = share_victim();
		evict(share);
	}

	share->key = *key;
	share->pool_unit = unit;
	share->pool_units = units;
	share->shard_bits = shard_bits;
	memset(share->chunks, 0, sizeof(share->chunks));
	memset(share->chunk_pool, 0, sizeof(share->chunk_pool));
	share->chunks[0] = (PmhashShardState *) (pool + unit * POOL_UNIT);
	init_states(share->chunks[0], (uint32) nshards, shard_bits);
	share->freemap_pool = (PmhExtent) {0, 0};
	pmh_freemap_init(&share->freemap, NULL, 0);
	share->map_logged = false;
	share->nretired = 0;
	share->last_use = pg_atomic_fetch_add_u64(&shared->attach_clock, 1);
	if (!pmhash_share_reserve(share, nslots))
	{
		pmhash_share_release(share);
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("not enough pmhash shared memory for an index with %u shards", nslots),
				 errhint("Increase pmhash.max_shards (now %d) and restart the server.",
						 pmhash_max_shards)));
	}
	return share;
}

/*
 * Release every attached share, telling on_broken about shares with a shard
 * that recovery left broken.  Backends re-attach from the files.
 */
void
pmhash_shares_detach_all(void (*on_broken) (PmhashShare *share))
{
	LWLockAcquire(pmhash_share_table_lock(), LW_EXCLUSIVE);
	for (int i = 0; i < shared->nshares; i++)
	{
		PmhashShare    *share = &shares[i];
		uint64		nshards = pmh_map_slots(pg_atomic_read_u64(&share->shard_map));
		bool		broken = false;

		if (share->state != PMHASH_SHARE_READY)
			continue;
		for (uint64 s = 0; s < nshards && !broken; s++)
			broken = pmhash_shard_state(share, s)->broken;
		if (broken)
			on_broken(share);
		pmhash_share_release(share);
		/* recovery synced everything it replayed */
		pg_atomic_write_u32(&share->unsynced, 0);
	}
	LWLockRelease(pmhash_share_table_lock());
}

/* Forget any share attached to a file (its file is being replaced or removed). */
void
pmhash_forget_file(const PmhashFileKey *key)
{
	PmhashShare    *share;

	if (shared == NULL)
		return;
	LWLockAcquire(pmhash_share_table_lock(), LW_EXCLUSIVE);
	share = pmhash_share_find(key);
	if (share)
	{
		pmhash_share_release(share);
		/* the file is dropped or replaced: its old changes do not matter */
		pg_atomic_write_u32(&share->unsynced, 0);
	}
	LWLockRelease(pmhash_share_table_lock());
}

/* Counter that moves whenever a share is released. */
uint64
pmhash_forget_counter(void)
{
	return pg_atomic_read_u64(&shared->forget_counter);
}

/* The postmaster flagged unverified entries from position (before any child). */
void
pmhash_set_flagged_from(XLogRecPtr position)
{
	shared->flagged_from = position;
}

/* Where the postmaster flagged unverified entries from, or Invalid. */
XLogRecPtr
pmhash_flagged_from(void)
{
	return shared->flagged_from;
}

/*
 * The WAL position from which commits may leave the sync of their changes
 * to the syncer (pmsyncer.c), or 0 while every commit syncs its own.
 */
XLogRecPtr
pmhash_defer_floor(void)
{
	return pg_atomic_read_u64(&shared->defer_floor);
}

/* Let commits whose changes were all made from position on defer their sync. */
void
pmhash_set_defer_floor(XLogRecPtr position)
{
	pg_atomic_write_u64(&shared->defer_floor, position);
}

/* The last durable position the syncer or recovery wrote. */
XLogRecPtr
pmhash_durable_position(void)
{
	return pg_atomic_read_u64(&shared->durable_position);
}

/* Publish a durable position that is on disk. */
void
pmhash_set_durable_position(XLogRecPtr position)
{
	pg_atomic_write_u64(&shared->durable_position, position);
}

/*
 * A change was just stored in a share's file and is not yet durable.  The
 * barrier orders the store before the flag's read, so that a syncer which
 * clears the flag after this read syncs the change.
 */
void
pmhash_share_mark_unsynced(PmhashShare *share)
{
	pg_memory_barrier();
	if (pg_atomic_read_u32(&share->unsynced) == 0)
		pg_atomic_write_u32(&share->unsynced, 1);
}

/*
 * Paths of the files with changes not yet synced, at most max of them
 * (the rest stay flagged); their flags are cleared.
 */
int
pmhash_collect_unsynced(char (*paths)[MAXPGPATH], int max)
{
	int			n = 0;

	LWLockAcquire(pmhash_share_table_lock(), LW_SHARED);
	for (int i = 0; i < shared->nshares && n < max; i++)
	{
		PmhashShare *share = &shares[i];

		if (share->state == PMHASH_SHARE_READY &&
			pg_atomic_exchange_u32(&share->unsynced, 0) != 0)
			strlcpy(paths[n++], share->path, MAXPGPATH);
	}
	LWLockRelease(pmhash_share_table_lock());
	return n;
}
