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
	INIT_BUFFERTAG(tag, heap->rd_node, MAIN_FORKNUM, block);
	hash = BufTableHashCode(&tag);
	lock = BufMappingPartitionLock(hash);
	LWLockAcquire(lock, LW_SHARED);
	buf_id = BufTableLookup(&tag, hash);
	LWLockRelease(lock);
	return buf_id < 0 ? InvalidBuffer : buf_id + 1;
}

/*
 * Bring the buffer header, page header and line pointer of tid's heap
 * page into the CPU cache if the page is in shared buffers; addresses
 * only: the page is neither pinned nor read here.
 */
static void
prefetch_lines(Relation heap, ItemPointer tid)
{
	Buffer		buffer = buffer_in_pool(heap, ItemPointerGetBlockNumberNoCheck(tid));
	Page		page;
	OffsetNumber offset;

	if (!BufferIsValid(buffer))
		return;
	page = BufferGetPage(buffer);
	offset = ItemPointerGetOffsetNumberNoCheck(tid);
	offset = Max(Min(offset, MaxHeapTuplesPerPage), FirstOffsetNumber);
	__builtin_prefetch(GetBufferDescriptor(buffer - 1), 0, 3);
	__builtin_prefetch(page, 0, 3);
	__builtin_prefetch(PageGetItemId(page, offset), 0, 3);
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
	prefetch->pool_holds_pages = pool_holds_pages();
}

/* Prefetch the same probe's TIDs again from the first, as if none had been. */
void
pmhash_prefetch_restart(PmhashHeapPrefetch *prefetch)
{
	prefetch->prefetched = -1;
	prefetch->prefetched_block = InvalidBlockNumber;
}

/*
 * Prefetch the heap pages of the TIDs a forward scan returns (or reads the
 * keys of) from tids[now] on, of ntids, the row of tids[now] being read at
 * once.  While the pool holds the pages read (pool_holds_pages), a probe of
 * one TID looks its page up in shared buffers and has the buffer header,
 * page header and the TID's line pointer brought into the CPU cache, which
 * the executor's fetch reads: the three loads overlap, where the fetch
 * would wait on each in turn.  A probe of several TIDs does nothing then:
 * the lookup of each page ahead costs about what the fetch saves by it.
 * While the pool does not hold them, the pages of the PREFETCH_DISTANCE
 * TIDs after tids[now] are read ahead (PrefetchBuffer); not tids[now]'s,
 * whose read-ahead request just before the read would only cost a system
 * call.
 */
void
pmhash_prefetch_heap(PmhashHeapPrefetch *prefetch, Relation heap, ItemPointer tids, int ntids,
					 int now)
{
	if (prefetch->pool_holds_pages)
	{
		if (ntids == 1 && prefetch->prefetched < 0)
		{
			prefetch->prefetched = 0;
			prefetch_lines(heap, &tids[0]);
		}
		return;
	}
	prefetch->prefetched = Max(prefetch->prefetched, now);
	while (prefetch->prefetched < Min(now + PREFETCH_DISTANCE, ntids - 1))
	{
		BlockNumber block;

		prefetch->prefetched++;
		block = ItemPointerGetBlockNumberNoCheck(&tids[prefetch->prefetched]);
		if (block != prefetch->prefetched_block)
			(void) PrefetchBuffer(heap, MAIN_FORKNUM, block);
		prefetch->prefetched_block = block;
	}
}
