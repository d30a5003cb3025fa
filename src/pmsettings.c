/*-------------------------------------------------------------------------
 *
 * pmsettings.c
 *	  pmhash's configuration parameters, and whether the library was
 *	  preloaded.
 *
 * A leaf of the glue: every layer reads these values, which the handler
 * (pmhash.c) defines at module load.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmsettings.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/guc.h"

#include "pmhash.h"

char	   *pmhash_directory = NULL;
int			pmhash_max_indexes = 128;
int			pmhash_max_shards = 131072;
int			pmhash_shard_locks = 1024;
bool		pmhash_os_crash_shadows = false;
int			pmhash_split_pause_step = 0;
int			pmhash_rebuild_pause_step = 0;
int			pmhash_sync_interval = 30000;
bool		pmhash_preloaded = false;

/* Define the configuration parameters (from _PG_init, preloading only). */
void
pmhash_define_settings(void)
{
	DefineCustomStringVariable("pmhash.directory",
							   "Directory that holds the pmhash index files.",
							   "A relative path is relative to the data directory. "
							   "Point it at an fs-DAX mount to use persistent memory.",
							   &pmhash_directory,
							   "pmhash",
							   PGC_POSTMASTER,
							   0,
							   NULL, NULL, NULL);
	DefineCustomIntVariable("pmhash.max_indexes",
							"Number of pmhash indexes that can be open at once.",
							NULL,
							&pmhash_max_indexes,
							128, 4, 65536,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("pmhash.max_shards",
							"Number of index shards that shared memory can describe at once.",
							"Each shard costs 104 bytes of shared memory; an open index takes room for twice the shards it was built with, and more as its shards split.",
							&pmhash_max_shards,
							131072, 1024, 16777216,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("pmhash.shard_locks",
							"Number of writer locks shared by all shards.",
							NULL,
							&pmhash_shard_locks,
							1024, 16, 65536,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("pmhash.sync_interval",
							"Time between two rounds of the syncer, which makes index changes on ordinary files durable after their commits.",
							"Crash recovery replays pmhash's WAL from the last round; "
							"a replication slot, pmhash_durable, keeps that WAL.",
							&pmhash_sync_interval,
							30000, 10, 60000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("pmhash.os_crash_shadows",
							 "Test only: keeps beside each index file on an ordinary file system a copy "
							 "of what pmhash synced, for simulated operating system crashes.",
							 "Every sync also writes the synced range into \"<file>.shadow\"; "
							 "see src/README, What each path survives.",
							 &pmhash_os_crash_shadows,
							 false,
							 PGC_POSTMASTER,
							 GUC_NOT_IN_SAMPLE | GUC_SUPERUSER_ONLY,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("pmhash.split_pause_step",
							"Test only: a shard split of this session pauses after this many of its "
							"persistence steps, until the process is killed or the server stops.",
							"0 never pauses.  The steps: each structural flush and fence or msync "
							"of the split, then its SPLIT record; see src/README, Splits.",
							&pmhash_split_pause_step,
							0, 0, 1000,
							PGC_SUSET,
							GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
	DefineCustomIntVariable("pmhash.rebuild_pause_step",
							"Test only: a shard rebuild of this session's inserts pauses after this many "
							"of its persistence steps, until the process is killed or the server stops.",
							"0 never pauses.  The steps: the new segment's flush and fence or msync, "
							"then its descriptor's; see src/README, Rebuild and publish.",
							&pmhash_rebuild_pause_step,
							0, 0, 1000,
							PGC_SUSET,
							GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
	MarkGUCPrefixReserved("pmhash");
}

/* Refuse to work unless loaded through shared_preload_libraries. */
void
pmhash_check_preloaded(void)
{
	if (!pmhash_preloaded)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pmhash must be loaded via shared_preload_libraries"),
				 errhint("Add pmhash to shared_preload_libraries in postgresql.conf and restart the server.")));
}
