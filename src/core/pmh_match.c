/*-------------------------------------------------------------------------
 *
 * pmh_match.c
 *	  Compare a bucket's 22 stored hash codes with a probe hash.
 *
 * The AVX2 version compares 24 lanes in three instructions; the two lanes
 * past the hash array read the start of the TID array of the same bucket and
 * are masked off.  The implementation is chosen once, at first use, from what
 * the CPU supports; a scalar loop serves every other platform.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/core/pmh_match.c
 *
 *-------------------------------------------------------------------------
 */
#include "pmh_core.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

typedef uint32_t (*MatchFn) (const uint32_t *hashes, uint32_t hash);

static uint32_t match_dispatch(const uint32_t *hashes, uint32_t hash);

static MatchFn match_fn = match_dispatch;
static const char *match_name = "unselected";

/* Portable comparison, one slot at a time. */
static uint32_t
match_scalar(const uint32_t *hashes, uint32_t hash)
{
	uint32_t	mask = 0;

	for (int i = 0; i < PMH_BUCKET_SLOTS; i++)
		mask |= (uint32_t) (hashes[i] == hash) << i;
	return mask;
}

#if defined(__x86_64__)

/* SSE2 comparison, four slots per instruction; SSE2 is baseline on x86-64. */
static uint32_t
match_sse2(const uint32_t *hashes, uint32_t hash)
{
	__m128i		key = _mm_set1_epi32((int) hash);
	uint32_t	mask = 0;

	for (int i = 0; i < 6; i++)
	{
		__m128i		v = _mm_loadu_si128((const __m128i *) (hashes + 4 * i));
		int			m = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(v, key)));

		mask |= (uint32_t) m << (4 * i);
	}
	return mask & (uint32_t) PMH_VALID_MASK;
}

/* AVX2 comparison, eight slots per instruction. */
__attribute__((target("avx2")))
static uint32_t
match_avx2(const uint32_t *hashes, uint32_t hash)
{
	__m256i		key = _mm256_set1_epi32((int) hash);
	__m256i		v0 = _mm256_loadu_si256((const __m256i *) hashes);
	__m256i		v1 = _mm256_loadu_si256((const __m256i *) (hashes + 8));
	__m256i		v2 = _mm256_loadu_si256((const __m256i *) (hashes + 16));
	uint32_t	m0 = (uint32_t) _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(v0, key)));
	uint32_t	m1 = (uint32_t) _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(v1, key)));
	uint32_t	m2 = (uint32_t) _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(v2, key)));

	return (m0 | (m1 << 8) | (m2 << 16)) & (uint32_t) PMH_VALID_MASK;
}
#endif

/* Choose the best implementation for this CPU. */
static void
match_select(void)
{
	MatchFn		fn = match_scalar;
	const char *name = "scalar";

#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2"))
	{
		fn = match_avx2;
		name = "avx2";
	}
	else
	{
		fn = match_sse2;
		name = "sse2";
	}
#endif
	match_name = name;
	__atomic_store_n(&match_fn, fn, __ATOMIC_RELEASE);
}

/* First call: select, then compare. */
static uint32_t
match_dispatch(const uint32_t *hashes, uint32_t hash)
{
	match_select();
	return match_fn(hashes, hash);
}

/* Bit i of the result is set when slot i holds the given hash. */
uint32_t
pmh_match_hashes(const uint32_t *hashes, uint32_t hash)
{
	return match_fn(hashes, hash);
}

/* Name of the implementation in use. */
const char *
pmh_match_impl(void)
{
	if (match_fn == match_dispatch)
		match_select();
	return match_name;
}

/* Force the scalar implementation (for tests), or restore the best one. */
void
pmh_match_force_scalar(int scalar)
{
	if (scalar)
	{
		match_name = "scalar";
		__atomic_store_n(&match_fn, match_scalar, __ATOMIC_RELEASE);
	}
	else
		match_select();
}
