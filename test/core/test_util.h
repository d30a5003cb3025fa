/*-------------------------------------------------------------------------
 *
 * test_util.h
 *	  Shared parts of the core tests: the CHECK macro, random numbers, the
 *	  model of a test's entries and the check of a table against it, and
 *	  the tests themselves, one file per core module.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/core/test_util.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TEST_UTIL_H
#define TEST_UTIL_H

#include <stdio.h>

#include "memtable.h"

/* Set by a failed CHECK; cleared before each test. */
extern int	test_failed;

/* Check a condition; the first failure of a test prints where and why. */
#define CHECK(cond, ...) \
	do { \
		if (!(cond)) \
		{ \
			if (!test_failed) \
				fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__), \
				fprintf(stderr, __VA_ARGS__), fputc('\n', stderr); \
			test_failed = 1; \
		} \
	} while (0)

/* The entries a test has inserted, and which of them are deleted. */
typedef struct Model
{
	uint32_t   *hash;
	uint8_t    *dead;
	uint64_t	n;
	uint64_t	cap;
} Model;

extern void rnd_seed(uint64_t seed);
extern uint64_t rnd(void);
extern uint32_t mix(uint64_t k);
extern PmhTid tid_of(uint64_t i);
extern uint64_t index_of(PmhTid tid);
extern uint64_t model_add(Model *m, uint32_t hash);
extern void model_free(Model *m);
extern int	tid_cmp(const void *a, const void *b);
extern void check_found(const char *how, uint32_t hash, PmhTid *got, int ngot,
						PmhTid *want, int nwant);
extern void check_table(MemTable *mt, Model *m);
extern void free_table(MemTable *mt, Model *m);
extern void check_and_free(MemTable *mt, Model *m);
extern void add(MemTable *mt, Model *m, uint32_t hash);
extern int	entry_from(void *arg, uint32_t hash, PmhTid tid);
extern uint64_t delete_dead(MemTable *mt, Model *m);

/* test_match.c */
extern void test_match(void);

/* test_alloc.c */
extern void test_freemap(void);

/* test_rebuild.c */
extern void test_sort(void);
extern void test_shard_map(void);
extern void test_split_point(void);
extern void test_split(void);
extern void test_split_level(void);

/* test_codec.c */
extern void test_codec(void);

/* test_lookup.c */
extern void test_unique_keys(void);
extern void test_codes(void);
extern void test_clustered_hashes(void);
extern void test_overflow_ring(void);
extern void test_reader_race(void);

/* test_modify.c */
extern void test_heavy_duplicates(void);
extern void test_mixed_duplicates(void);
extern void test_deletes(void);
extern void test_unverified(void);
extern void test_replay(void);
extern void test_lost_overflow_bits(void);
extern void test_unfenced_slots(void);

/* test_crash.c */
extern void test_crashes(void);
extern void test_crashes_between_commits(void);
extern void test_crashes_over_leftovers(void);
extern void test_split_crashes(void);

/* test_verify.c */
extern void test_damage(void);
extern void test_checksums(void);

#endif
