/*-------------------------------------------------------------------------
 *
 * pmsyncer.c
 *	  The syncer: a background worker that makes the changes of ordinary
 *	  (msync) index files durable behind the commits, not at them.
 *
 * A change to an index file whose WAL record lies before a checkpoint's
 * redo point is not replayed after a crash, so it must be durable in the
 * file before an operating system crash could follow that checkpoint.
 * PostgreSQL 15 has no checkpoint hook; instead of syncing at every commit,
 * pmhash keeps a durable position D (pmdurable.c) such that every change
 * whose record lies before D is durable, retains the WAL from D with a
 * physical replication slot (pmhash_durable), and crash recovery replays
 * pmhash's own records from D up to the redo point before the usual replay
 * (pmredo.c).  A checkpoint thus never waits for pmhash, and it does not
 * matter which kind it is.
 *
 * Every pmhash.sync_interval the syncer reads the WAL insert position L,
 * fsyncs every file changed since its last round (writers flag the share
 * after each change, before its record is written), writes D = L durably,
 * and advances the slot to D.  A change whose record lies before L was
 * stored, and its share flagged, before L was read; the flag is cleared
 * before the fsync, so the fsync covers the change.
 *
 * At start, with the slot acquired (created if missing), it makes a round
 * (a syncer that died may have left flagged files), and only then
 * publishes the round's position L0 as the defer floor: a commit leaves
 * its changes to an ordinary file to the syncer only if all of them were
 * made after the floor (their records then follow D); every other commit
 * syncs its own, as all do while the floor is 0.  The argument for every
 * kind of checkpoint is in src/README, The syncer.
 * When the slot cannot exist (wal_level minimal, no free slot) the syncer
 * says so in the log and exits, and commits keep syncing.  At shutdown the
 * syncer sets the floor back to 0 and makes a last round: commits after
 * that sync their own.  A backend that exits while the floor is set leaves
 * its changes to the syncer's next round; one that exits when it is 0 (the
 * syncer stopped, by its last round or an error) syncs what it left
 * (pmmap.c), before any shutdown checkpoint.
 * A checkpoint that finds the slot beyond max_slot_wal_keep_size
 * terminates the syncer to invalidate it, and an administrator may
 * terminate it too: after that last round it exits with status 1, so the
 * postmaster starts it again (in 5 s) unless it is shutting down, and the
 * new syncer makes an invalidated slot anew.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmsyncer.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/slot.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/guc.h"

#include "pmhash.h"

#define PATHS_PER_PASS	64

/* Create the slot, keeping the WAL from the redo point; it stays acquired. */
static void
create_slot(void)
{
	ReplicationSlotCreate(PMHASH_SLOT_NAME, false, RS_PERSISTENT, false, false, false);
	ReplicationSlotReserveWal();
	ReplicationSlotMarkDirty();
	ReplicationSlotSave();
}

/*
 * Replace the acquired slot, which was invalidated while no syncer held it
 * (max_slot_wal_keep_size; on 18 also idle_replication_slot_timeout): an
 * invalidated slot keeps no WAL however far it is advanced.  Until the
 * first round publishes a new durable position, a crash finds the WAL from
 * the old one gone and has every index rebuilt (pmredo.c).
 */
static void
recreate_slot(void)
{
	ereport(LOG,
			(errmsg("pmhash: replication slot \"%s\" was invalidated; the syncer makes it anew",
					PMHASH_SLOT_NAME),
			 errdetail("Until the syncer's next round, a crash has the indexes on ordinary files rebuilt from their tables.")));
	ReplicationSlotRelease();
	ReplicationSlotDrop(PMHASH_SLOT_NAME, true);
	create_slot();
}

/* Acquire the slot, creating it if missing; false (logged) if impossible. */
static bool
acquire_slot(void)
{
	MemoryContext context = CurrentMemoryContext;
	volatile bool acquired = true;

	if (wal_level < WAL_LEVEL_REPLICA || max_replication_slots == 0)
	{
		ereport(LOG,
				(errmsg("pmhash: commits sync their index changes themselves"),
				 errdetail("Leaving them to the syncer needs a replication slot, which needs wal_level replica or logical and max_replication_slots above 0.")));
		return false;
	}
	PG_TRY();
	{
		if (SearchNamedReplicationSlot(PMHASH_SLOT_NAME, true) == NULL)
			create_slot();
		else
		{
			ReplicationSlotAcquire(PMHASH_SLOT_NAME, true, false);
			if (!SlotIsPhysical(MyReplicationSlot))
				ereport(ERROR,
						(errmsg("replication slot \"%s\" is not a physical slot", PMHASH_SLOT_NAME)));
			if (pmhash_slot_invalidated(MyReplicationSlot))
				recreate_slot();
			else if (MyReplicationSlot->data.restart_lsn == InvalidXLogRecPtr)
				ReplicationSlotReserveWal();
		}
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(context);
		EmitErrorReport();
		FlushErrorState();
		ereport(LOG,
				(errmsg("pmhash: commits sync their index changes themselves"),
				 errdetail("The syncer could not acquire replication slot \"%s\".", PMHASH_SLOT_NAME)));
		acquired = false;
	}
	PG_END_TRY();
	return acquired;
}

/* Let the checkpointer remove WAL before a new durable position. */
static void
advance_slot(XLogRecPtr position)
{
	SpinLockAcquire(&MyReplicationSlot->mutex);
	MyReplicationSlot->data.restart_lsn = position;
	SpinLockRelease(&MyReplicationSlot->mutex);
	ReplicationSlotMarkDirty();
	ReplicationSlotsComputeRequiredLSN();
}

/* Record a durable position: on disk, in shared memory, in the slot. */
static void
publish_durable(XLogRecPtr position)
{
	pmhash_durable_write(position);
	pmhash_set_durable_position(position);
	advance_slot(position);
}

/*
 * One round: sync every file changed since the last, then advance D to the
 * insert position read first, which it returns.  A round that synced
 * nothing advances D only once it lags a WAL segment behind (or always,
 * when asked to): D may lag, it only bounds the replay and the WAL kept.
 */
static XLogRecPtr
sync_round(bool always_publish)
{
	XLogRecPtr	position = GetXLogInsertRecPtr();
	char		(*paths)[MAXPGPATH] = palloc(PATHS_PER_PASS * MAXPGPATH);
	int			n;
	int			synced = 0;

	do
	{
		n = pmhash_collect_unsynced(paths, PATHS_PER_PASS);
		for (int i = 0; i < n; i++)
			pmhash_fsync_file(paths[i]);
		synced += n;
	} while (n == PATHS_PER_PASS);
	pfree(paths);
	if (position > pmhash_durable_position() &&
		(synced > 0 || always_publish ||
		 position - pmhash_durable_position() >= (uint64) wal_segment_size))
		publish_durable(position);
	return position;
}

/*
 * Exit of the syncer, by its last round or by an error: commits sync their
 * own changes until the next syncer's first round, and exiting backends
 * sync what they left (pmmap.c).
 */
static void
stop_deferring(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	pmhash_set_defer_floor(InvalidXLogRecPtr);
}

/* The syncer's main loop. */
void
pmhash_syncer_main(Datum arg pg_attribute_unused())
{
	XLogRecPtr	floor;

	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();

	if (!acquire_slot())
		proc_exit(0);			/* not restarted: commits keep syncing */
	before_shmem_exit(stop_deferring, 0);
	/* a syncer before this one may have left changes unsynced: a full round */
	floor = sync_round(true);
	pmhash_set_defer_floor(floor);
	ereport(LOG,
			(errmsg("pmhash: commits leave the sync of index changes on ordinary files to the syncer, from %X/%X",
					LSN_FORMAT_ARGS(floor))));
	for (;;)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 pmhash_sync_interval, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (ShutdownRequestPending)
		{
			/* commits from now on sync their own; this round covers the rest */
			pmhash_set_defer_floor(InvalidXLogRecPtr);
			sync_round(false);
			/* status 1: started again, unless the postmaster is shutting down */
			proc_exit(1);
		}
		sync_round(false);
	}
}
