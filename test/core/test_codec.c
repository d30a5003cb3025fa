/*-------------------------------------------------------------------------
 *
 * test_codec.c
 *	  Core tests of the encoding of entry lists (src/core/pmh_codec.c).
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/core/test_codec.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>

#include "test_util.h"

/* qsort comparator for entries by TID. */
static int
tid_cmp_entries(const void *a, const void *b)
{
	return pmh_tid_cmp(((const PmhEntry *) a)->tid, ((const PmhEntry *) b)->tid);
}

/* Entry lists survive encoding, sorted by hash or by TID, and bad data is refused. */
void
test_codec(void)
{
	enum
	{
		N = 5000
	};
	PmhEntry   *in = malloc(N * sizeof(PmhEntry));
	PmhEntry   *out = malloc(N * sizeof(PmhEntry));
	PmhEntry   *scratch = malloc(N * sizeof(PmhEntry));
	uint8_t    *buf = malloc(pmh_encoded_max(N));

	for (int with_hash = 0; with_hash <= 1 && !test_failed; with_hash++)
	{
		uint64_t	n;
		size_t		len;

		for (int i = 0; i < N; i++)
		{
			in[i].hash = with_hash ? (uint32_t) rnd() : 0;
			in[i].tid = pmh_tid_make((uint32_t) (rnd() % (with_hash ? 4000000000u : 100000)),
									 (uint16_t) (1 + rnd() % 2000));
			in[i].flags = rnd() % 7 == 0 ? PMH_ENTRY_UNVERIFIED : 0;
		}
		if (with_hash)
			n = pmh_sort_entries(in, N, scratch);
		else
		{
			qsort(in, N, sizeof(PmhEntry), tid_cmp_entries);
			n = N;
		}
		len = pmh_encode_entries(in, n, with_hash, buf);
		CHECK(len <= pmh_encoded_max(n), "encoding overflows its bound");
		CHECK(len < n * (with_hash ? 11 : 6), "%s encoding takes %zu bytes for %llu entries",
			  with_hash ? "hash" : "TID", len, (unsigned long long) n);
		CHECK(pmh_decode_entries(buf, len, n, with_hash, out) == 0, "decode failed");
		for (uint64_t i = 0; i < n && !test_failed; i++)
			CHECK(out[i].hash == in[i].hash && pmh_tid_equal(out[i].tid, in[i].tid) &&
				  out[i].flags == in[i].flags, "entry %llu differs", (unsigned long long) i);
		CHECK(pmh_decode_entries(buf, len - 1, n, with_hash, out) != 0, "truncated data accepted");
		CHECK(pmh_decode_entries(buf, len, n - 1, with_hash, out) != 0, "trailing data accepted");
	}
	free(in);
	free(out);
	free(scratch);
	free(buf);
}
