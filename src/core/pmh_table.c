/*-------------------------------------------------------------------------
 *
 * pmh_table.c
 *	  Shard-level operations over a whole pmhash file: insert with growth,
 *	  rebuild, and publication of segments through their descriptors.
 *
 * The caller supplies memory, file space and the shared mirror
 * through PmhTableOps, and holds the shard's writer lock around every call.
 * A rebuild writes its new segment into unpublished space, persists it,
 * stores the new descriptor in the file's descriptors (one 8-byte store),
 * persists that, shows it to readers through the mirror, and only then logs
 * the content.  The persist callback may make the segment durable at once
 * or leave it to a later sync.  The old segment is handed back to the
 * caller, who frees it once no reader can still be inside it.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/core/pmh_table.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmh_internal.h"

/* Address of a unit in the current mapping. */
static char *
unit_address(const PmhTable *t, uint64_t unit)
{
	return t->ops->base(t->ops->arg) + unit * PMH_UNIT_SIZE;
}

/*
 * The segments that the shards of n slots publish, given their
 * publications from a mirror, in the current mapping, which is read once;
 * a descriptor of 0 (an empty shard) gives a segment of no buckets.
 */
void
pmh_table_segments(const PmhTable *t, const uint32_t *slots, const PmhPublication *pubs,
				   int n, PmhSegment *segs)
{
	char	   *base = t->ops->base(t->ops->arg);
	uint64_t	mapped = t->ops->mapped_units ? t->ops->mapped_units(t->ops->arg) : UINT64_MAX;

	for (int k = 0; k < n; k++)
	{
		uint64_t	unit = pmh_desc_unit(pubs[k].desc);

		segs[k].base = base + unit * PMH_UNIT_SIZE;
		segs[k].unit = unit;
		segs[k].slot = slots[k];
		segs[k].shard = pmh_slot_shard(slots[k], pubs[k].depth);
		segs[k].shard_bits = pubs[k].depth;
		segs[k].nbuckets = unit == 0 ? 0 : pmh_desc_nbuckets(pubs[k].desc);
		segs[k].nposting = unit == 0 ? 0 : pubs[k].nposting;
		segs[k].limit = mapped > unit ? mapped - unit : 0;
		segs[k].checksum_seed = t->checksums ? t->file_generation : 0;
	}
}

/* The segment the shard of a slot publishes, in the current mapping. */
void
pmh_table_segment(const PmhTable *t, uint32_t slot, const PmhPublication *pub, PmhSegment *seg)
{
	pmh_table_segments(t, &slot, pub, 1, seg);
}

/*
 * The descriptor array of the file, where the map in its header puts it
 * (a split that ends a level moves it, with every writer locked out).
 */
uint64_t *
pmh_table_descriptors(const PmhTable *t)
{
	const PmhFileHeader *hdr = (const PmhFileHeader *) unit_address(t, 0);

	return (uint64_t *) unit_address(t, pmh_map_desc_unit(__atomic_load_n(&hdr->shard_map,
																			__ATOMIC_ACQUIRE)));
}

/* Store a slot's descriptor in the file, make it durable, show it to readers. */
static void
publish(const PmhTable *t, uint32_t slot, const PmhPublication *pub)
{
	uint64_t   *dir;

	if (t->ops->lock_descriptors)
		t->ops->lock_descriptors(t->ops->arg, 0);
	dir = pmh_table_descriptors(t);
	pmh_store_release(&dir[slot], pub->desc);
	pmh_persist(t->persist, &dir[slot], sizeof(uint64_t));
	if (t->ops->unlock_descriptors)
		t->ops->unlock_descriptors(t->ops->arg);
	t->ops->publish(t->ops->arg, slot, pub);
}

/*
 * Write sorted, distinct entries with canonical hashes as a new segment of
 * shard (a top-bit prefix of depth shard_bits) in unpublished file space,
 * and persist it: what its slot is to publish goes to *pub (no descriptor
 * for no entries), its counts to *counts.  PMH_FULL, leaving both as they
 * were, if it is too large or the file has no room.
 */
static PmhStatus
write_segment(const PmhTable *t, const PmhEntry *sorted, uint64_t n, uint32_t shard,
			  uint32_t shard_bits, double fill, uint64_t generation, uint64_t lsn,
			  PmhPublication *pub, PmhCounts *counts)
{
	PmhLayout	layout;
	uint64_t	unit;
	char	   *dst;

	if (n == 0)
	{
		memset(counts, 0, sizeof(*counts));
		pub->desc = 0;
		pub->nposting = 0;
		pub->depth = shard_bits;
		return PMH_OK;
	}
	layout = pmh_plan_layout(sorted, n, fill);
	if (layout.nbuckets > PMH_MAX_SEGMENT_BUCKETS ||
		layout.nposting > PMH_MAX_SEGMENT_POSTING ||
		(unit = t->ops->alloc_space(t->ops->arg, pmh_layout_units(&layout))) == 0)
		return PMH_FULL;
	dst = unit_address(t, unit);
	pmh_segment_write(dst, &layout, sorted, n, shard, shard_bits, t->file_generation,
					  t->checksums ? t->file_generation : 0, generation, lsn);
	pmh_persist(t->persist, dst, pmh_layout_units(&layout) * PMH_UNIT_SIZE);
	/* what pmh_segment_count would find in the image just written */
	memset(counts, 0, sizeof(*counts));
	counts->entries = layout.nentries;
	counts->slots = layout.nslots;
	counts->unverified = layout.nunverified;
	counts->max_lsn = lsn;
	pub->desc = pmh_desc_make(unit, layout.nbuckets);
	pub->nposting = layout.nposting;
	pub->depth = shard_bits;
	return PMH_OK;
}

/*
 * Collect the live entries of a shard's segment into a new array of room
 * for extra more entries (the segment's capacity bounds them when dense,
 * else they are counted first), raising *lsn to the segment's highest
 * stamp; NULL if a unit disagrees with its checksums.  *n receives the
 * number collected, *room the array's size.
 */
static PmhEntry *
collect_segment(const PmhTable *t, const PmhSegment *seg, uint64_t extra, int dense,
				uint64_t *lsn, uint64_t *n, uint64_t *room)
{
	uint64_t	total = extra;
	uint64_t	old_max_lsn = 0;
	PmhEntry   *work;

	*n = 0;
	if (seg->unit != 0)
	{
		if (dense)
			total += pmh_segment_capacity(seg);
		else
		{
			PmhCounts	old_counts;

			pmh_segment_count(seg, &old_counts);
			total += old_counts.entries;
		}
	}
	work = t->ops->alloc_memory(t->ops->arg, (total ? total : 1) * sizeof(PmhEntry));
	if (seg->unit != 0)
		*n = pmh_segment_collect(seg, work, total - extra, &old_max_lsn);
	if (*n == PMH_COLLECT_DAMAGED || *n + extra > total)
	{
		t->ops->free_memory(t->ops->arg, work);
		return NULL;
	}
	if (old_max_lsn > *lsn)
		*lsn = old_max_lsn;
	*room = total;
	return work;
}

/*
 * The live entries of a shard's segment, sorted by hash, in a new array
 * (*n of them), raising *lsn to the segment's highest stamp; NULL if a unit
 * disagrees with its checksums.
 */
static PmhEntry *
sorted_segment(const PmhTable *t, const PmhSegment *seg, uint64_t *lsn, uint64_t *n)
{
	uint64_t	room;
	PmhEntry   *work = collect_segment(t, seg, 0, 0, lsn, n, &room);
	PmhEntry   *scratch;

	if (work == NULL)
		return NULL;
	scratch = t->ops->alloc_memory(t->ops->arg, (room ? room : 1) * sizeof(PmhEntry));
	*n = pmh_sort_entries(work, *n, scratch);
	t->ops->free_memory(t->ops->arg, scratch);
	return work;
}

/*
 * pmh_table_rebuild, where dense says that the old segment is nearly full
 * (a shard that must grow), so that its capacity bounds its entries closely
 * enough to size the work arrays without counting them first.
 */
static PmhStatus
rebuild_shard(const PmhTable *t, const PmhSegment *seg, const PmhEntry *extra,
			  uint64_t nextra, int replace, int dense, double fill, uint64_t lsn,
			  PmhCounts *counts)
{
	const PmhTableOps *ops = t->ops;
	PmhEntry   *work;
	PmhEntry   *scratch;
	uint64_t	n = 0;
	uint64_t	room = nextra;
	uint64_t	generation = 1;
	PmhPublication pub;

	/* informational only: a damaged value does no harm */
	if (seg->unit != 0)
		generation = pmh_segment_header(seg)->generation + 1;
	if (replace)
		work = ops->alloc_memory(ops->arg, (nextra ? nextra : 1) * sizeof(PmhEntry));
	else if ((work = collect_segment(t, seg, nextra, dense, &lsn, &n, &room)) == NULL)
		return PMH_CORRUPT;
	if (replace && seg->unit != 0)
	{
		PmhCounts	old_counts;

		pmh_segment_count(seg, &old_counts);
		if (old_counts.max_lsn > lsn)
			lsn = old_counts.max_lsn;
	}
	scratch = ops->alloc_memory(ops->arg, (room ? room : 1) * sizeof(PmhEntry));
	for (uint64_t k = 0; k < nextra; k++)
	{
		/* a record of the shard from before a split names both halves' */
		if (pmh_shard_of(extra[k].hash, seg->shard_bits) != seg->shard)
			continue;
		work[n] = extra[k];
		work[n++].hash = pmh_canonical_hash(extra[k].hash, seg->shard_bits);
	}
	n = pmh_sort_entries(work, n, scratch);
	ops->free_memory(ops->arg, scratch);

	if (write_segment(t, work, n, seg->shard, seg->shard_bits, fill, generation, lsn, &pub,
					  counts) != PMH_OK)
	{
		ops->free_memory(ops->arg, work);
		return PMH_FULL;
	}
	publish(t, seg->slot, &pub);

	/*
	 * Logged after the segment and its descriptor are durable (the persist
	 * callback must not defer them: nothing else orders the descriptor
	 * after the segment on the medium) and published.  The segment is
	 * stamped with the caller's position from before the change, as an
	 * insert is.
	 */
	if (ops->log_rebuild)
		ops->log_rebuild(ops->arg, seg->slot, work, n, fill);
	ops->free_memory(ops->arg, work);
	if (seg->unit != 0)
		ops->free_space(ops->arg, seg->unit, 1 + (uint64_t) seg->nbuckets + seg->nposting);
	return PMH_OK;
}

/*
 * Rebuild a shard from its current segment (seg, of no buckets if none)
 * plus extra entries, or from the extra entries alone if replace is set, at
 * the given bucket fill.  Extra entries outside the segment's shard are
 * left out: replay may bring the entries of a shard split since.  The
 * content is logged through log_rebuild when the caller asks for it.
 * counts receives the new content.
 */
PmhStatus
pmh_table_rebuild(const PmhTable *t, const PmhSegment *seg, const PmhEntry *extra,
				  uint64_t nextra, int replace, double fill, uint64_t lsn, PmhCounts *counts)
{
	return rebuild_shard(t, seg, extra, nextra, replace, 0, fill, lsn, counts);
}

/*
 * Move the descriptor array of map to the units at unit (room for those of
 * next, its map after a split that ends its level), with every writer of
 * descriptors locked out, and store next, pointing there, in the file
 * header: the copy is made durable before the map names it.  Returns the
 * map stored.
 */
static uint64_t
move_descriptors(const PmhTable *t, uint64_t map, uint64_t next, uint64_t unit)
{
	const PmhTableOps *ops = t->ops;
	uint64_t	moved = pmh_map_make(pmh_map_level(next), pmh_map_split(next), unit);
	size_t		old_bytes = (size_t) pmh_map_room(map) * sizeof(uint64_t);
	size_t		new_bytes = (size_t) pmh_map_room(moved) * sizeof(uint64_t);
	char	   *to = unit_address(t, unit);
	uint64_t   *file_map = &((PmhFileHeader *) unit_address(t, 0))->shard_map;

	if (ops->lock_descriptors)
		ops->lock_descriptors(ops->arg, 1);
	memcpy(to, unit_address(t, pmh_map_desc_unit(map)), old_bytes);
	memset(to + old_bytes, 0, new_bytes - old_bytes);
	pmh_persist(t->persist, to, new_bytes);
	pmh_store_release(file_map, moved);
	pmh_persist(t->persist, file_map, sizeof(uint64_t));
	ops->publish_map(ops->arg, moved);
	if (ops->unlock_descriptors)
		ops->unlock_descriptors(ops->arg);
	return moved;
}

/*
 * Split the shard at a map word's split pointer (seg, of depth 9 or more):
 * the keys whose next hash bit is 0 stay in its slot p, those whose next
 * bit is 1 go to slot p + 2^level, both one bit deeper.  Both halves are
 * written into unpublished space and made durable; then the upper half is
 * published, where no reader looks yet; then the file's map word moves on
 * (made durable, and shown to readers through publish_map), which sends
 * the upper keys there; then the lower half replaces the old segment.
 * Until then the old segment still answers for the lower keys, and no
 * writer can change the shard (the caller holds the locks of both slots).
 * The shard's entries are logged through log_split, and the old segment is
 * handed back.  The halves' counts go to low and high.  A split that ends
 * its level moves the descriptors to an array of twice the room with the
 * map's move (move_descriptors) and frees the old array after.  PMH_FULL
 * if the shard cannot split (fewer than 9 bits, the last level, or no
 * space for the halves or the array).
 */
PmhStatus
pmh_table_split(const PmhTable *t, const PmhSegment *seg, uint64_t map, uint64_t lsn,
				PmhCounts *low, PmhCounts *high)
{
	const PmhTableOps *ops = t->ops;
	uint32_t	level = pmh_map_level(map);
	uint32_t	high_slot = pmh_map_split(map) + (UINT32_C(1) << level);
	uint64_t	next = pmh_map_next(map);
	uint64_t   *file_map;
	PmhEntry   *work;
	uint64_t	n;
	uint64_t	point;
	uint64_t	generation = seg->unit ? pmh_segment_header(seg)->generation + 1 : 1;
	PmhPublication pub[2] = {{0, 0, 0}, {0, 0, 0}};
	PmhCounts	counts[2];
	uint64_t	new_dir = 0;
	uint64_t	new_dir_units = pmh_map_descriptor_units(next);

	if (level < 9 || level >= PMH_MAX_SHARD_BITS || seg->slot != pmh_map_split(map) ||
		seg->shard_bits != level || high_slot >= pmh_map_room(map))
		return PMH_FULL;
	if (pmh_map_room(next) > pmh_map_room(map) &&
		(new_dir = ops->alloc_space(ops->arg, new_dir_units)) == 0)
		return PMH_FULL;
	if ((work = sorted_segment(t, seg, &lsn, &n)) == NULL)
	{
		if (new_dir != 0)
			ops->free_space(ops->arg, new_dir, new_dir_units);
		return PMH_CORRUPT;
	}
	point = pmh_split_point(work, n, level);
	if (write_segment(t, work, point, seg->shard << 1, level + 1, PMH_REBUILD_FILL, generation,
					  lsn, &pub[0], &counts[0]) != PMH_OK ||
		write_segment(t, work + point, n - point, (seg->shard << 1) | 1, level + 1,
					  PMH_REBUILD_FILL, generation, lsn, &pub[1], &counts[1]) != PMH_OK)
	{
		if (pub[0].desc != 0)
			ops->free_space(ops->arg, pmh_desc_unit(pub[0].desc),
							1 + (uint64_t) pmh_desc_nbuckets(pub[0].desc) + pub[0].nposting);
		if (new_dir != 0)
			ops->free_space(ops->arg, new_dir, new_dir_units);
		ops->free_memory(ops->arg, work);
		return PMH_FULL;
	}
	publish(t, high_slot, &pub[1]);
	if (new_dir != 0)
		next = move_descriptors(t, map, next, new_dir);
	else
	{
		/* after the writes: allocating space may have moved the mapping */
		file_map = &((PmhFileHeader *) unit_address(t, 0))->shard_map;
		pmh_store_release(file_map, next);
		pmh_persist(t->persist, file_map, sizeof(uint64_t));
		ops->publish_map(ops->arg, next);
	}
	publish(t, seg->slot, &pub[0]);
	if (ops->log_split)
		ops->log_split(ops->arg, seg->slot, map, work, n);
	ops->free_memory(ops->arg, work);
	if (new_dir != 0)
		ops->free_space(ops->arg, pmh_map_desc_unit(map), pmh_map_descriptor_units(map));
	if (seg->unit != 0)
		ops->free_space(ops->arg, seg->unit, 1 + (uint64_t) seg->nbuckets + seg->nposting);
	*low = counts[0];
	*high = counts[1];
	return PMH_OK;
}

/*
 * Finish a split that a crash cut short between its map store and the
 * publication of its lower half (pmh_table_split): seg, the old segment,
 * one bit shallower than the map says its low slot is, still holds both
 * halves; its upper half is complete in its own slot, so the lower half
 * alone replaces it.  Not logged: replay of the split's record, if any,
 * does the same.  The lower half's counts go to counts.
 */
PmhStatus
pmh_table_finish_split(const PmhTable *t, const PmhSegment *seg, uint64_t lsn,
					   PmhCounts *counts)
{
	const PmhTableOps *ops = t->ops;
	PmhEntry   *work;
	uint64_t	n;
	uint64_t	generation = seg->unit ? pmh_segment_header(seg)->generation + 1 : 1;
	PmhPublication pub;

	if ((work = sorted_segment(t, seg, &lsn, &n)) == NULL)
		return PMH_CORRUPT;
	n = pmh_split_point(work, n, seg->shard_bits);
	if (write_segment(t, work, n, seg->shard << 1, seg->shard_bits + 1, PMH_REBUILD_FILL,
					  generation, lsn, &pub, counts) != PMH_OK)
	{
		ops->free_memory(ops->arg, work);
		return PMH_FULL;
	}
	publish(t, seg->slot, &pub);
	ops->free_memory(ops->arg, work);
	if (seg->unit != 0)
		ops->free_space(ops->arg, seg->unit, 1 + (uint64_t) seg->nbuckets + seg->nposting);
	return PMH_OK;
}

/*
 * Insert one entry into a shard whose segment and counts the caller read
 * under the shard lock, growing or rebuilding the shard when needed.
 */
PmhStatus
pmh_table_insert(const PmhTable *t, const PmhSegment *seg, PmhCounts *counts,
				 uint32_t hash, PmhTid tid, uint64_t lsn, PmhInsertMode mode, uint64_t since)
{
	PmhEntry	entry;
	PmhStatus	st;
	unsigned	effects;

	if (seg->unit != 0 && !pmh_needs_growth(counts->slots, seg->nbuckets))
	{
		st = pmh_insert(seg, hash, tid, lsn, t->persist, mode, since, &effects);
		if (st == PMH_OK)
		{
			counts->entries++;
			counts->slots += (effects & PMH_USED_SLOT) != 0;
			if (lsn > counts->max_lsn)
				counts->max_lsn = lsn;
		}
		if ((effects & PMH_CONFIRMED) && counts->unverified > 0)
			counts->unverified--;
		if (st != PMH_FULL)
			return st;
	}
	entry.hash = hash;
	entry.tid = tid;
	entry.flags = 0;
	return rebuild_shard(t, seg, &entry, 1, 0, 1, PMH_REBUILD_FILL, lsn, counts);
}

/* qsort comparator: extents by unit. */
static int
extent_cmp(const void *a, const void *b)
{
	uint64_t	x = ((const PmhExtent *) a)->unit;
	uint64_t	y = ((const PmhExtent *) b)->unit;

	return x < y ? -1 : x > y;
}

/*
 * Check one descriptor read from the file for a shard of the given depth,
 * of a map whose descriptor array must not overlap it; NULL if it
 * publishes a sound segment, which *pub then describes.
 */
static const char *
check_descriptor(const PmhTable *t, uint64_t map, uint32_t slot, uint32_t depth, uint64_t desc,
				 uint64_t file_units, PmhPublication *pub, char *msg, size_t msglen)
{
	uint64_t	unit = pmh_desc_unit(desc);
	uint32_t	nbuckets = pmh_desc_nbuckets(desc);
	uint64_t	dir_unit = pmh_map_desc_unit(map);
	PmhSegmentHeader hdr;

	if (unit < PMH_HEADER_UNITS || nbuckets == 0 || unit + 1 + nbuckets > file_units ||
		(unit < dir_unit + pmh_map_descriptor_units(map) && dir_unit < unit + 1 + nbuckets))
	{
		snprintf(msg, msglen, "shard %u: descriptor points outside the file", slot);
		return msg;
	}
	/* a private copy: what is checked is what is used */
	memcpy(&hdr, unit_address(t, unit), sizeof(hdr));
	if (hdr.magic != PMH_SEGMENT_MAGIC || hdr.checksum != pmh_segment_checksum(&hdr) ||
		hdr.shard != pmh_slot_shard(slot, depth) || hdr.shard_bits != depth ||
		hdr.nbuckets != nbuckets ||
		hdr.file_generation != t->file_generation || hdr.nposting > PMH_MAX_SEGMENT_POSTING ||
		unit + 1 + (uint64_t) nbuckets + hdr.nposting > file_units)
	{
		snprintf(msg, msglen, "shard %u: segment at unit %llu is damaged", slot,
				 (unsigned long long) unit);
		return msg;
	}
	pub->desc = desc;
	pub->nposting = hdr.nposting;
	pub->depth = hdr.shard_bits;
	return NULL;
}

/*
 * Rebuild the volatile state of a file from its descriptors and its shard
 * map (as read from its checked header): report every slot's publication
 * and counts to visit, and fill the free map with the gaps between
 * published segments.  NULL on success, else
 * msg describing the first damage.  When lenient (during recovery, where a
 * base backup may have copied a shard mid-rebuild and replay will replace
 * it), a shard whose segment fails validation is reported broken and left
 * out instead.  The table's geometry must come from a checked file header.
 */
const char *
pmh_table_attach(const PmhTable *t, uint64_t shard_map, uint64_t file_units, PmhFreeMap *map,
				 int lenient,
				 void (*visit) (void *arg, uint32_t slot, const PmhPublication *pub,
								const PmhCounts *counts, int broken),
				 void *arg, char *msg, size_t msglen)
{
	const PmhTableOps *ops = t->ops;
	const uint64_t *dir = (const uint64_t *) unit_address(t, pmh_map_desc_unit(shard_map));
	uint32_t	nshards = pmh_map_slots(shard_map);
	PmhExtent  *segs = ops->alloc_memory(ops->arg, (nshards + 1) * sizeof(PmhExtent));
	uint32_t	nsegs = 0;
	uint64_t	next = PMH_HEADER_UNITS;
	const char *err = NULL;
	PmhCounts	none;

	memset(&none, 0, sizeof(none));
	for (uint32_t s = 0; s < nshards && err == NULL; s++)
	{
		uint64_t	desc = __atomic_load_n(&dir[s], __ATOMIC_ACQUIRE);
		uint32_t	depth = pmh_map_depth(shard_map, s);
		PmhPublication pub = {0, 0, depth};
		PmhCounts	counts;
		PmhSegment	seg;

		memset(&counts, 0, sizeof(counts));
		if (desc != 0)
		{
			/*
			 * A crash between a split's map store and its lower half's
			 * publication leaves the old segment, one bit shallower, in
			 * the low slot: reported with its own depth, for the caller
			 * to finish the split (pmh_table_finish_split).
			 */
			if (check_descriptor(t, shard_map, s, depth, desc, file_units, &pub, msg, msglen) &&
				(s != pmh_map_last_split(shard_map, t->shard_bits) ||
				 check_descriptor(t, shard_map, s, depth - 1, desc, file_units, &pub, msg,
								  msglen)))
			{
				if (!lenient)
					err = msg;
				else
					visit(arg, s, &pub, &none, 1);
				continue;
			}
			pmh_table_segment(t, s, &pub, &seg);
			pmh_segment_count(&seg, &counts);
			segs[nsegs].unit = seg.unit;
			segs[nsegs].count = 1 + (uint64_t) seg.nbuckets + seg.nposting;
			/* remember the shard in the spare high bits of count */
			segs[nsegs].count |= (uint64_t) s << 40;
			nsegs++;
		}
		visit(arg, s, &pub, &counts, 0);
	}
	if (err == NULL)
	{
		/* the descriptor array is not free space; no segment overlaps it */
		segs[nsegs].unit = pmh_map_desc_unit(shard_map);
		segs[nsegs].count = pmh_map_descriptor_units(shard_map) | (UINT64_C(0xFFFFFF) << 40);
		nsegs++;
		qsort(segs, nsegs, sizeof(PmhExtent), extent_cmp);
		pmh_freemap_init(map, map->extents, map->capacity);
		for (uint32_t i = 0; i < nsegs; i++)
		{
			uint64_t	count = segs[i].count & ((UINT64_C(1) << 40) - 1);
			uint32_t	shard = (uint32_t) (segs[i].count >> 40);
			PmhPublication empty = {0, 0, pmh_map_depth(shard_map, shard)};

			if (segs[i].unit < next)
			{
				snprintf(msg, msglen, "the segment of shard %u overlaps another one", shard);
				if (!lenient)
				{
					err = msg;
					break;
				}
				visit(arg, shard, &empty, &none, 1);
				continue;
			}
			pmh_freemap_release(map, next, segs[i].unit - next);
			next = segs[i].unit + count;
		}
		if (err == NULL)
			pmh_freemap_release(map, next, file_units - next);
	}
	ops->free_memory(ops->arg, segs);
	return err;
}

/* A table view of a file with a checked header, with the caller's callbacks. */
void
pmh_table_init(PmhTable *t, const PmhFileHeader *hdr, const PmhTableOps *ops,
			   const PmhPersist *persist)
{
	t->ops = ops;
	t->persist = persist;
	t->shard_bits = hdr->shard_bits;
	t->file_generation = hdr->build_generation;
	t->checksums = (hdr->flags & PMH_FILE_CHECKSUMS) != 0;
}

/* Base address used by the file-level helpers below. */
static char *
fixed_base(void *arg)
{
	return arg;
}

/*
 * Flag the unverified entries of every sound segment of a mapped file (see
 * pmh_flag_unverified).  Returns the number of entries flagged.
 */
uint64_t
pmh_file_flag_unverified(char *base, uint64_t file_units, uint64_t after_lsn,
						 const PmhPersist *persist)
{
	PmhFileHeader hdr;
	PmhTableOps ops;
	PmhTable	t;
	const uint64_t *dir;
	uint64_t	flagged = 0;
	char		msg[128];

	/* a private copy: what is checked is what is used */
	memcpy(&hdr, base, sizeof(hdr));
	if (pmh_header_check(&hdr, file_units) != NULL)
		return 0;
	memset(&ops, 0, sizeof(ops));
	ops.base = fixed_base;
	ops.arg = base;
	pmh_table_init(&t, &hdr, &ops, persist);
	dir = (const uint64_t *) unit_address(&t, pmh_map_desc_unit(hdr.shard_map));
	for (uint32_t s = 0; s < pmh_map_slots(hdr.shard_map); s++)
	{
		uint64_t	desc = dir[s];
		PmhPublication pub;
		PmhSegment	seg;

		if (desc == 0 || check_descriptor(&t, hdr.shard_map, s, pmh_map_depth(hdr.shard_map, s),
										  desc, file_units, &pub, msg, sizeof(msg)))
			continue;
		pmh_table_segment(&t, s, &pub, &seg);
		flagged += pmh_flag_unverified(&seg, after_lsn, persist);
	}
	return flagged;
}
