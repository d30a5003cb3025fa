/*-------------------------------------------------------------------------
 *
 * pmqueue.c
 *	  Each backend's queue of inserts, applied to an index in batches.
 *
 * aminsert queues an entry per index; the queue is applied as one batch
 * (pmh_insert_entries: sorted by hash, prefetched, one INSERT record) when
 * it is full, before this backend reads the index itself (scans,
 * pmhash_stats, pmhash_verify), before the file is copied (SET
 * TABLESPACE), before a query starts parallel workers, which would read the
 * index without the queue, and before commit or PREPARE.  Other backends
 * cannot see the queued rows before commit anyway, except through an
 * exclusion constraint, whose index takes its entries at once.
 *
 * A queue holds the entries of one subtransaction: an insert in another
 * applies the queue first.  When the subtransaction commits its entries
 * pass to the parent; when it aborts they are dropped, unapplied, since
 * their tuples are dead (applied later they could point at line pointers
 * VACUUM has since freed).  A top-level abort drops every queue.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmqueue.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "pmhash.h"

/* Local indexes that may have queued inserts (in TopMemoryContext). */
static List *queued_indexes = NIL;

static ExecutorStart_hook_type prev_ExecutorStart = NULL;

/* Apply one index's queue now, opening the index around it. */
static void
apply_now(Relation index)
{
	pmh_apply_queued(index, pmh_open(index));
	pmh_leave();
}

/* Queue an entry; ix comes from pmh_local.  A full queue is applied at once. */
void
pmh_queue_insert(Relation index, PmhIndex *ix, uint32 hash, ItemPointer tid)
{
	SubTransactionId subid = GetCurrentSubTransactionId();
	PmhEntry   *entry;

	if (ix->nqueued > 0 && ix->queued_subid != subid)
		apply_now(index);
	if (ix->queued == NULL)
		ix->queued = MemoryContextAlloc(TopMemoryContext, PMH_INSERT_BATCH * sizeof(PmhEntry));
	if (ix->nqueued == 0)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		queued_indexes = list_append_unique_ptr(queued_indexes, ix);
		MemoryContextSwitchTo(old);
		ix->queued_subid = subid;
		ix->queued_relid = RelationGetRelid(index);
	}
	entry = &ix->queued[ix->nqueued++];
	entry->hash = hash;
	memcpy(&entry->tid, tid, sizeof(PmhTid));
	entry->flags = 0;
	if (ix->nqueued == PMH_INSERT_BATCH)
		apply_now(index);
}

/* Apply an index's queue (the index is open: pmh_open). */
void
pmh_apply_queued(Relation index, PmhIndex *ix)
{
	uint32		count = ix->nqueued;

	if (count == 0)
		return;
	ix->nqueued = 0;
	pmh_insert_entries(index, ix, ix->queued, count);
}

/*
 * Apply every queue of this backend.  The queue of an index dropped or
 * given new storage (TRUNCATE, REINDEX) since is dropped: the new storage
 * was built from the heap, or is empty.
 */
void
pmh_apply_queued_all(void)
{
	ListCell   *lc;

	foreach(lc, queued_indexes)
	{
		PmhIndex   *ix = lfirst(lc);
		Relation	index;

		if (ix->nqueued == 0)
			continue;
		index = try_relation_open(ix->queued_relid, NoLock);
		if (index != NULL && RelFileNodeEquals(index->rd_node, ix->node) &&
			index->rd_backend == ix->key.backend)
			apply_now(index);
		ix->nqueued = 0;
		if (index != NULL)
			relation_close(index, NoLock);
	}
	list_free(queued_indexes);
	queued_indexes = NIL;
}

/* Drop every queue: the transaction aborted, its tuples are dead. */
void
pmh_discard_queued_all(void)
{
	ListCell   *lc;

	foreach(lc, queued_indexes)
		((PmhIndex *) lfirst(lc))->nqueued = 0;
	list_free(queued_indexes);
	queued_indexes = NIL;
}

/* Subtransaction end: its queues pass to the parent, or are dropped. */
static void
queue_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg pg_attribute_unused())
{
	ListCell   *lc;

	if (event != SUBXACT_EVENT_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB)
		return;
	foreach(lc, queued_indexes)
	{
		PmhIndex   *ix = lfirst(lc);

		if (ix->nqueued == 0 || ix->queued_subid != mySubid)
			continue;
		if (event == SUBXACT_EVENT_COMMIT_SUB)
			ix->queued_subid = parentSubid;
		else
			ix->nqueued = 0;
	}
}

/* ExecutorStart hook: parallel workers must find the queued entries applied. */
static void
queue_executor_start(QueryDesc *queryDesc, int eflags)
{
	if (queryDesc->plannedstmt->parallelModeNeeded && queued_indexes != NIL)
		pmh_apply_queued_all();
	if (prev_ExecutorStart)
		prev_ExecutorStart(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

/* Register the callbacks and hooks (from _PG_init). */
void
pmh_queue_init(void)
{
	RegisterSubXactCallback(queue_subxact_callback, NULL);
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = queue_executor_start;
}
