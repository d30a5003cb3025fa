/*-------------------------------------------------------------------------
 *
 * pmh_alloc.c
 *	  Free-space map of a pmhash file.
 *
 * Which units are in use is never written down: a unit is in use exactly when
 * a descriptor reaches it.  The free map is a volatile, best-fit
 * list of extents that is rebuilt from the descriptors whenever an index is
 * attached, so a crash in the middle of a rebuild leaks nothing.  Freed
 * extents merge with their neighbours.  If the map is full, a freed extent is
 * counted as lost until the map is next rebuilt.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/core/pmh_alloc.c
 *
 *-------------------------------------------------------------------------
 */
#include <string.h>

#include "pmh_core.h"

/* Start an empty free map over caller-provided extent storage. */
void
pmh_freemap_init(PmhFreeMap *map, PmhExtent *extents, uint32_t capacity)
{
	map->extents = extents;
	map->count = 0;
	map->capacity = capacity;
	map->lost_units = 0;
}

/* Take units from the smallest extent that fits; 0 if none does. */
uint64_t
pmh_freemap_alloc(PmhFreeMap *map, uint64_t units)
{
	uint32_t	best = UINT32_MAX;
	uint64_t	unit;
	PmhExtent  *ext;

	for (uint32_t i = 0; i < map->count; i++)
	{
		if (map->extents[i].count < units)
			continue;
		if (best == UINT32_MAX || map->extents[i].count < map->extents[best].count)
		{
			best = i;
			if (map->extents[i].count == units)
				break;
		}
	}
	if (best == UINT32_MAX)
		return 0;
	ext = &map->extents[best];
	unit = ext->unit;
	ext->unit += units;
	ext->count -= units;
	if (ext->count == 0)
	{
		memmove(ext, ext + 1, (map->count - best - 1) * sizeof(PmhExtent));
		map->count--;
	}
	return unit;
}

/*
 * Return an extent to the map, merging it with its neighbours.  Returns -1,
 * changing nothing, if it overlaps space that is already free.
 */
int
pmh_freemap_release(PmhFreeMap *map, uint64_t unit, uint64_t units)
{
	uint32_t	lo = 0;
	uint32_t	hi = map->count;
	PmhExtent  *prev;
	PmhExtent  *next;

	if (units == 0)
		return 0;
	/* first extent that starts after unit */
	while (lo < hi)
	{
		uint32_t	mid = (lo + hi) / 2;

		if (map->extents[mid].unit <= unit)
			lo = mid + 1;
		else
			hi = mid;
	}
	prev = lo > 0 ? &map->extents[lo - 1] : NULL;
	next = lo < map->count ? &map->extents[lo] : NULL;
	if ((prev && prev->unit + prev->count > unit) ||
		(next && unit + units > next->unit))
		return -1;

	if (prev && prev->unit + prev->count == unit)
	{
		prev->count += units;
		if (next && prev->unit + prev->count == next->unit)
		{
			prev->count += next->count;
			memmove(next, next + 1, (map->count - lo - 1) * sizeof(PmhExtent));
			map->count--;
		}
		return 0;
	}
	if (next && unit + units == next->unit)
	{
		next->unit = unit;
		next->count += units;
		return 0;
	}
	if (map->count == map->capacity)
	{
		map->lost_units += units;
		return 0;
	}
	memmove(&map->extents[lo + 1], &map->extents[lo],
			(map->count - lo) * sizeof(PmhExtent));
	map->extents[lo].unit = unit;
	map->extents[lo].count = units;
	map->count++;
	return 0;
}

/* Units currently recorded as free. */
uint64_t
pmh_freemap_total(const PmhFreeMap *map)
{
	uint64_t	total = 0;

	for (uint32_t i = 0; i < map->count; i++)
		total += map->extents[i].count;
	return total;
}
