/*-------------------------------------------------------------------------
 *
 * test_main.c
 *	  Unit tests of the PostgreSQL-free pmhash core: runs every test and
 *	  prints a TAP-like line for each.
 *
 * Each test compares the table with a model (every entry it was given),
 * verifies the structure, and is counted once as passed or failed; the
 * table tests run once without checksums and once with.  The tests are in
 * one file per core module (test_lookup.c, test_modify.c, ...), their
 * shared parts in test_util.c.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/core/test_main.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>

#include "test_util.h"

static int	passed;
static int	failed;

/* A test and the name its TAP line gives it. */
typedef struct TestCase
{
	const char *name;
	void		(*fn) (void);
} TestCase;

/*
 * Run one test and print its TAP line.  Each test starts its random numbers
 * from its own seed, so that a failure repeats whatever ran before it (the
 * reader race draws as many as its timing allows); PMHASH_CORE_SEED picks
 * other seeds.
 */
static void
run_test(const TestCase *test, const char *suffix)
{
	const char *base = getenv("PMHASH_CORE_SEED");
	uint64_t	seed = (base ? strtoull(base, NULL, 10) : 1) * 1000 + passed + failed + 1;

	test_failed = 0;
	rnd_seed(seed * 0x9E3779B97F4A7C15ULL);
	test->fn();
	printf("%s %d - core %s%s\n", test_failed ? "not ok" : "ok", passed + failed + 1,
		   test->name, suffix);
	if (test_failed)
		printf("# seed of that test: PMHASH_CORE_SEED=%s\n", base ? base : "1");
	if (test_failed)
		failed++;
	else
		passed++;
}

/* Run every test, the table tests a second time with checksums, and count. */
int
main(void)
{
	TestCase	tests[] = {
		{"match", test_match},
		{"freemap", test_freemap},
		{"sort", test_sort},
		{"shard map", test_shard_map},
		{"split point", test_split_point},
		{"codec", test_codec},
		{"checksums", test_checksums},
		/* from here on, once without checksums and once with */
		{"unique_keys", test_unique_keys},
		{"codes", test_codes},
		{"heavy_duplicates", test_heavy_duplicates},
		{"mixed_duplicates", test_mixed_duplicates},
		{"deletes", test_deletes},
		{"clustered_hashes", test_clustered_hashes},
		{"overflow ring", test_overflow_ring},
		{"crashes", test_crashes},
		{"crashes between commits", test_crashes_between_commits},
		{"crashes over leftovers", test_crashes_over_leftovers},
		{"split crashes", test_split_crashes},
		{"damage", test_damage},
		{"reader_race", test_reader_race},
		{"unverified", test_unverified},
		{"replay", test_replay},
		{"split", test_split},
		{"split level", test_split_level},
		{"lost overflow bits", test_lost_overflow_bits},
		{"unfenced slots", test_unfenced_slots},
	};
	const size_t ntests = sizeof(tests) / sizeof(tests[0]);
	const size_t first_table_test = 5;

	printf("# hash comparison: %s\n", pmh_match_impl());
	for (size_t i = 0; i < ntests; i++)
	{
		memtable_checksums = 0;
		run_test(&tests[i], "");
	}
	for (size_t i = first_table_test; i < ntests; i++)
	{
		memtable_checksums = 1;
		run_test(&tests[i], " with checksums");
	}
	printf("1..%d\n", passed + failed);
	printf("core: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
