/*-------------------------------------------------------------------------
 *
 * pmbatch.c
 *	  The entries of a build: collected from the heap scan into a batch,
 *	  sorted by hash prefix, spilled to runs, merged shard by shard.
 *
 * A participant of a build (the leader, or a parallel worker) collects
 * (hash, TID) entries into a batch of its share of maintenance_work_mem.
 * A full batch is sorted by the top PMHASH_PREFIX_BITS bits of its hashes
 * (an order that sorts it by shard whatever the number of shards) and
 * written to a run: a temporary file of the leader's, or a file
 * "<worker>.<run>" in the shared file set of a parallel build.  A worker
 * of a unique build also writes the TIDs of the tuples it found not alive,
 * to "<worker>.dead".  The leader reads every run in step with the shards
 * (pmbuild.c load_entries).
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmbatch.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>

#include "access/parallel.h"
#include "commands/progress.h"
#include "pgstat.h"
#include "utils/memutils.h"

#include "pmbuild.h"

#define PROGRESS_EVERY		256		/* heap tuples between progress reports */

/* Make room for count more TIDs of tuples that are not alive. */
static void
reserve_dead(PmhashBuildState *bs, int count)
{
	if (bs->ndead + count <= bs->maxdead)
		return;
	bs->maxdead = Max(bs->ndead + count, Max(bs->maxdead * 2, 64));
	bs->dead = bs->dead ? repalloc_huge(bs->dead, bs->maxdead * sizeof(ItemPointerData)) :
		palloc_extended(bs->maxdead * sizeof(ItemPointerData), MCXT_ALLOC_HUGE);
}

/* Heap scan callback of every participant: collect the entry of one heap tuple. */
void
pmhash_build_collect(Relation index pg_attribute_unused(), ItemPointer tid, Datum *values,
					 bool *isnull, bool tupleIsAlive, void *state)
{
	PmhashBuildState *bs = state;
	PmhEntry   *e;

	if (isnull[0])
		return;
	pmhash_check_tid(bs->index, tid);
	if (bs->unique && !tupleIsAlive)
	{
		reserve_dead(bs, 1);
		bs->dead[bs->ndead++] = *tid;
	}
	if (bs->nentries == bs->maxentries)
		pmhash_batch_spill(bs);
	e = &bs->entries[bs->nentries++];
	e->hash = pmhash_hash_key(bs->index, values, isnull);
	memcpy(&e->tid, tid, sizeof(PmhTid));
	e->flags = 0;
	bs->index_tuples++;
	if ((uint64) bs->index_tuples % PROGRESS_EVERY == 0)
	{
		uint64		collected = (uint64) bs->index_tuples;

		if (bs->collected)
			collected = pg_atomic_add_fetch_u64(bs->collected, PROGRESS_EVERY);
		if (bs->progress)
			pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, (int64) collected);
	}
}

/*
 * Sort a batch's entries by the top PMHASH_PREFIX_BITS bits of their
 * hashes (a counting sort): returns the sorted copy, and in *ends the end
 * of each prefix's entries in it.
 */
PmhEntry *
pmhash_batch_sort(PmhashBuildState *bs, uint64 **ends)
{
	uint64	   *next = palloc0((PMHASH_NPREFIXES + 1) * sizeof(uint64));
	PmhEntry   *sorted = palloc_extended(Max(bs->nentries, 1) * sizeof(PmhEntry),
										 MCXT_ALLOC_HUGE);

	for (uint64 i = 0; i < bs->nentries; i++)
		next[pmh_shard_of(bs->entries[i].hash, PMHASH_PREFIX_BITS) + 1]++;
	for (uint32 p = 0; p < PMHASH_NPREFIXES; p++)
		next[p + 1] += next[p];
	for (uint64 i = 0; i < bs->nentries; i++)
		sorted[next[pmh_shard_of(bs->entries[i].hash, PMHASH_PREFIX_BITS)]++] = bs->entries[i];
	/* next[p] now holds the end of prefix p */
	*ends = next;
	return sorted;
}

/* Add a file to the runs that the merge reads. */
static void
add_run(PmhashBuildState *bs, BufFile *run)
{
	if (bs->nruns == bs->maxruns)
	{
		bs->maxruns = Max(bs->maxruns * 2, 8);
		bs->runs = bs->runs ? repalloc(bs->runs, bs->maxruns * sizeof(BufFile *)) :
			palloc(bs->maxruns * sizeof(BufFile *));
	}
	bs->runs[bs->nruns++] = run;
}

/* Write a file of this worker's to the shared file set, named after the worker. */
static void
write_worker_file(PmhashBuildState *bs, const char *what, const void *data, size_t size)
{
	char		name[MAXPGPATH];
	BufFile    *file;

	snprintf(name, sizeof(name), "%d.%s", ParallelWorkerNumber, what);
	file = BufFileCreateFileSet(&bs->fileset->fs, name);
	BufFileWrite(file, (void *) data, size);
	BufFileExportFileSet(file);
	BufFileClose(file);
}

/* Open, for reading, a file that a worker left in the leader's file set. */
static BufFile *
open_worker_file(PmhashBuildState *bs, int worker, const char *what)
{
	SharedFileSet *fileset = dsm_segment_address(bs->runs_seg);
	char		name[MAXPGPATH];

	snprintf(name, sizeof(name), "%d.%s", worker, what);
	return BufFileOpenFileSet(&fileset->fs, name, O_RDONLY, false);
}

/*
 * Write the current batch, sorted by hash prefix, to a run: a temporary
 * file of the leader's, or a worker's file in the shared file set.
 */
void
pmhash_batch_spill(PmhashBuildState *bs)
{
	uint64	   *ends;
	PmhEntry   *sorted;

	if (bs->nentries == 0)
		return;
	sorted = pmhash_batch_sort(bs, &ends);
	if (bs->fileset)
	{
		char		run[32];

		snprintf(run, sizeof(run), "%d", bs->nruns++);
		write_worker_file(bs, run, sorted, bs->nentries * sizeof(PmhEntry));
	}
	else
	{
		BufFile    *file = BufFileCreateTemp(false);

		BufFileWrite(file, sorted, bs->nentries * sizeof(PmhEntry));
		if (BufFileSeek(file, 0, 0, SEEK_SET) != 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("pmhash build: could not rewind a temporary file: %m")));
		add_run(bs, file);
	}
	pfree(sorted);
	pfree(ends);
	bs->nentries = 0;
}

/* A worker's: write the TIDs of the tuples it found not alive, for the leader. */
void
pmhash_batch_spill_dead(PmhashBuildState *bs)
{
	if (bs->ndead > 0)
		write_worker_file(bs, "dead", bs->dead, bs->ndead * sizeof(ItemPointerData));
}

/*
 * The leader's: take over what a finished worker left in the file set, its
 * nruns runs and its ndead TIDs of tuples that are not alive.
 */
void
pmhash_batch_take_worker(PmhashBuildState *bs, int worker, int nruns, int ndead)
{
	for (int r = 0; r < nruns; r++)
	{
		char		run[32];

		snprintf(run, sizeof(run), "%d", r);
		add_run(bs, open_worker_file(bs, worker, run));
	}
	if (ndead > 0)
	{
		BufFile    *file = open_worker_file(bs, worker, "dead");
		size_t		size = ndead * sizeof(ItemPointerData);

		reserve_dead(bs, ndead);
		if (BufFileRead(file, bs->dead + bs->ndead, size) != size)
			elog(ERROR, "pmhash build: short read of a worker's dead tuples");
		bs->ndead += ndead;
		BufFileClose(file);
	}
}

/* Read the next entry of a run into *head; false at its end. */
static bool
read_run(BufFile *run, PmhEntry *head)
{
	size_t		got = BufFileRead(run, head, sizeof(PmhEntry));

	if (got != 0 && got != sizeof(PmhEntry))
		elog(ERROR, "pmhash build: short read of a spilled batch");
	return got != 0;
}

/* Start the merge of the spilled runs: read each run's first entry. */
void
pmhash_runs_begin(PmhashBuildState *bs, PmhashRunMerge *m)
{
	memset(m, 0, sizeof(*m));
	if (bs->nruns == 0)
		return;
	m->heads = palloc(bs->nruns * sizeof(PmhEntry));
	m->more = palloc(bs->nruns * sizeof(bool));
	for (int r = 0; r < bs->nruns; r++)
		m->more[r] = read_run(bs->runs[r], &m->heads[r]);
}

/* Make room for count entries in a merge's buffer. */
static void
reserve_merged(PmhashRunMerge *m, uint64 count)
{
	if (count <= m->maxmerged)
		return;
	m->maxmerged = Max(count, Max(m->maxmerged * 2, 4096));
	m->merged = m->merged ? repalloc_huge(m->merged, m->maxmerged * sizeof(PmhEntry)) :
		palloc_extended(m->maxmerged * sizeof(PmhEntry), MCXT_ALLOC_HUGE);
}

/*
 * Gather one shard's entries: those of every spilled run (each sorted by
 * hash prefix, so read in step with the shards), then the last batch's;
 * returns their number, in m->merged.
 */
uint64
pmhash_runs_merge_shard(PmhashBuildState *bs, PmhashRunMerge *m, uint32 shard,
						const PmhEntry *last, uint64 nlast)
{
	uint64		n = 0;

	for (int r = 0; r < bs->nruns; r++)
	{
		while (m->more[r] && pmh_shard_of(m->heads[r].hash, bs->shard_bits) == shard)
		{
			reserve_merged(m, n + 1);
			m->merged[n++] = m->heads[r];
			m->more[r] = read_run(bs->runs[r], &m->heads[r]);
		}
	}
	reserve_merged(m, n + nlast);
	memcpy(m->merged + n, last, nlast * sizeof(PmhEntry));
	return n + nlast;
}

/* End the merge: close the runs, and delete the workers' files. */
void
pmhash_runs_end(PmhashBuildState *bs, PmhashRunMerge *m)
{
	if (bs->nruns > 0)
	{
		for (int r = 0; r < bs->nruns; r++)
			BufFileClose(bs->runs[r]);
		pfree(bs->runs);
		pfree(m->heads);
		pfree(m->more);
		if (m->merged)
			pfree(m->merged);
		bs->runs = NULL;
		bs->nruns = 0;
	}
	/* the last detach deletes the workers' files */
	if (bs->runs_seg)
	{
		dsm_detach(bs->runs_seg);
		bs->runs_seg = NULL;
	}
}
