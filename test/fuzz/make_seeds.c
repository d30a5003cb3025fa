/*-------------------------------------------------------------------------
 *
 * make_seeds.c
 *	  Write real index file images as the seed corpus of fuzz_file.
 *
 * Builds tables through the core, as the access method does (growth,
 * posting chains, deletes, shrinking), with and without checksums and with
 * several shard counts, and writes each image to a file in the directory
 * given as the argument.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/fuzz/make_seeds.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>

#include "../core/memtable.h"

/* Bulk-delete callback: every third entry is dead. */
static int
third_dead(void *arg, uint32_t hash, PmhTid tid)
{
	(void) arg;
	(void) hash;
	return tid.offset % 3 == 0;
}

/* Write a table's image to dir/seed-<n>. */
static void
write_image(const MemTable *mt, const char *dir, int n)
{
	char		path[4096];
	FILE	   *f;

	snprintf(path, sizeof(path), "%s/seed-%d", dir, n);
	f = fopen(path, "wb");
	if (f == NULL || fwrite(mt->live, PMH_UNIT_SIZE, mt->units, f) != mt->units || fclose(f) != 0)
	{
		perror(path);
		exit(1);
	}
}

/* Build the seed tables. */
int
main(int argc, char **argv)
{
	const uint32_t shard_bits[] = {0, 2, 4};
	const uint64_t entries[] = {40, 3000};
	int			n = 0;

	if (argc != 2)
	{
		fprintf(stderr, "usage: make_seeds DIR\n");
		return 2;
	}
	for (int checksums = 0; checksums <= 1; checksums++)
	{
		memtable_checksums = checksums;
		for (size_t b = 0; b < sizeof(shard_bits) / sizeof(shard_bits[0]); b++)
		{
			for (size_t e = 0; e < sizeof(entries) / sizeof(entries[0]); e++)
			{
				MemTable   *mt = memtable_create(shard_bits[b], 64, 0);
				PmhDeleteOps ops = {third_dead, NULL, NULL, NULL};

				for (uint64_t k = 0; k < entries[e]; k++)
				{
					/* a fifth of the entries share one key: posting chains */
					uint32_t	hash = k % 5 == 0 ? UINT32_C(0x12345678) :
						(uint32_t) (k * UINT64_C(0x9E3779B97F4A7C15) >> 32);

					memtable_insert(mt, hash, pmh_tid_make((uint32_t) (k / 200), (uint16_t) (k % 200 + 1)));
				}
				write_image(mt, argv[1], n++);
				memtable_bulk_delete(mt, &ops);
				write_image(mt, argv[1], n++);
				memtable_destroy(mt);
			}
		}
	}
	printf("%d seed files in %s\n", n, argv[1]);
	return 0;
}
