/*-------------------------------------------------------------------------
 *
 * pmelements.c
 *	  Element sets: the elements of a "= ANY(array)" condition, sorted by
 *	  hash code, and the comparison of a row's key with them.
 *
 * A scan compares a row's key only with the elements of the key's hash
 * code (src/README, Scans, VACUUM and TID reuse): a table indexed by the
 * top bits of a code, about one bit per doubling of the elements, says
 * where each value of those bits starts, so a lookup reads the table and
 * about one element.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmelements.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "pmhash.h"

/*
 * Make an element set of n elements sorted by hash code, which it takes.
 * The table is built by counting the elements of each value of the top
 * bits and summing the counts, which takes no branch per element or value.
 */
void
pmhash_element_set_make(PmhashElementSet *set, PmhashArrayElement *elements, int n)
{
	int			bits = 1;
	int			values;
	int		   *start;

	while (bits < 20 && (1 << bits) < n)
		bits++;
	values = 1 << bits;
	start = palloc0((values + 1) * sizeof(int));
	for (int i = 0; i < n; i++)
		start[(elements[i].hash >> (32 - bits)) + 1]++;
	for (int b = 0; b < values; b++)
		start[b + 1] += start[b];
	set->elements = elements;
	set->bits = bits;
	set->start = start;
}

/* Free an element set's table; its elements too if free_elements. */
void
pmhash_element_set_free(PmhashElementSet *set, bool free_elements)
{
	if (set->elements == NULL)
		return;
	if (free_elements)
		pfree(set->elements);
	pfree(set->start);
	set->elements = NULL;
}

/*
 * Whether value, a key of the index's one column, equals an element of
 * set by key's operator and collation (the array condition's).  Only
 * elements of value's hash code can: equal values hash alike in a hash
 * operator family.
 */
bool
pmhash_element_set_contains(Relation index, ScanKey key, const PmhashElementSet *set,
							Datum value)
{
	uint32		hash = pmhash_hash_key(index, &value, NULL);
	uint32		top = hash >> (32 - set->bits);

	for (int i = set->start[top]; i < set->start[top + 1]; i++)
	{
		if (set->elements[i].hash == hash &&
			DatumGetBool(FunctionCall2Coll(&key->sk_func, key->sk_collation,
										   value, set->elements[i].value)))
			return true;
	}
	return false;
}
