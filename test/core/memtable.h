/*-------------------------------------------------------------------------
 *
 * memtable.h
 *	  An in-memory pmhash file for core tests and benchmarks, with a
 *	  persistence shim that can simulate losing unflushed cache lines.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/core/memtable.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MEMTABLE_H
#define MEMTABLE_H

#include "../../src/core/pmh_core.h"

typedef struct MemTable
{
	char	   *live;			/* what the CPU sees */
	char	   *durable;		/* what survives a crash (shim only) */
	uint8_t    *pending;		/* lines flushed but not yet drained */
	uint64_t	units;
	uint64_t	drains;			/* drains so far */
	uint64_t	crash_at;		/* stop persisting after this many drains */
	uint64_t	lsn;			/* WAL position given to the next change */
	int			shim;			/* track durability */
	uint64_t	busy_patience_ns;	/* how long a busy lookup is tried again */
	PmhShardMirror *mirror;		/* descriptors as readers see them */
	uint64_t	map;			/* the shard map as readers see it */
	void		(*map_hook) (struct MemTable *mt);	/* called as the map moves */
	void	   *hook_arg;
	PmhCounts  *counts;			/* per-shard counters */
	uint32_t	room;			/* slots the mirror and the counters have */
	PmhExtent  *extents;
	PmhFreeMap	freemap;
	PmhTableOps ops;
	PmhPersist	persist;
	PmhTable	table;
} MemTable;

extern int	memtable_checksums;

extern MemTable *memtable_create(uint32_t shard_bits, uint64_t units, int shim);
extern void memtable_destroy(MemTable *mt);
extern void memtable_defer_drains(MemTable *mt);
extern void memtable_commit(MemTable *mt);
extern uint32_t memtable_slot(MemTable *mt, uint32_t hash);
extern void memtable_segment(MemTable *mt, uint32_t slot, PmhSegment *seg);
extern PmhStatus memtable_insert(MemTable *mt, uint32_t hash, PmhTid tid);
extern PmhStatus memtable_replay(MemTable *mt, uint32_t hash, PmhTid tid, uint64_t lsn);
extern PmhStatus memtable_lookup(MemTable *mt, uint32_t hash, PmhTid *out, int *n, int cap);
extern PmhStatus memtable_lookup_batch(MemTable *mt, const uint32_t *hashes, int n,
									 PmhTid *out, int cap, int *counts);
extern int	memtable_lookup_unverified(MemTable *mt, uint32_t hash);
extern uint64_t memtable_flag_unverified(MemTable *mt, uint64_t after_lsn);
extern uint64_t memtable_bulk_delete(MemTable *mt, const PmhDeleteOps *ops);
extern const char *memtable_verify(MemTable *mt, uint64_t *live);
extern void memtable_crash(MemTable *mt, double evict_probability, uint64_t seed);
extern const char *memtable_attach(MemTable *mt);
extern PmhStatus memtable_split(MemTable *mt);

#endif
