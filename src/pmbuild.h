/*-------------------------------------------------------------------------
 *
 * pmbuild.h
 *	  The state a build shares among its files: pmbatch.c (collecting,
 *	  spilling and merging entries), pmparallel.c (the parallel workers)
 *	  and pmbuild.c (the build itself).
 *
 * How a build proceeds: src/README, Builds and Parallel builds.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmbuild.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef PMBUILD_H
#define PMBUILD_H

#include "access/relscan.h"
#include "nodes/execnodes.h"
#include "port/atomics.h"
#include "storage/buffile.h"
#include "storage/dsm.h"
#include "storage/sharedfileset.h"

#include "pmhash.h"

/* Batches are sorted by this many top bits of the hash: by shard, for any shard count */
#define PMHASH_PREFIX_BITS		PMH_MAX_SHARD_BITS
#define PMHASH_NPREFIXES		(UINT32_C(1) << PMHASH_PREFIX_BITS)

/* What one participant of a build collects, and where it spills it. */
typedef struct PmhashBuildState
{
	Relation	index;
	PmhEntry   *entries;		/* the current batch */
	uint64		nentries;
	uint64		maxentries;
	BufFile   **runs;			/* full batches spilled, one file each */
	int			nruns;
	int			maxruns;
	SharedFileSet *fileset;		/* a worker's: where its runs go */
	dsm_segment *runs_seg;		/* the leader's: the segment of that file set */
	pg_atomic_uint64 *collected;	/* a parallel build's shared entry count */
	bool		transactional;	/* an abort removes the new file */
	bool		progress;		/* report to pg_stat_progress_create_index */
	int64		loaded;			/* entries moved into the shards */
	double		index_tuples;	/* entries collected */
	uint32		shard_bits;		/* the file's, fixed when the scan is over */
	bool		unique;			/* a unique index: remember which tuples are dead */
	ItemPointer dead;			/* TIDs of tuples that are not alive */
	int			ndead;
	int			maxdead;
} PmhashBuildState;

/* The merge of the spilled runs, shard by shard. */
typedef struct PmhashRunMerge
{
	PmhEntry   *heads;			/* each run's next entry */
	bool	   *more;			/* whether heads[r] holds one */
	PmhEntry   *merged;			/* one shard's entries */
	uint64		maxmerged;
} PmhashRunMerge;

/* A leader's handle on the workers of a parallel build (pmparallel.c). */
typedef struct PmhashParallelBuild PmhashParallelBuild;

/* pmbatch.c */
extern void pmhash_build_collect(Relation index, ItemPointer tid, Datum *values, bool *isnull,
								 bool tupleIsAlive, void *state);
extern PmhEntry *pmhash_batch_sort(PmhashBuildState *bs, uint64 **ends);
extern void pmhash_batch_spill(PmhashBuildState *bs);
extern void pmhash_batch_spill_dead(PmhashBuildState *bs);
extern void pmhash_batch_take_worker(PmhashBuildState *bs, int worker, int nruns, int ndead);
extern void pmhash_runs_begin(PmhashBuildState *bs, PmhashRunMerge *m);
extern uint64 pmhash_runs_merge_shard(PmhashBuildState *bs, PmhashRunMerge *m, uint32 shard,
									  const PmhEntry *last, uint64 nlast);
extern void pmhash_runs_end(PmhashBuildState *bs, PmhashRunMerge *m);

/* pmparallel.c */
extern PmhashParallelBuild *pmhash_parallel_begin(PmhashBuildState *bs, Relation heap,
												  Relation index, IndexInfo *info, int nworkers);
extern TableScanDesc pmhash_parallel_scan(PmhashParallelBuild *pb, Relation heap);
extern double pmhash_parallel_end(PmhashParallelBuild *pb, PmhashBuildState *bs);

#endif							/* PMBUILD_H */
