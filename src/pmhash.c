/*-------------------------------------------------------------------------
 *
 * pmhash.c
 *	  Module initialization, configuration, reloptions and the access
 *	  method handler of pmhash.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmhash.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/reloptions.h"
#include "catalog/pg_type_d.h"
#include "commands/vacuum.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "utils/guc.h"

#include "pmhash.h"

PG_MODULE_MAGIC;

char	   *pmhash_directory = NULL;
int			pmhash_max_indexes = 128;
int			pmhash_max_shards = 131072;
int			pmhash_shard_locks = 1024;
bool		pmhash_os_crash_shadows = false;
int			pmhash_sync_interval = 1000;
bool		pmhash_preloaded = false;

static relopt_kind pmhash_relopt_kind;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

void		_PG_init(void);

/* Chain our shared memory request after any earlier hook. */
static void
chain_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	pmhash_shmem_request();
}

/* Chain our shared memory initialization after any earlier hook. */
static void
chain_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	pmhash_shmem_startup();
	if (!IsUnderPostmaster)
	{
		pmhash_durable_drop_unusable_slot();
		pmhash_recovery_after_crash();
	}
}

/* Define the configuration parameters. */
static void
define_gucs(void)
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
							"Each shard costs 48 bytes of shared memory.",
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
							1000, 10, 60000,
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
	MarkGUCPrefixReserved("pmhash");
}

/* Register the background workers: the file cleaner and the syncer. */
static void
register_worker(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	/* in the process array, to ask whether transactions run (pmcleaner.c) */
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	worker.bgw_restart_time = 60;
	strlcpy(worker.bgw_library_name, "pmhash", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "pmhash_worker_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "pmhash file cleaner", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "pmhash file cleaner", BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);

	strlcpy(worker.bgw_function_name, "pmhash_syncer_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "pmhash syncer", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "pmhash syncer", BGW_MAXLEN);
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 5;
	RegisterBackgroundWorker(&worker);
}

/*
 * Module load.  pmhash needs shared memory, so everything but the
 * reloptions waits for shared_preload_libraries; loaded any other way it
 * stays inert and the handler explains why.
 */
void
_PG_init(void)
{
	pmhash_relopt_kind = add_reloption_kind();
	add_int_reloption(pmhash_relopt_kind, "shards",
					  "Number of shards (a power of two; 0 chooses from the table size)",
					  0, 0, PMHASH_MAX_SHARDS, AccessExclusiveLock);
	add_int_reloption(pmhash_relopt_kind, "fillfactor",
					  "Percentage of bucket slots that index builds fill (at most 88 take effect)",
					  PMHASH_DEFAULT_FILLFACTOR, PMHASH_MIN_FILLFACTOR, 100, ShareUpdateExclusiveLock);

	if (!process_shared_preload_libraries_in_progress)
		return;

	define_gucs();
	if (!IsUnderPostmaster)
		pmhash_directory_lock();
	pmhash_wal_register();
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = chain_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = chain_shmem_startup;
	pmhash_xact_init();
	pmhash_utility_init();
	pmhash_upsert_init();
	pmhash_recheck_init();
	pmhash_fault_init();
	register_worker();
	pmhash_preloaded = true;
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

/* Parse and validate reloptions. */
bytea *
pmhashoptions(Datum reloptions, bool validate)
{
	/* designated: 18 added a field that pmhash leaves zero */
	static const relopt_parse_elt tab[] = {
		{.optname = "shards", .opttype = RELOPT_TYPE_INT,
		.offset = offsetof(PmhashOptions, shards)},
		{.optname = "fillfactor", .opttype = RELOPT_TYPE_INT,
		.offset = offsetof(PmhashOptions, fillfactor)},
	};
	PmhashOptions *opts;

	opts = (PmhashOptions *) build_reloptions(reloptions, validate, pmhash_relopt_kind,
											  sizeof(PmhashOptions), tab, lengthof(tab));
	if (validate && opts && opts->shards != 0 && (opts->shards & (opts->shards - 1)) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("value %d out of bounds for option \"shards\"", opts->shards),
				 errdetail("The number of shards must be a power of two between 1 and %d, or 0.",
						   PMHASH_MAX_SHARDS)));
	return (bytea *) opts;
}

PG_FUNCTION_INFO_V1(pmhash_handler);

/* The access method handler: what pmhash can do and its callbacks. */
Datum
pmhash_handler(PG_FUNCTION_ARGS)
{
	IndexAmRoutine *amroutine = makeNode(IndexAmRoutine);

	pmhash_check_preloaded();

	amroutine->amstrategies = PMHASH_EQUAL_STRATEGY;
	amroutine->amsupport = 1;
	amroutine->amoptsprocnum = 0;
	amroutine->amcanorder = false;
	amroutine->amcanorderbyop = false;
#if PG_VERSION_NUM >= 180000
	/* false: hash's rules would file function 1 under its input type ("char") */
	amroutine->amcanhash = false;
	/* as hash: a family's equalities agree across types, as its hashes must */
	amroutine->amconsistentequality = true;
	/* no ordering operators */
	amroutine->amconsistentordering = false;
#endif
	amroutine->amcanbackward = true;
	amroutine->amcanunique = true;
	amroutine->amcanmulticol = true;
	amroutine->amoptionalkey = false;
	amroutine->amsearcharray = true;
	amroutine->amsearchnulls = false;
	amroutine->amstorage = false;
	amroutine->amclusterable = false;
	amroutine->ampredlocks = true;
	amroutine->amcanparallel = false;
#if PG_VERSION_NUM >= 170000
	/* false: pmhashbuild plans its own workers (pmparallel.c) */
	amroutine->amcanbuildparallel = false;
#endif
	amroutine->amcaninclude = false;
	amroutine->amusemaintenanceworkmem = false;
#if PG_VERSION_NUM >= 160000
	/* false: entries point at tuples, not block ranges */
	amroutine->amsummarizing = false;
#endif
	amroutine->amparallelvacuumoptions = VACUUM_OPTION_PARALLEL_BULKDEL;
	amroutine->amkeytype = INT4OID;

	amroutine->ambuild = pmhashbuild;
	amroutine->ambuildempty = pmhashbuildempty;
	amroutine->aminsert = pmhashinsert;
#if PG_VERSION_NUM >= 170000
	/* none: pmxact.c logs pending INSERT records before commit */
	amroutine->aminsertcleanup = NULL;
#endif
	amroutine->ambulkdelete = pmhashbulkdelete;
	amroutine->amvacuumcleanup = pmhashvacuumcleanup;
	amroutine->amcanreturn = NULL;
	amroutine->amcostestimate = pmhashcostestimate;
#if PG_VERSION_NUM >= 180000
	/* none: not a tree */
	amroutine->amgettreeheight = NULL;
#endif
	amroutine->amoptions = pmhashoptions;
	amroutine->amproperty = NULL;
	amroutine->ambuildphasename = pmhashbuildphasename;
	amroutine->amvalidate = pmhashvalidate;
	amroutine->amadjustmembers = pmhashadjustmembers;
	amroutine->ambeginscan = pmhashbeginscan;
	amroutine->amrescan = pmhashrescan;
	amroutine->amgettuple = pmhashgettuple;
	amroutine->amgetbitmap = pmhashgetbitmap;
	amroutine->amendscan = pmhashendscan;
	amroutine->ammarkpos = NULL;
	amroutine->amrestrpos = NULL;
	amroutine->amestimateparallelscan = NULL;
	amroutine->aminitparallelscan = NULL;
	amroutine->amparallelrescan = NULL;
#if PG_VERSION_NUM >= 180000
	/* equality's strategy numbers, for core code that asks (pmvalidate.c) */
	amroutine->amtranslatestrategy = pmhashtranslatestrategy;
	amroutine->amtranslatecmptype = pmhashtranslatecmptype;
#endif

	PG_RETURN_POINTER(amroutine);
}
