/*-------------------------------------------------------------------------
 *
 * pmspace.c
 *	  File space of an index: growth, allocation, retirement and reclaim.
 *
 * The free map and the list of retired segments of a file live in its share,
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
reclaim_retired(PmhashShare *share)
{
	int			keep = 0;

	for (int i = 0; i < share->nretired; i++)
	{
		PmhashRetired *r = &share->retired[i];

		if (pmhash_readers_done(r->epoch))
		{
			if (pmh_freemap_release(&share->freemap, r->unit, r->units) != 0)
				elog(WARNING, "pmhash file \"%s\": segment at unit " UINT64_FORMAT " freed twice",
					 share->path, r->unit);
		}
		else
			share->retired[keep++] = *r;
	}
	share->nretired = keep;
}

/*
 * Grow a file so that units more units fit, and add the space to the free
 * map (allocation lock held).
 */
static void
grow_file(PmhashShare *share, uint64 units, const char *index_name)
{
	struct stat st;
	uint64		cur = pg_atomic_read_u64(&share->file_units);
	uint64		want = Max(cur + units, cur + cur / 8);
	uint64		step = want >= 8 * LARGE_GROWTH_UNITS ? LARGE_GROWTH_UNITS : SMALL_GROWTH_UNITS;
	int			fd;
	int			rc;

	want = (want + step - 1) / step * step;
	fd = OpenTransientFile(share->path, O_RDWR | O_NOFOLLOW | PG_BINARY);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open pmhash file \"%s\": %m", share->path)));
	/* extending a truncated file would hide its loss behind zeros */
	if (fstat(fd, &st) != 0 || (uint64) st.st_size < cur * PMH_UNIT_SIZE)
	{
		CloseTransientFile(fd);
		pmhash_raise_damaged(index_name,
						  psprintf("File \"%s\" is shorter than the index's segments: it was truncated.",
								   share->path));
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
				 errmsg("could not extend the file \"%s\" of pmhash index \"%s\" to %llu bytes: %m",
						share->path, index_name, (unsigned long long) (want * PMH_UNIT_SIZE)),
				 errhint("Free some space on the file system of pmhash.directory; the index stays usable meanwhile.")));
	}
	pg_atomic_write_u64(&share->file_units, want);
	pmh_freemap_release(&share->freemap, cur, want - cur);
}

/* Table callback: file space for a new segment. */
uint64
pmhash_space_alloc(void *arg, uint64 units)
{
	PmhashLocal   *ix = arg;
	PmhashShare    *share = ix->share;
	uint64		unit;

	LWLockAcquire(pmhash_alloc_lock(share), LW_EXCLUSIVE);
	reclaim_retired(share);
	unit = pmh_freemap_alloc(&share->freemap, units);
	if (unit == 0)
	{
		grow_file(share, units, NameStr(ix->name));
		unit = pmh_freemap_alloc(&share->freemap, units);
	}
	LWLockRelease(pmhash_alloc_lock(share));
	if (unit != 0)
		pmhash_ensure_mapped(ix, unit + units);
	return unit;
}

/*
 * Table callback: a segment is no longer published.  It is freed once every
 * reader that might have seen it is done; this never waits.
 */
void
pmhash_space_free(void *arg, uint64 unit, uint64 units)
{
	PmhashShare    *share = ((PmhashLocal *) arg)->share;
	uint64		epoch = pmhash_retire_epoch();

	LWLockAcquire(pmhash_alloc_lock(share), LW_EXCLUSIVE);
	reclaim_retired(share);
	if (share->nretired == PMHASH_MAX_RETIRED)
	{
		/* a reader is stuck: leave the oldest segment to the next attach */
		memmove(&share->retired[0], &share->retired[1],
				(PMHASH_MAX_RETIRED - 1) * sizeof(PmhashRetired));
		share->nretired--;
	}
	share->retired[share->nretired].unit = unit;
	share->retired[share->nretired].units = units;
	share->retired[share->nretired].epoch = epoch;
	share->nretired++;
	LWLockRelease(pmhash_alloc_lock(share));
}

/*
 * Give back the free tail of a freshly built file: growth left up to half
 * of it unused.  Nobody else maps the file during a build.
 */
static void
trim_file(PmhashLocal *ix)
{
	PmhashShare    *share = ix->share;
	PmhFreeMap *map = &share->freemap;
	uint64		file_units;
	PmhExtent  *last;
	uint64		keep;
	int			fd;

	LWLockAcquire(pmhash_alloc_lock(share), LW_EXCLUSIVE);
	reclaim_retired(share);
	file_units = pg_atomic_read_u64(&share->file_units);
	last = map->count > 0 ? &map->extents[map->count - 1] : NULL;
	if (last == NULL || last->unit + last->count != file_units ||
		last->count < 2 * SMALL_GROWTH_UNITS)
	{
		LWLockRelease(pmhash_alloc_lock(share));
		return;
	}
	keep = (last->unit + SMALL_GROWTH_UNITS - 1) / SMALL_GROWTH_UNITS * SMALL_GROWTH_UNITS;
	fd = OpenTransientFile(share->path, O_RDWR | O_NOFOLLOW | PG_BINARY);
	if (fd < 0 || ftruncate(fd, (off_t) (keep * PMH_UNIT_SIZE)) != 0)
	{
		if (fd >= 0)
			CloseTransientFile(fd);
		LWLockRelease(pmhash_alloc_lock(share));
		return;					/* keeping the space is harmless */
	}
	CloseTransientFile(fd);
	if (keep > last->unit)
		last->count = keep - last->unit;
	else
		map->count--;
	pg_atomic_write_u64(&share->file_units, keep);
	LWLockRelease(pmhash_alloc_lock(share));
	/* the mapping must not reach past the end of the file */
	pmhash_map_file(ix, share->path);
}

/*
 * Make a deferred (bulk-built) file durable as a whole; then, if it is a
 * rebuild from the table, log and clear its mark of an unfinished build.
 */
void
pmhash_finish_build(PmhashLocal *ix)
{
	trim_file(ix);
	ix->deferred = false;
	if (ix->durable)
		pmhash_persist_range(ix->base, ix->mapped_len, ix->is_pmem, ix->share->path);
	ix->persist = pmhash_normal_persist(ix);
	if (ix->building)
	{
		if (ix->logged)
			pmhash_log_built(&ix->node);
		pmhash_mark_built(ix);
	}
}
