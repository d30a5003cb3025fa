/*-------------------------------------------------------------------------
 *
 * pmh_rebuild.c
 *	  Gather a shard's entries and lay them out as a new segment.
 *
 * Growth, shrinking, cleanup of overflow bits, creation of posting chains
 * and the bulk build all go through one path: gather (hash, TID) entries,
 * sort them, plan a geometry, and write a fresh segment image into space no
 * reader can see.  The caller logs the content (a REBUILD record, since a
 * standby places entries its own way), persists the image and publishes it
 * with a single descriptor store (src/README, Writers).
 *
 * Hash codes that occur more than PMH_CHAIN_THRESHOLD times move to posting
 * chains (contiguous posting blocks with half again as much room as they
 * need), and the bucket slot keeps only a reference.  Sorted input makes the
 * placement sequential: home buckets grow with the hash code.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/core/pmh_rebuild.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>

#include "pmh_internal.h"

/* sorting: at most 2^12 groups of about 4 entries; qsort for over 32 */
#define PMH_SORT_GROUP_BITS		12
#define PMH_SORT_GROUP_SIZE		4
#define PMH_SORT_INSERTION_MAX	32

/* Count live TIDs and occupied slots of a segment (writer side). */
void
pmh_segment_count(const PmhSegment *seg, PmhCounts *counts)
{
	uint32_t	nposting = seg->nposting;

	memset(counts, 0, sizeof(*counts));
	for (uint32_t b = 0; b < seg->nbuckets; b++)
	{
		const PmhBucket *bucket = pmh_bucket(seg, b);
		uint64_t	valid = bucket->commit & PMH_VALID_MASK;

		counts->slots += __builtin_popcountll(valid);
		while (valid)
		{
			int			i = __builtin_ctzll(valid);

			valid &= valid - 1;
			if (!pmh_is_chain_ref(pmh_slot_tid(bucket, i)))
			{
				counts->entries++;
				counts->unverified += (bucket->unverified >> i) & 1;
			}
		}
		if (bucket->lsn > counts->max_lsn)
			counts->max_lsn = bucket->lsn;
	}
	for (uint32_t j = 0; j < nposting; j++)
	{
		const PmhPosting *blk = pmh_posting(seg, (uint64_t) seg->nbuckets + 1 + j);
		uint64_t	valid = blk->commit & PMH_POSTING_VALID_MASK;

		counts->entries += __builtin_popcountll(valid);
		counts->unverified += __builtin_popcountll(valid & blk->unverified);
	}
}

/* The most entries a segment can hold: every bucket and posting slot. */
uint64_t
pmh_segment_capacity(const PmhSegment *seg)
{
	return (uint64_t) seg->nbuckets * PMH_BUCKET_SLOTS +
		(uint64_t) seg->nposting * PMH_POSTING_SLOTS;
}

/*
 * Copy every live entry of a segment into out (at most capacity of them),
 * and its highest bucket LSN into *max_lsn.  Returns the number of live
 * entries, or PMH_COLLECT_DAMAGED if a bucket or posting block disagrees
 * with its checksum (a rebuild must not make damage look sound).
 */
uint64_t
pmh_segment_collect(const PmhSegment *seg, PmhEntry *out, uint64_t capacity,
					uint64_t *max_lsn)
{
	uint64_t	n = 0;
	uint32_t	nposting = seg->nposting;
	uint32_t	shard = seg->shard;

	*max_lsn = 0;
	for (uint32_t b = 0; b < seg->nbuckets; b++)
	{
		const PmhBucket *bucket = pmh_bucket(seg, b);
		uint64_t	valid = bucket->commit & PMH_VALID_MASK;

		if (!pmh_bucket_sound(seg, bucket, bucket->commit))
			return PMH_COLLECT_DAMAGED;
		if (bucket->lsn > *max_lsn)
			*max_lsn = bucket->lsn;
		while (valid)
		{
			int			i = __builtin_ctzll(valid);
			PmhTid		tid = pmh_slot_tid(bucket, i);

			valid &= valid - 1;
			if (pmh_is_chain_ref(tid))
				continue;
			if (n < capacity)
			{
				out[n].hash = pmh_code_hash(pmh_slot_code(bucket, i), shard, seg->shard_bits);
				out[n].tid = tid;
				out[n].flags = ((bucket->unverified >> i) & 1) ? PMH_ENTRY_UNVERIFIED : 0;
			}
			n++;
		}
	}
	for (uint32_t j = 0, hash = 0; j < nposting; j++)
	{
		const PmhPosting *blk = pmh_posting(seg, (uint64_t) seg->nbuckets + 1 + j);
		uint64_t	valid = blk->commit & PMH_POSTING_VALID_MASK;

		if (!pmh_posting_sound(seg, blk, blk->commit))
			return PMH_COLLECT_DAMAGED;
		hash = blk->hash;
		while (valid)
		{
			int			i = __builtin_ctzll(valid);

			valid &= valid - 1;
			if (n < capacity)
			{
				out[n].hash = hash;
				out[n].tid = blk->tid[i];
				out[n].flags = ((blk->unverified >> i) & 1) ? PMH_ENTRY_UNVERIFIED : 0;
			}
			n++;
		}
	}
	return n;
}

/* qsort comparator for entries: hash order, then TID order. */
int
pmh_entry_cmp(const void *a, const void *b)
{
	const PmhEntry *x = a;
	const PmhEntry *y = b;

	if (x->hash != y->hash)
		return x->hash < y->hash ? -1 : 1;
	return pmh_tid_cmp(x->tid, y->tid);
}

/* Insertion-sort a few entries by hash, then TID. */
static void
insertion_sort(PmhEntry *entries, uint64_t count)
{
	for (uint64_t i = 1; i < count; i++)
	{
		PmhEntry	e = entries[i];
		uint64_t	j = i;

		while (j > 0 && pmh_entry_cmp(&e, &entries[j - 1]) < 0)
		{
			entries[j] = entries[j - 1];
			j--;
		}
		entries[j] = e;
	}
}

/*
 * Sort entries by hash, then TID, and drop exact duplicates.  scratch must
 * hold count entries.  Returns the number of distinct entries.
 *
 * One counting pass distributes the entries into up to 2^PMH_SORT_GROUP_BITS
 * groups by the top bits of their offset from the smallest hash, about
 * PMH_SORT_GROUP_SIZE entries a group, which then sort by insertion; a group
 * that ends up large (many copies of one hash, or clustered hashes) goes to
 * qsort instead.
 */
uint64_t
pmh_sort_entries(PmhEntry *entries, uint64_t count, PmhEntry *scratch)
{
	uint64_t	ends[(1 << PMH_SORT_GROUP_BITS) + 1];
	uint32_t	lo = UINT32_MAX;
	uint32_t	hi = 0;
	int			span_bits;
	int			group_bits = 0;
	int			shift;
	uint64_t	n = 0;

	if (count == 0)
		return 0;
	for (uint64_t i = 0; i < count; i++)
	{
		if (entries[i].hash < lo)
			lo = entries[i].hash;
		if (entries[i].hash > hi)
			hi = entries[i].hash;
	}
	span_bits = hi == lo ? 0 : 32 - __builtin_clz(hi - lo);
	while (group_bits < PMH_SORT_GROUP_BITS && group_bits < span_bits &&
		   (count >> group_bits) > PMH_SORT_GROUP_SIZE)
		group_bits++;
	shift = span_bits - group_bits;

	/* ends[g + 1] counts group g, then becomes where it starts, then ends */
	memset(ends, 0, ((1 << group_bits) + 1) * sizeof(uint64_t));
	for (uint64_t i = 0; i < count; i++)
		ends[((uint64_t) (entries[i].hash - lo) >> shift) + 1]++;
	for (int g = 0; g < 1 << group_bits; g++)
		ends[g + 1] += ends[g];
	for (uint64_t i = 0; i < count; i++)
		scratch[ends[(uint64_t) (entries[i].hash - lo) >> shift]++] = entries[i];

	for (int g = 0; g < 1 << group_bits; g++)
	{
		uint64_t	start = g == 0 ? 0 : ends[g - 1];
		uint64_t	size = ends[g] - start;

		if (size <= PMH_SORT_INSERTION_MAX)
			insertion_sort(scratch + start, size);
		else
			qsort(scratch + start, size, sizeof(PmhEntry), pmh_entry_cmp);
	}

	for (uint64_t k = 0; k < count; k++)
	{
		/* of two copies of an entry, keep one, verified if either was */
		if (n > 0 && scratch[k].hash == entries[n - 1].hash &&
			pmh_tid_equal(scratch[k].tid, entries[n - 1].tid))
		{
			entries[n - 1].flags &= scratch[k].flags;
			continue;
		}
		entries[n++] = scratch[k];
	}
	return n;
}

/*
 * Place an entry into a segment image that nobody else can see yet.
 *
 * Entries must arrive in code order, hence in home bucket order; *cursor
 * (0 before the first entry) remembers the bucket the last one went to.
 * Every bucket from an entry's home up to that bucket is then known to be
 * full and marked as overflowing, so the search starts at the later of the
 * two instead of walking the run.  Only a run that wraps past the last
 * bucket is walked, by pmh_image_place_run.
 */
static inline void
image_place(const PmhSegment *seg, uint32_t *cursor, uint32_t code, PmhTid tid,
			uint16_t flags, uint64_t lsn)
{
	uint32_t	nbuckets = seg->nbuckets;
	uint32_t	home = pmh_home_bucket(code, nbuckets);

	for (uint32_t b = home > *cursor ? home : *cursor; b < nbuckets; b++)
	{
		PmhBucket  *bucket = pmh_bucket(seg, b);
		uint64_t	valid = bucket->commit & PMH_VALID_MASK;

		if (valid != PMH_VALID_MASK)
		{
			/*
			 * from the last slot down: inserts take the free slots of
			 * the first line first (free_slot in pmh_modify.c), and
			 * those need one fence (pmh_flush_slot)
			 */
			int			i = 63 - __builtin_clzll(~valid & PMH_VALID_MASK);

			/* an image is private: no flushes, and its LSNs are set already */
			pmh_slot_set(bucket, i, code, tid);
			bucket->commit |= UINT64_C(1) << i;
			if (flags & PMH_ENTRY_UNVERIFIED)
				bucket->unverified |= UINT64_C(1) << i;
			*cursor = b;
			return;
		}
		bucket->commit |= PMH_OVERFLOW_BIT;
	}
	*cursor = nbuckets;
	pmh_image_place_run(seg, code, tid, flags, lsn);
}

/*
 * End of the posting chain group that starts at sorted entry i: the first
 * entry of another hash when entry i and the PMH_CHAIN_THRESHOLD after it
 * share a hash, else i.  Scanning the entries in order meets such a group
 * at its first entry; the entries of smaller groups return themselves.
 */
static inline uint64_t
chain_end(const PmhEntry *sorted, uint64_t count, uint64_t i)
{
	uint64_t	j = i + PMH_CHAIN_THRESHOLD;

	if (j >= count || sorted[j].hash != sorted[i].hash)
		return i;
	while (j < count && sorted[j].hash == sorted[i].hash)
		j++;
	return j;
}

/* Posting blocks for a chain of count TIDs, with room to grow. */
static uint64_t
chain_blocks(uint64_t count)
{
	return (count + count / 2 + PMH_POSTING_SLOTS - 1) / PMH_POSTING_SLOTS;
}

/* Chain references needed for a chain of nblocks blocks. */
static uint64_t
chain_refs(uint64_t nblocks)
{
	return (nblocks + PMH_MAX_CHAIN_BLOCKS - 1) / PMH_MAX_CHAIN_BLOCKS;
}

/*
 * Plan the geometry of a segment for sorted, distinct entries whose hashes
 * are canonical (pmh_canonical_hash).
 */
PmhLayout
pmh_plan_layout(const PmhEntry *sorted, uint64_t count, double fill)
{
	PmhLayout	layout;
	uint64_t	slots = 0;
	uint64_t	nposting = 0;
	uint64_t	nunverified = 0;
	uint64_t	nbuckets;

	for (uint64_t i = 0; i < count; i++)
		nunverified += (sorted[i].flags & PMH_ENTRY_UNVERIFIED) != 0;
	for (uint64_t i = 0; i < count;)
	{
		uint64_t	end = chain_end(sorted, count, i);

		if (end > i)
		{
			uint64_t	blocks = chain_blocks(end - i);

			nposting += blocks;
			slots += chain_refs(blocks);
			i = end;
		}
		else
		{
			slots++;
			i++;
		}
	}
	nbuckets = (uint64_t) ((double) slots / (PMH_BUCKET_SLOTS * fill)) + 1;
	if (nbuckets * PMH_BUCKET_SLOTS < slots)
		nbuckets = (slots + PMH_BUCKET_SLOTS - 1) / PMH_BUCKET_SLOTS;
	layout.nbuckets = (uint32_t) nbuckets;
	layout.nposting = (uint32_t) nposting;
	layout.nentries = count;
	layout.nslots = slots;
	layout.nunverified = nunverified;
	return layout;
}

/* Units a segment of this layout occupies. */
uint64_t
pmh_layout_units(const PmhLayout *layout)
{
	return 1 + (uint64_t) layout->nbuckets + layout->nposting;
}

/*
 * Fill the chains of one hash, spreading its TIDs evenly over the blocks so
 * that each keeps room for appends, and place a reference to each chain.
 */
static uint64_t
write_chains(const PmhSegment *seg, uint32_t *cursor, uint64_t next_unit,
			 const PmhEntry *group, uint64_t count, uint64_t lsn)
{
	uint64_t	total = chain_blocks(count);
	uint64_t	done = 0;
	uint16_t	ref_flags = 0;

	for (uint64_t k = 0; k < count; k++)
		ref_flags |= group[k].flags & PMH_ENTRY_UNVERIFIED;

	while (done < total)
	{
		uint64_t	left = total - done;
		uint64_t	nblocks = left < PMH_MAX_CHAIN_BLOCKS ? left : PMH_MAX_CHAIN_BLOCKS;
		PmhPosting *first = pmh_posting(seg, next_unit);

		for (uint64_t j = 0; j < nblocks; j++)
		{
			PmhPosting *blk = first + j;
			uint64_t	b = done + j;
			uint64_t	from = count * b / total;
			uint64_t	to = count * (b + 1) / total;
			uint64_t	valid = 0;

			blk->hash = group[0].hash;
			blk->lsn = lsn;
			for (uint64_t k = from; k < to; k++)
			{
				blk->tid[k - from] = group[k].tid;
				valid |= UINT64_C(1) << (k - from);
				if (group[k].flags & PMH_ENTRY_UNVERIFIED)
					blk->unverified |= UINT64_C(1) << (k - from);
			}
			blk->commit = valid;
		}
		first->nblocks = (uint16_t) nblocks;
		first->cursor = 0;
		image_place(seg, cursor, pmh_hash_code(group[0].hash, seg->shard_bits),
					pmh_tid_make((uint32_t) next_unit, 0), ref_flags, lsn);
		next_unit += nblocks;
		done += nblocks;
	}
	return next_unit;
}

/*
 * Write a segment image for sorted, distinct entries with canonical hashes
 * into dst, which must span pmh_layout_units(layout) units that no reader
 * can see; checksum_seed nonzero: seal every bucket and posting block.
 */
void
pmh_segment_write(char *dst, const PmhLayout *layout, const PmhEntry *sorted,
				  uint64_t count, uint32_t shard, uint32_t shard_bits,
				  uint64_t file_generation, uint64_t checksum_seed, uint64_t generation,
				  uint64_t lsn)
{
	PmhSegment	seg = {.base = dst, .shard = shard, .shard_bits = shard_bits,
		.nbuckets = layout->nbuckets, .nposting = layout->nposting,
	.limit = pmh_layout_units(layout)};
	PmhSegmentHeader *hdr = (PmhSegmentHeader *) dst;
	uint64_t	next_unit = (uint64_t) layout->nbuckets + 1;
	uint32_t	cursor = 0;

	memset(dst, 0, pmh_layout_units(layout) * PMH_UNIT_SIZE);
	hdr->magic = PMH_SEGMENT_MAGIC;
	hdr->file_generation = file_generation;
	hdr->generation = generation;
	hdr->max_lsn = lsn;
	hdr->shard = shard;
	hdr->shard_bits = shard_bits;
	hdr->nbuckets = layout->nbuckets;
	hdr->nposting = layout->nposting;
	for (uint32_t b = 0; b < layout->nbuckets; b++)
		pmh_bucket(&seg, b)->lsn = lsn;

	for (uint64_t i = 0; i < count;)
	{
		uint64_t	end = chain_end(sorted, count, i);

		if (end > i)
		{
			next_unit = write_chains(&seg, &cursor, next_unit, sorted + i, end - i, lsn);
			i = end;
		}
		else
		{
			image_place(&seg, &cursor, pmh_hash_code(sorted[i].hash, shard_bits),
						sorted[i].tid, sorted[i].flags, lsn);
			i++;
		}
	}
	/* the sequence numbers start at zero; placement bumped them */
	for (uint32_t b = 0; b < layout->nbuckets; b++)
		pmh_bucket(&seg, b)->commit &= PMH_SEQ_ONE - 1;
	seg.checksum_seed = checksum_seed;
	for (uint32_t b = 0; b < layout->nbuckets; b++)
		pmh_bucket_seal(&seg, pmh_bucket(&seg, b));
	for (uint32_t j = 0; j < layout->nposting; j++)
		pmh_posting_seal(&seg, pmh_posting(&seg, (uint64_t) layout->nbuckets + 1 + j), NULL);
	hdr->checksum = pmh_segment_checksum(hdr);
}

/*
 * Where sorted entries of a shard at depth shard_bits (9 or more, so that
 * their hashes are whole) divide between its halves one bit deeper: the
 * number of entries whose next hash bit is 0, which come first.
 */
uint64_t
pmh_split_point(const PmhEntry *sorted, uint64_t count, uint32_t shard_bits)
{
	uint32_t	bit = UINT32_C(1) << (31 - shard_bits);
	uint64_t	lo = 0;
	uint64_t	hi = count;

	while (lo < hi)
	{
		uint64_t	mid = lo + (hi - lo) / 2;

		if (sorted[mid].hash & bit)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* Whether a shard with this many occupied slots must grow before an insert. */
int
pmh_needs_growth(uint64_t slots, uint32_t nbuckets)
{
	return (double) (slots + 1) > (double) nbuckets * PMH_BUCKET_SLOTS * PMH_GROW_FILL;
}

/* Whether a segment is so empty that rebuilding it smaller is worth it. */
int
pmh_needs_shrink(const PmhCounts *counts, const PmhSegment *seg)
{
	if (seg->nbuckets <= 1 && seg->nposting == 0)
		return 0;
	return (double) counts->entries < (double) pmh_segment_capacity(seg) * PMH_SHRINK_FILL;
}
