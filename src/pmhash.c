/*-------------------------------------------------------------------------
 *
 * pmhash.c
 *	  Module initialization, reloptions and the access method handler of
 *	  pmhash.
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

#include "pmhash.h"

PG_MODULE_MAGIC;

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

	pmhash_define_settings();
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
