/*-------------------------------------------------------------------------
 *
 * test_alloc.c
 *	  Core tests of the free map of file space (src/core/pmh_alloc.c).
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/core/test_alloc.c
 *
 *-------------------------------------------------------------------------
 */


#include "test_util.h"

/* The free map hands out disjoint space and merges what comes back. */
void
test_freemap(void)
{
	enum
	{
		SPACE = 4096
	};
	PmhExtent	ext[64];
	PmhFreeMap	map;
	uint8_t		used[SPACE + 1] = {0};
	uint64_t	held_unit[200];
	uint64_t	held_count[200];
	int			nheld = 0;

	pmh_freemap_init(&map, ext, 64);
	CHECK(pmh_freemap_release(&map, 1, SPACE) == 0, "initial release");
	CHECK(pmh_freemap_release(&map, 10, 5) == -1, "overlap not detected");
	for (int round = 0; round < 20000 && !test_failed; round++)
	{
		if (nheld < 200 && (rnd() % 3 != 0 || nheld == 0))
		{
			uint64_t	count = 1 + rnd() % 40;
			uint64_t	unit = pmh_freemap_alloc(&map, count);

			if (unit == 0)
				continue;
			for (uint64_t u = unit; u < unit + count; u++)
			{
				CHECK(u >= 1 && u <= SPACE && !used[u], "unit %llu handed out twice",
					  (unsigned long long) u);
				used[u] = 1;
			}
			held_unit[nheld] = unit;
			held_count[nheld++] = count;
		}
		else
		{
			int			k = (int) (rnd() % nheld);

			for (uint64_t u = held_unit[k]; u < held_unit[k] + held_count[k]; u++)
				used[u] = 0;
			CHECK(pmh_freemap_release(&map, held_unit[k], held_count[k]) == 0, "release");
			held_unit[k] = held_unit[--nheld];
			held_count[k] = held_count[nheld];
		}
	}
	while (nheld > 0)
	{
		nheld--;
		pmh_freemap_release(&map, held_unit[nheld], held_count[nheld]);
	}
	CHECK(map.lost_units > 0 || (map.count == 1 && pmh_freemap_total(&map) == SPACE),
		  "free space did not merge back: %u extents, %llu units", map.count,
		  (unsigned long long) pmh_freemap_total(&map));
}
