/*-------------------------------------------------------------------------
 *
 * test_match.c
 *	  Core tests of the tag comparison (src/core/pmh_match.c).
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/core/test_match.c
 *
 *-------------------------------------------------------------------------
 */
#include <string.h>

#include "test_util.h"

/* Every tag comparison this CPU can run agrees with the plain loop. */
void
test_match(void)
{
	static const char *const impls[] = {"scalar", "sse2", "avx2"};
	PmhBucket	bucket;

	for (int round = 0; round < 20000 && !test_failed; round++)
	{
		uint16_t	key = (uint16_t) (rnd() & 0xF);
		uint32_t	expect = 0;

		/* the bytes after the tags must not matter */
		memset(&bucket, (int) (rnd() & 1) ? 0 : key, sizeof(bucket));
		for (int i = 0; i < PMH_BUCKET_SLOTS; i++)
		{
			bucket.tag[i] = (uint16_t) (rnd() & 0xF);
			expect |= (uint32_t) (bucket.tag[i] == key) << i;
		}
		for (int k = 0; k < 3; k++)
		{
			uint32_t	got;

			if (!pmh_match_use(impls[k]))
				continue;
			got = pmh_match_tags(bucket.tag, key);
			CHECK(got == expect, "%s: mask %07x, expected %07x", impls[k], got, expect);
		}
		pmh_match_use(NULL);
	}
}
