/*-------------------------------------------------------------------------
 *
 * pmspace.c
 *	  File space of an index: growth, allocation, retirement and reclaim.
 *
 * The free map and the list of retired segments of a file live in its slot,
 * under the allocation lock.  A file grows with posix_fallocate, so that a
 * full file system is an ERROR rather than a later SIGBUS; a retired
 * segment returns to the free map once no announced reader can still be
 * inside it; a freshly built file gives back its unused tail (src/README,
 * Writers).
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmspace.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <libpmem.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/fd.h"

#include "pmhash.h"

#define LARGE_GROWTH_UNITS		8192	/* growth granularity of large files: 2 MiB */
#define SMALL_GROWTH_UNITS		64		/* growth granularity of small files: 16 kB */

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
uint64
pmh_space_alloc(void *arg, uint64 units)
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
void
pmh_space_free(void *arg, uint64 unit, uint64 units)
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
	pmh_map_file(ix, slot->path);
}

/* Make a deferred (bulk-built) file durable as a whole. */
void
pmh_finish_deferred(PmhIndex *ix)
{
	trim_file(ix);
	ix->deferred = false;
	if (ix->durable)
		pmh_persist_range(ix->base, ix->mapped_len, ix->is_pmem, ix->slot->path);
	ix->persist = pmh_normal_persist(ix);
}
