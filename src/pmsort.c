/*-------------------------------------------------------------------------
 *
 * pmsort.c
 *	  The sorts of index scans: array elements by hash code, hash codes,
 *	  heap TIDs in TID order.
 *
 * Arrays of thousands of keys are common ("= ANY" of a list an application
 * built), and so are the TIDs they find: small inputs go through
 * PostgreSQL's sort template, large ones through an LSD radix sort of
 * 64-bit numbers (src/README, Readers).
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmsort.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/itemptr.h"

#include "pmhash.h"

/*
 * Sorts specialized by PostgreSQL's sort template, with inlined
 * comparisons: a few array elements by hash code, hash codes, a few heap
 * TIDs.
 */
#define ST_SORT sort_few_elements
#define ST_ELEMENT_TYPE PmhashArrayElement
#define ST_COMPARE(a, b) (((a)->hash > (b)->hash) - ((a)->hash < (b)->hash))
#define ST_SCOPE static
#define ST_DEFINE
#include "lib/sort_template.h"

#define ST_SORT pmhash_sort_codes
#define ST_ELEMENT_TYPE uint32
#define ST_COMPARE(a, b) ((*(a) > *(b)) - (*(a) < *(b)))
#define ST_SCOPE
#define ST_DEFINE
#include "lib/sort_template.h"

/* A heap TID as one number, in TID order. */
static inline uint64
tid_order(const ItemPointerData *tid)
{
	return ((uint64) ItemPointerGetBlockNumberNoCheck(tid) << 16) |
		ItemPointerGetOffsetNumberNoCheck(tid);
}

#define ST_SORT sort_few_tids
#define ST_ELEMENT_TYPE ItemPointerData
#define ST_COMPARE(a, b) ((tid_order(a) > tid_order(b)) - (tid_order(a) < tid_order(b)))
#define ST_SCOPE static
#define ST_DEFINE
#include "lib/sort_template.h"

/*
 * Arrays of thousands of keys are common ("= ANY" of a list an application
 * built), and so are the TIDs they find: from this many on, their sorts
 * are radix sorts instead of comparison sorts.
 */
#define RADIX_SORT_MIN		256

/*
 * Sort n 64-bit numbers by their bits from 'from' up, in 8-bit passes of a
 * least-significant-digit radix sort (stable) through the scratch array;
 * a digit that is the same in every number (the high bytes of TIDs, say)
 * is found by one pass over them and gets no pass of its own, whose count
 * would add one to the same counter n times in a row.  Returns the array
 * that holds the result, numbers or scratch.
 */
static uint64 *
radix_sort(uint64 *numbers, uint64 *scratch, int n, int from)
{
	uint64		varying = 0;

	for (int i = 1; i < n; i++)
		varying |= numbers[i] ^ numbers[0];
	for (int shift = from; shift < 64; shift += 8)
	{
		int			start[257] = {0};
		uint64	   *swap;

		if (((varying >> shift) & 0xFF) == 0)
			continue;
		for (int i = 0; i < n; i++)
			start[((numbers[i] >> shift) & 0xFF) + 1]++;
		for (int b = 0; b < 256; b++)
			start[b + 1] += start[b];
		for (int i = 0; i < n; i++)
			scratch[start[(numbers[i] >> shift) & 0xFF]++] = numbers[i];
		swap = numbers;
		numbers = scratch;
		scratch = swap;
	}
	return numbers;
}

/*
 * Sort array elements by hash code: the radix sort orders each element's
 * code followed by its position, then the elements follow their positions.
 */
void
pmhash_sort_elements(PmhashArrayElement *elements, int n)
{
	uint64	   *numbers;
	uint64	   *sorted;
	PmhashArrayElement *copy;

	if (n < RADIX_SORT_MIN)
	{
		sort_few_elements(elements, n);
		return;
	}
	numbers = palloc(2 * n * sizeof(uint64));
	copy = palloc(n * sizeof(PmhashArrayElement));
	memcpy(copy, elements, n * sizeof(PmhashArrayElement));
	for (int i = 0; i < n; i++)
		numbers[i] = ((uint64) elements[i].hash << 32) | (uint32) i;
	sorted = radix_sort(numbers, numbers + n, n, 32);
	for (int i = 0; i < n; i++)
		elements[i] = copy[(uint32) sorted[i]];
	pfree(copy);
	pfree(numbers);
}

/* Sort n heap TIDs in TID order; returns how many distinct ones lead them. */
int
pmhash_sort_unique_tids(ItemPointer tids, int n)
{
	int			distinct = 0;

	if (n < 2)
		return n;
	if (n < RADIX_SORT_MIN)
	{
		sort_few_tids(tids, n);
		for (int i = 0; i < n; i++)
		{
			if (distinct == 0 || !ItemPointerEquals(&tids[distinct - 1], &tids[i]))
				tids[distinct++] = tids[i];
		}
	}
	else
	{
		uint64	   *numbers = palloc(2 * n * sizeof(uint64));
		uint64	   *sorted;

		for (int i = 0; i < n; i++)
			numbers[i] = tid_order(&tids[i]);
		sorted = radix_sort(numbers, numbers + n, n, 0);
		for (int i = 0; i < n; i++)
		{
			if (distinct > 0 && sorted[i] == sorted[i - 1])
				continue;
			ItemPointerSet(&tids[distinct], (BlockNumber) (sorted[i] >> 16),
						   (OffsetNumber) (sorted[i] & 0xFFFF));
			distinct++;
		}
		pfree(numbers);
	}
	return distinct;
}
