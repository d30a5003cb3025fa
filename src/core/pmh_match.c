/*-------------------------------------------------------------------------
 *
 * pmh_match.c
 *	  Compare a bucket's 28 slot tags with a probe's tag.
 *
 * The AVX2 version compares 32 lanes in two instructions, the SSE2 version
 * in four; the four lanes past the tag array read the start of the slot
 * array of the same bucket and are masked off.  The implementation is
 * chosen once, at first use, from what the CPU supports; a scalar loop
 * serves every other platform.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/core/pmh_match.c
 *
 *-------------------------------------------------------------------------
 */
#include <string.h>

#include "pmh_core.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

typedef uint32_t (*MatchFn) (const uint16_t *tags, uint16_t tag);

static uint32_t match_dispatch(const uint16_t *tags, uint16_t tag);

static MatchFn match_fn = match_dispatch;
static const char *match_name = "unselected";

/* Portable comparison, one slot at a time. */
static uint32_t
match_scalar(const uint16_t *tags, uint16_t tag)
{
	uint32_t	mask = 0;

	for (int i = 0; i < PMH_BUCKET_SLOTS; i++)
		mask |= (uint32_t) (tags[i] == tag) << i;
	return mask;
}

#if defined(__x86_64__)

/* SSE2 comparison, eight slots per instruction; SSE2 is baseline on x86-64. */
static uint32_t
match_sse2(const uint16_t *tags, uint16_t tag)
{
	__m128i		key = _mm_set1_epi16((short) tag);
	__m128i		c0 = _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *) tags), key);
	__m128i		c1 = _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *) (tags + 8)), key);
	__m128i		c2 = _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *) (tags + 16)), key);
	__m128i		c3 = _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *) (tags + 24)), key);
	uint32_t	low = (uint32_t) _mm_movemask_epi8(_mm_packs_epi16(c0, c1));
	uint32_t	high = (uint32_t) _mm_movemask_epi8(_mm_packs_epi16(c2, c3));

	return (low | (high << 16)) & (uint32_t) PMH_VALID_MASK;
}

/* AVX2 comparison, sixteen slots per instruction. */
__attribute__((target("avx2")))
static uint32_t
match_avx2(const uint16_t *tags, uint16_t tag)
{
	__m256i		key = _mm256_set1_epi16((short) tag);
	__m256i		c0 = _mm256_cmpeq_epi16(_mm256_loadu_si256((const __m256i *) tags), key);
	__m256i		c1 = _mm256_cmpeq_epi16(_mm256_loadu_si256((const __m256i *) (tags + 16)), key);

	/* packing interleaves the 128-bit halves; the permutation restores order */
	__m256i		packed = _mm256_permute4x64_epi64(_mm256_packs_epi16(c0, c1), 0xD8);

	return (uint32_t) _mm256_movemask_epi8(packed) & (uint32_t) PMH_VALID_MASK;
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
match_dispatch(const uint16_t *tags, uint16_t tag)
{
	match_select();
	return match_fn(tags, tag);
}

/* Bit i of the result is set when slot i has the given tag. */
uint32_t
pmh_match_tags(const uint16_t *tags, uint16_t tag)
{
	return match_fn(tags, tag);
}

/* Name of the implementation in use. */
const char *
pmh_match_impl(void)
{
	if (match_fn == match_dispatch)
		match_select();
	return match_name;
}

/*
 * Use the named implementation (for tests), or the best one for NULL.
 * Returns 0 if this CPU cannot run the named one.
 */
int
pmh_match_use(const char *name)
{
	if (name == NULL)
		match_select();
	else if (strcmp(name, "scalar") == 0)
	{
		match_name = "scalar";
		__atomic_store_n(&match_fn, match_scalar, __ATOMIC_RELEASE);
	}
#if defined(__x86_64__)
	else if (strcmp(name, "sse2") == 0)
	{
		match_name = "sse2";
		__atomic_store_n(&match_fn, match_sse2, __ATOMIC_RELEASE);
	}
	else if (strcmp(name, "avx2") == 0 && __builtin_cpu_supports("avx2"))
	{
		match_name = "avx2";
		__atomic_store_n(&match_fn, match_avx2, __ATOMIC_RELEASE);
	}
#endif
	else
		return 0;
	return 1;
}
