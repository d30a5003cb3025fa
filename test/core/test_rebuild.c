/*-------------------------------------------------------------------------
 *
 * test_rebuild.c
 *	  Core tests of the sort of entries of a rebuild (src/core/pmh_rebuild.c).
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/core/test_rebuild.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

/*
 * pmh_sort_entries matches qsort plus a merge of exact duplicates (kept
 * verified if either copy was), whatever the spread of the hashes: whole
 * range, one shard, a few values, one value, in order, reversed.
 */
void
test_sort(void)
{
	enum
	{
		N = 20000
	};
	static const char *const shapes[] = {
		"random", "one shard", "few hashes", "one hash", "ascending", "descending", "clusters"
	};
	PmhEntry   *in = malloc(N * sizeof(PmhEntry));
	PmhEntry   *want = malloc(N * sizeof(PmhEntry));
	PmhEntry   *scratch = malloc(N * sizeof(PmhEntry));

	for (int shape = 0; shape < 7 && !test_failed; shape++)
	{
		for (uint64_t count = 0; count <= N && !test_failed; count = count * 3 + 1)
		{
			uint64_t	nwant = 0;
			uint64_t	n;

			for (uint64_t i = 0; i < count; i++)
			{
				uint32_t	r = (uint32_t) rnd();

				switch (shape)
				{
					case 0: in[i].hash = r; break;
					case 1: in[i].hash = (0x1A5u << 23) | (r >> 9); break;
					case 2: in[i].hash = mix(r % 5); break;
					case 3: in[i].hash = 0xDEADBEEF; break;
					case 4: in[i].hash = (uint32_t) (i * 2654435u); break;
					case 5: in[i].hash = (uint32_t) ((count - i) * 2654435u); break;
					default: in[i].hash = mix(r % 7) + (r >> 26); break;
				}
				in[i].tid = pmh_tid_make((uint32_t) (rnd() % 50), (uint16_t) (1 + rnd() % 20));
				in[i].flags = rnd() % 3 == 0 ? PMH_ENTRY_UNVERIFIED : 0;
				/* every tenth entry repeats an earlier one, maybe with other flags */
				if (i > 0 && rnd() % 10 == 0)
				{
					in[i] = in[rnd() % i];
					in[i].flags = rnd() % 2 ? PMH_ENTRY_UNVERIFIED : 0;
				}
			}
			memcpy(want, in, count * sizeof(PmhEntry));
			qsort(want, count, sizeof(PmhEntry), pmh_entry_cmp);
			for (uint64_t i = 0; i < count; i++)
			{
				if (nwant > 0 && pmh_entry_cmp(&want[i], &want[nwant - 1]) == 0)
					want[nwant - 1].flags &= want[i].flags;
				else
					want[nwant++] = want[i];
			}

			n = pmh_sort_entries(in, count, scratch);
			CHECK(n == nwant, "%s, %llu entries: %llu kept, %llu expected", shapes[shape],
				  (unsigned long long) count, (unsigned long long) n, (unsigned long long) nwant);
			for (uint64_t i = 0; i < n && i < nwant && !test_failed; i++)
				CHECK(in[i].hash == want[i].hash && pmh_tid_equal(in[i].tid, want[i].tid) &&
					  in[i].flags == want[i].flags, "%s, %llu entries: entry %llu differs",
					  shapes[shape], (unsigned long long) count, (unsigned long long) i);
		}
	}
	free(in);
	free(want);
	free(scratch);
}
