/*-------------------------------------------------------------------------
 *
 * pmprefetch.c
 *	  Heap prefetch: the heap pages of a scan's TIDs, looked up in shared
 *	  buffers or read ahead before the executor fetches their rows.
 *
 * A prefetch is a hint: it reads nothing the scan relies on, takes no pin
 * and holds no pmhash lock (src/README, Heap prefetch).
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmprefetch.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/instrument.h"
#include "storage/buf_internals.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "pmhash.h"

/* TIDs ahead of the one returned whose heap pages a plain scan prefetches */
#define PREFETCH_DISTANCE	16

/* This backend's shared buffer hits and reads as of the last probe */
static int64 probe_blks_hit = 0;
static int64 probe_blks_read = 0;
static bool pool_held_pages = true;

/*
 * The shared buffer that holds a block of a heap, or InvalidBuffer, as
 * PrefetchBuffer finds it but without asking the kernel to read the block
 * ahead; InvalidBuffer for a heap in local buffers.
 */
static Buffer
buffer_in_pool(Relation heap, BlockNumber block)
{
	BufferTag	tag;
	uint32		hash;
	LWLock	   *lock;
	int			buf_id;

	if (RelationUsesLocalBuffers(heap))
		return InvalidBuffer;
	InitBufferTag(&tag, &heap->rd_locator, MAIN_FORKNUM, block);
	hash = BufTableHashCode(&tag);
	lock = BufMappingPartitionLock(hash);
	LWLockAcquire(lock, LW_SHARED);
	buf_id = BufTableLookup(&tag, hash);
	LWLockRelease(lock);
	return buf_id < 0 ? InvalidBuffer : buf_id + 1;
}

/*
 * Whether the pages this backend read since its last probe were mostly in
 * shared buffers already (pgBufferUsage's hits against its reads); with
 * no reads since, the answer of the last probe stands.  When they were
 * not, the pool is smaller than what the scans read, and looking the page
 * of the row read at once up before its fetch mostly finds nothing and
 * only repeats the fetch's own lookup (src/README, Heap prefetch).
 */
static bool
pool_holds_pages(void)
{
	int64		hits = pgBufferUsage.shared_blks_hit - probe_blks_hit;
	int64		reads = pgBufferUsage.shared_blks_read - probe_blks_read;

	if (hits != reads)
		pool_held_pages = hits > reads;
	probe_blks_hit = pgBufferUsage.shared_blks_hit;
	probe_blks_read = pgBufferUsage.shared_blks_read;
	return pool_held_pages;
}

/* Begin the prefetch of a probe's TIDs, none prefetched yet. */
void
pmhash_prefetch_begin(PmhashHeapPrefetch *prefetch)
{
	pmhash_prefetch_restart(prefetch);
	prefetch->look_up_current = pool_holds_pages();
}

/* Prefetch the same probe's TIDs again from the first, as if none had been. */
void
pmhash_prefetch_restart(PmhashHeapPrefetch *prefetch)
{
	prefetch->prefetched = -1;
	prefetch->prefetched_block = InvalidBlockNumber;
}

/*
 * Prefetch the pages of heap of the TIDs tids[now] to PREFETCH_DISTANCE
 * after it (of ntids), whose first row is read at once and whose others a
 * forward scan returns (or reads the keys of) next.  A page in shared
 * buffers has its buffer header, page header and the TID's line pointer
 * brought into the CPU cache, which the executor's fetch of the row
 * reads; one that is not is read ahead (PrefetchBuffer), unless it is the
 * page read at once, which is only looked up, and only while the pool has
 * held the pages read (pool_holds_pages).  Even a scan of one TID gains:
 * the three loads overlap, where the fetch would wait on each in turn.
 */
void
pmhash_prefetch_heap(PmhashHeapPrefetch *prefetch, Relation heap, ItemPointer tids, int ntids,
					 int now)
{
	int			last = Min(now + PREFETCH_DISTANCE, ntids - 1);

	while (prefetch->prefetched < last)
	{
		ItemPointer tid = &tids[++prefetch->prefetched];
		BlockNumber block = ItemPointerGetBlockNumberNoCheck(tid);
		Buffer		buffer;

		if (block == prefetch->prefetched_block)
			continue;
		prefetch->prefetched_block = block;
		/* a read-ahead request just before the read would only cost a system call */
		if (prefetch->prefetched == now)
		{
			if (!prefetch->look_up_current)
				continue;
			buffer = buffer_in_pool(heap, block);
		}
		else
			buffer = PrefetchBuffer(heap, MAIN_FORKNUM, block).recent_buffer;
		if (BufferIsValid(buffer))
		{
			Page		page = BufferGetPage(buffer);
			OffsetNumber offset = ItemPointerGetOffsetNumberNoCheck(tid);

			/* addresses only: the page is neither pinned nor read here */
			offset = Max(Min(offset, MaxHeapTuplesPerPage), FirstOffsetNumber);
			__builtin_prefetch(GetBufferDescriptor(buffer - 1), 0, 3);
			__builtin_prefetch(page, 0, 3);
			__builtin_prefetch(PageGetItemId(page, offset), 0, 3);
		}
	}
}
