/*-------------------------------------------------------------------------
 *
 * pmdurable.c
 *	  The durable position of the index files, syncing a whole file, and
 *	  the operating system's boot that a file's unsynced changes need.
 *
 * The durable position (pmhash.durable in pmhash.directory) is a WAL
 * position D such that every change of an index file whose WAL record lies
 * before D is durable in the file.  The syncer advances it (pmsyncer.c);
 * crash recovery replays pmhash's records from D (pmredo.c).  It is kept
 * in two 512-byte slots written in turn, each with a sequence number and a
 * CRC, so that a write torn by a crash leaves the other one readable.
 *
 * Changes stored in a mapped file, synced or not, survive a crash of
 * PostgreSQL alone: the page cache (or, on DAX, the CPU cache) keeps them.
 * Only a crash of the operating system, which starts a new boot, can lose
 * them; the kernel's boot id tells the two apart.
 *
 * The syncer's replication slot keeps the WAL from the durable position.
 * PostgreSQL refuses to start with a physical slot while wal_level is
 * minimal or max_replication_slots is 0, the settings under which commits
 * sync their own changes; the postmaster therefore drops the slot before
 * that check when it can do without it.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmdurable.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/xlog.h"
#include "catalog/pg_control.h"
#include "common/controldata_utils.h"
#include "miscadmin.h"
#include "port/pg_crc32c.h"
#include "replication/slot.h"
#include "storage/fd.h"

#include "pmhash.h"

#define DURABLE_FILE_NAME	"pmhash.durable"
#define DURABLE_MAGIC		0x504d4844	/* "PMHD" */
#define DURABLE_SLOT_SIZE	512
#define BOOT_ID_PATH		"/proc/sys/kernel/random/boot_id"

/* One slot of the durable position file. */
typedef struct DurableSlot
{
	uint32		magic;
	uint32		crc;			/* CRC-32C of the fields below */
	uint64		sequence;		/* the newer valid slot wins */
	uint64		position;
} DurableSlot;

static uint64 durable_sequence = 0;

/* The value of a hexadecimal digit; -1 for any other character. */
static int
hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * The id of the operating system's current boot into id, from Linux's
 * boot_id (a UUID); false, with id zeroed, where it cannot be read.
 */
bool
pmhash_boot_id(uint8 id[PMHASH_BOOT_ID_SIZE])
{
	char		text[64];
	int			fd = OpenTransientFile(BOOT_ID_PATH, O_RDONLY);
	ssize_t		len = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;
	int			n = 0;

	memset(id, 0, PMHASH_BOOT_ID_SIZE);
	if (fd >= 0)
		CloseTransientFile(fd);
	for (ssize_t i = 0; i < len && n < 2 * PMHASH_BOOT_ID_SIZE; i++)
	{
		int			digit = hex_value(text[i]);

		if (digit >= 0)
		{
			id[n / 2] |= digit << (n % 2 == 0 ? 4 : 0);
			n++;
		}
	}
	if (n == 2 * PMHASH_BOOT_ID_SIZE)
		return true;
	memset(id, 0, PMHASH_BOOT_ID_SIZE);
	return false;
}

/*
 * Whether the operating system has not restarted since the boot whose id
 * a file recorded: false if either id is unknown.
 */
bool
pmhash_same_boot(const uint8 recorded[PMHASH_BOOT_ID_SIZE])
{
	uint8		current[PMHASH_BOOT_ID_SIZE];
	static const uint8 unknown[PMHASH_BOOT_ID_SIZE];

	return pmhash_boot_id(current) &&
		memcmp(recorded, unknown, PMHASH_BOOT_ID_SIZE) != 0 &&
		memcmp(recorded, current, PMHASH_BOOT_ID_SIZE) == 0;
}

/*
 * Make a whole index file durable with fsync, which writes back the pages
 * every process dirtied through its mappings.  A file that no longer
 * exists (its index was dropped) needs nothing.  A failed sync is a
 * PANIC, as for PostgreSQL's own files (data_sync_retry).
 */
void
pmhash_fsync_file(const char *path)
{
	int			fd = OpenTransientFile(path, O_RDWR | PG_BINARY);

	if (fd < 0)
	{
		if (errno == ENOENT)
			return;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open pmhash file \"%s\": %m", path)));
	}
	if (pg_fsync(fd) != 0)
		ereport(data_sync_elevel(ERROR),
				(errcode_for_file_access(),
				 errmsg("could not fsync pmhash file \"%s\": %m", path)));
	pmhash_shadow_synced_file(path, fd);
	CloseTransientFile(fd);
}

/* CRC of a slot of the durable position file. */
static pg_crc32c
slot_crc(const DurableSlot *slot)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, &slot->sequence, sizeof(slot->sequence) + sizeof(slot->position));
	FIN_CRC32C(crc);
	return crc;
}

/*
 * Read the durable position; false if there is none (the file is missing,
 * or neither slot is valid).
 */
bool
pmhash_durable_read(XLogRecPtr *position)
{
	char		path[MAXPGPATH];
	DurableSlot slots[2];
	int			fd;
	bool		found = false;

	snprintf(path, MAXPGPATH, "%s/%s", pmhash_directory, DURABLE_FILE_NAME);
	fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	if (fd < 0)
		return false;
	for (int i = 0; i < 2; i++)
	{
		DurableSlot *slot = &slots[i];

		if (pg_pread(fd, slot, sizeof(*slot), i * DURABLE_SLOT_SIZE) != sizeof(*slot) ||
			slot->magic != DURABLE_MAGIC || slot->crc != slot_crc(slot))
			continue;
		if (!found || slot->sequence > durable_sequence)
		{
			durable_sequence = slot->sequence;
			*position = slot->position;
			found = true;
		}
	}
	CloseTransientFile(fd);
	return found;
}

/* Record a new durable position, durably, in the older of the two slots. */
void
pmhash_durable_write(XLogRecPtr position)
{
	char		path[MAXPGPATH];
	DurableSlot slot;
	XLogRecPtr	previous;
	int			fd;

	/* continue the sequence of whoever wrote last */
	if (durable_sequence == 0)
		(void) pmhash_durable_read(&previous);
	snprintf(path, MAXPGPATH, "%s/%s", pmhash_directory, DURABLE_FILE_NAME);
	fd = OpenTransientFile(path, O_RDWR | O_CREAT | PG_BINARY);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open pmhash file \"%s\": %m", path)));
	memset(&slot, 0, sizeof(slot));
	slot.magic = DURABLE_MAGIC;
	slot.sequence = ++durable_sequence;
	slot.position = position;
	slot.crc = slot_crc(&slot);
	errno = 0;
	if (pg_pwrite(fd, &slot, sizeof(slot), (slot.sequence % 2) * DURABLE_SLOT_SIZE) != sizeof(slot))
	{
		if (errno == 0)
			errno = ENOSPC;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write pmhash file \"%s\": %m", path)));
	}
	if (pg_fdatasync(fd) != 0)
		ereport(data_sync_elevel(ERROR),
				(errcode_for_file_access(),
				 errmsg("could not fsync pmhash file \"%s\": %m", path)));
	CloseTransientFile(fd);
}

/*
 * The durable position, for crash recovery: as pmhash.durable records it,
 * or, if that file is missing or damaged, the restart position of the
 * syncer's replication slot as last saved, which the syncer advances only
 * after writing the file, so it is never later (LOG line).  Neither: no
 * syncer ever ran, so no commit left anything to it.  A slot that lost its
 * WAL (max_slot_wal_keep_size) cannot stand in for the file.
 */
PmhashDurableKnown
pmhash_durable_recall(XLogRecPtr *position)
{
	ReplicationSlot *slot;
	bool		found;

	if (pmhash_durable_read(position))
		return *position == InvalidXLogRecPtr ? PMHASH_DURABLE_NONE : PMHASH_DURABLE_AT;
	LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
	slot = SearchNamedReplicationSlot(PMHASH_SLOT_NAME, false);
	found = slot != NULL;
	if (found)
	{
		SpinLockAcquire(&slot->mutex);
		*position = slot->data.restart_lsn;
		SpinLockRelease(&slot->mutex);
	}
	LWLockRelease(ReplicationSlotControlLock);
	if (!found)
		return PMHASH_DURABLE_NONE;
	if (*position == InvalidXLogRecPtr)
	{
		ereport(LOG,
				(errmsg("pmhash: \"%s/%s\" is missing or damaged, and replication slot \"%s\" has lost its WAL",
						pmhash_directory, DURABLE_FILE_NAME, PMHASH_SLOT_NAME)));
		return PMHASH_DURABLE_LOST;
	}
	ereport(LOG,
			(errmsg("pmhash: \"%s/%s\" is missing or damaged; crash recovery replays index changes from the position of replication slot \"%s\", %X/%X",
					pmhash_directory, DURABLE_FILE_NAME, PMHASH_SLOT_NAME,
					LSN_FORMAT_ARGS(*position))));
	return PMHASH_DURABLE_AT;
}

/*
 * Postmaster, before the startup process restores replication slots: drop
 * the syncer's slot if this server cannot use it (wal_level minimal or
 * max_replication_slots 0: commits then sync themselves), since PostgreSQL
 * would refuse to start with it.  The slot only keeps WAL for a crash
 * recovery that replays from the durable position.  After a clean shutdown
 * nothing is left to replay; after a crash, pmhash.durable names the
 * position, and its WAL is still in pg_wal, since no checkpoint has run
 * since.  With neither, only the slot knows the position: it is kept, and
 * the LOG line says how to switch.
 */
void
pmhash_durable_drop_unusable_slot(void)
{
	char		path[MAXPGPATH];
	struct stat st;
	bool		crc_ok;
	ControlFileData *control;
	bool		clean;
	XLogRecPtr	position;

	if (wal_level >= WAL_LEVEL_REPLICA && max_replication_slots > 0)
		return;
	snprintf(path, MAXPGPATH, "pg_replslot/%s", PMHASH_SLOT_NAME);
	if (stat(path, &st) != 0)
		return;
	control = get_controlfile(DataDir, &crc_ok);
	clean = crc_ok && control->state == DB_SHUTDOWNED;
	pfree(control);
	if (!clean && !pmhash_durable_read(&position))
	{
		ereport(LOG,
				(errmsg("pmhash: replication slot \"%s\" is kept although wal_level is minimal or max_replication_slots is 0",
						PMHASH_SLOT_NAME),
				 errdetail("The server did not shut down cleanly, and \"%s/%s\" is missing or damaged: crash recovery needs the position that the slot saved.",
						   pmhash_directory, DURABLE_FILE_NAME),
				 errhint("Start the server once with wal_level = replica and max_replication_slots above 0, shut it down cleanly, then change the settings.")));
		return;
	}
	if (!rmtree(path, true))
	{
		ereport(LOG,
				(errmsg("pmhash: could not remove replication slot directory \"%s\"", path)));
		return;
	}
	fsync_fname("pg_replslot", true);
	ereport(LOG,
			(errmsg("pmhash: dropped replication slot \"%s\", which this server cannot use; commits sync their index changes themselves",
					PMHASH_SLOT_NAME)));
}
