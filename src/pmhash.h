/*-------------------------------------------------------------------------
 *
 * pmhash.h
 *	  Declarations shared by the pmhash access method's source files.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmhash.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef PMHASH_H
#define PMHASH_H

#include "access/amapi.h"
#include "access/genam.h"
#include "access/transam.h"
#include "access/xlogdefs.h"
#include "nodes/execnodes.h"
#include "nodes/pathnodes.h"
#include "storage/bufpage.h"
#include "storage/lwlock.h"
#include "storage/relfilenode.h"
#include "utils/relcache.h"

#include "core/pmh_core.h"

/* Custom WAL resource manager ID of pmhash (see README: WAL and recovery). */
#define RM_PMHASH_ID			187

/* Metapage: block 0 of the index's main fork. */
#define PMHASH_META_BLKNO		0
#define PMHASH_META_MAGIC		0x504d4831	/* "PMH1" */
#define PMHASH_META_VERSION		1
#define PMHASH_PAGE_ID			0xFF87

/* metapage flags */
#define PMHASH_META_INIT_FORK	0x0001	/* copy kept in an unlogged index's init fork */

typedef struct PmhashMetaData
{
	uint32		magic;
	uint32		version;
	uint64		build_generation;	/* also in the file header */
	uint32		shard_bits;
	uint32		flags;
	char		directory[MAXPGPATH];	/* where the file was created */
} PmhashMetaData;

typedef struct PmhashPageOpaqueData
{
	uint16		unused;
	uint16		page_id;		/* PMHASH_PAGE_ID, for pg_filedump */
} PmhashPageOpaqueData;

/* Reloptions. */
typedef struct PmhashOptions
{
	int32		vl_len_;		/* varlena header (do not touch directly!) */
	int			shards;			/* 0: chosen from the table's size */
	int			fillfactor;		/* percent of bucket slots a build fills */
} PmhashOptions;

#define PMHASH_DEFAULT_FILLFACTOR	75	/* as for hash indexes */
#define PMHASH_MIN_FILLFACTOR		10

#define PMHASH_MAX_SHARDS		(1 << PMH_MAX_SHARD_BITS)
#define PMHASH_MAX_RETIRED		32

/*
 * Per-shard state in shared memory: the directory mirror and counters.  The
 * mirror holds only validated values (checked when the file was attached,
 * or computed when the segment was written); every operation takes its
 * segment from it, never from the file's directory or segment header.
 */
typedef struct PmhShardState
{
	PmhShardMirror mirror;		/* written under the shard lock */
	PmhCounts	counts;			/* protected by the shard lock */
	bool		broken;			/* recovery: the segment failed validation */
} PmhShardState;

/* A segment waiting until no reader can still be inside it. */
typedef struct PmhRetired
{
	uint64		unit;
	uint64		units;
	uint64		epoch;
} PmhRetired;

typedef enum PmhSlotState
{
	PMH_SLOT_FREE = 0,
	PMH_SLOT_READY
} PmhSlotState;

/* Identity of an index file: relfilenode (tablespace zeroed) plus owning backend for temp. */
typedef struct PmhFileKey
{
	RelFileNode node;
	BackendId	backend;
} PmhFileKey;

/* Shared state of one attached index. */
typedef struct PmhSlot
{
	PmhFileKey	key;
	uint32		slot_gen;		/* changes whenever the slot changes hands */
	PmhSlotState state;
	uint64		build_generation;
	uint32		shard_bits;
	bool		checksums;		/* buckets and posting blocks carry checksums */
	bool		durable;		/* false for temporary indexes */
	uint64		last_use;		/* attach clock, for eviction */
	pg_atomic_uint64 file_units;	/* current length of the file */
	uint64		pool_unit;		/* shared pool space of this slot */
	uint64		pool_units;
	PmhShardState *shards;
	PmhFreeMap	freemap;		/* file space; under the allocation lock */
	int			nretired;
	PmhRetired	retired[PMHASH_MAX_RETIRED];
	int			alloc_lock;		/* index into the lock array */
	char		path[MAXPGPATH];
} PmhSlot;

/* What one backend knows about one index file. */
typedef struct PmhIndex
{
	PmhFileKey	key;			/* hash key */
	PmhSlot    *slot;
	uint32		slot_gen;
	char	   *base;			/* our mapping of the file */
	size_t		mapped_len;
	int			is_pmem;
	bool		durable;
	PmhTableOps ops;
	PmhPersist	persist;
	PmhTable	table;
	NameData	name;			/* index name for error reports (set by each open) */
	/* msync path: page ranges dirtied and not yet synced */
	uint64	   *dirty;			/* pairs of (start, end) byte offsets */
	int			ndirty;
	int			maxdirty;
	bool		deferred;		/* bulk build: flushes wait for the end */
	bool		logged;			/* changes are WAL-logged (set by each open) */
	bool		redo_dirty;		/* replay changed it since its last sync */
	PmhEntry   *pending;		/* inserted entries not yet WAL-logged */
	uint32		npending;
	XLogRecPtr	pending_since;	/* earliest stamp among them */
	RelFileNode node;			/* full identity for WAL records */
} PmhIndex;

/* pmhash.c */
extern char *pmhash_directory;
extern int	pmhash_max_indexes;
extern int	pmhash_max_shards;
extern int	pmhash_shard_locks;
extern bool pmhash_preloaded;
extern void pmhash_check_preloaded(void);
extern Datum pmhash_handler(PG_FUNCTION_ARGS);

/* pmshmem.c */
extern void pmh_shmem_request(void);
extern void pmh_shmem_startup(void);
extern void pmh_enter(void);
extern void pmh_leave(void);
extern void pmh_leave_all(void);
extern bool pmh_entered(void);
extern LWLock *pmh_shard_lock(PmhSlot *slot, uint32 shard);
extern LWLock *pmh_slot_table_lock(void);
extern LWLock *pmh_file_lock(void);
extern LWLock *pmh_alloc_lock(PmhSlot *slot);
extern PmhSlot *pmh_slot_find(const PmhFileKey *key);
extern void pmh_slots_detach_all(void (*on_broken) (PmhSlot *slot));
extern PmhSlot *pmh_slot_assign(const PmhFileKey *key, uint32 shard_bits);
extern void pmh_slot_release(PmhSlot *slot);
extern void pmh_forget_file(const PmhFileKey *key);
extern uint64 pmh_forget_counter(void);
extern uint64 pmh_retire_epoch(void);
extern void pmh_wait_for_readers(uint64 epoch);
extern bool pmh_readers_done(uint64 epoch);

/* pmdirectory.c */
extern void pmh_directory_ensure(void);
extern void pmh_directory_lock(void);
extern bool pmh_directory_restore_begin(void);
extern void pmh_directory_restore_end(XLogRecPtr end);
extern bool pmh_directory_lost_to_restore(XLogRecPtr meta_lsn);

/* pmfault.c */
extern void pmh_fault_init(void);
extern void pmh_fault_register(const char *base, size_t len);
extern void pmh_fault_unregister(const char *base);
extern void pmh_fault_set_index(const char *name);
extern void pmh_raise_damaged(const char *index_name, const char *detail) pg_attribute_noreturn();

/* pmfilename.c */
extern void pmh_file_key(Relation index, PmhFileKey *key);
extern void pmh_permanent_key(const RelFileNode *node, PmhFileKey *key);
extern void pmh_file_path(const PmhFileKey *key, char *path);
extern bool pmh_parse_file_name(const char *name, Oid *db, Oid *rel, BackendId *backend);

/* pmmeta.c */
extern void pmh_read_meta(Relation index, PmhashMetaData *meta, XLogRecPtr *lsn);
extern void pmh_write_meta(Relation index, ForkNumber fork, const PmhashMetaData *meta);
extern uint64 pmh_new_generation(void);
extern void pmh_make_meta(PmhashMetaData *meta, uint64 generation, uint32 shard_bits,
						  uint32 flags);
extern void pmh_write_init_meta(Relation index, uint32 shard_bits);

/* pmmap.c */
extern PmhIndex *pmh_local_entry(const PmhFileKey *key);
extern void pmh_unmap_local(PmhIndex *ix);
extern void pmh_drop_local(const PmhFileKey *key);
extern void pmh_prune_locals(void);
extern void pmh_map_file(PmhIndex *ix, const char *path);
extern void pmh_ensure_mapped(PmhIndex *ix, uint64 end_unit);
extern void pmh_foreach_local(void (*fn) (PmhIndex *ix));
extern void pmh_pmem_flush(void *arg, const void *addr, size_t len);
extern void pmh_pmem_drain(void *arg);
extern void pmh_sync_dirty(PmhIndex *ix);
extern void pmh_sync_all_dirty(void);
extern PmhPersist pmh_normal_persist(PmhIndex *ix);
extern void pmh_persist_range(char *base, size_t len, int is_pmem, const char *path);
extern void pmh_redo_will_change(PmhIndex *ix);
extern void pmh_redo_synced(XLogRecPtr lsn);

/* pmspace.c */
extern uint64 pmh_space_alloc(void *arg, uint64 units);
extern void pmh_space_free(void *arg, uint64 unit, uint64 units);
extern void pmh_finish_deferred(PmhIndex *ix);

/* pmstorage.c */
extern void pmh_create_file(const PmhFileKey *key, const char *path, uint32 shard_bits,
							uint64 generation, uint32 state, bool durable, bool transactional,
							FullTransactionId creator);
extern void pmh_create_for_redo(const RelFileNode *node, uint64 generation, uint32 shard_bits,
								FullTransactionId creator);
extern bool pmh_copy_file(const RelFileNode *from, const RelFileNode *to);
extern void pmh_create_placeholder(const RelFileNode *node);
extern bool pmh_read_file_header(const char *path, PmhFileHeader *hdr);
extern void pmh_set_file_state(const char *path, uint64 set_bits);
extern void pmh_settle_file_creator(const char *path);
extern void pmh_unlink_file(const char *path);

/* pmattach.c */
extern PmhIndex *pmh_open_file(Relation index);
extern PmhIndex *pmh_open_for_redo(const RelFileNode *node);
extern PmhIndex *pmh_create(Relation index, uint32 shard_bits, bool deferred, bool transactional);
extern const char *pmh_check_attached_header(PmhIndex *ix);

/* pmshard.c */
#define PMH_INSERT_BATCH		256		/* entries per INSERT record at most */
extern uint32 pmh_hash_datum(Relation index, Datum value);
extern void pmh_check_tid(Relation index, ItemPointer tid);
extern void pmh_insert_entry(Relation index, PmhIndex *ix, uint32 hash, ItemPointer tid);
extern void pmh_lookup_entries(Relation index, PmhIndex *ix, Relation heap, uint32 hash,
							   ItemPointer *tids, int *ntids, int *maxtids);
extern void pmh_shard_segment(PmhIndex *ix, uint32 shard, PmhSegment *seg);
extern void pmh_raise_shard_damaged(const char *index_name, uint32 shard) pg_attribute_noreturn();

/* pmxlog.c */
extern XLogRecPtr pmh_log_create(const RelFileNode *node, uint64 generation, uint32 shard_bits,
								 bool transactional);
extern XLogRecPtr pmh_log_inserts(const RelFileNode *node, const PmhEntry *entries,
								  uint32 count, XLogRecPtr since);
extern XLogRecPtr pmh_log_rebuild(const RelFileNode *node, uint32 shard, double fill,
								  const PmhEntry *entries, uint64 count);
extern XLogRecPtr pmh_log_delete(const RelFileNode *node, uint32 shard, PmhEntry *entries,
								 uint64 count);
extern XLogRecPtr pmh_log_copy(const RelFileNode *from, const RelFileNode *to);
extern int	pmh_entry_tid_cmp(const void *a, const void *b);

/* pmredo.c */
extern void pmh_wal_register(void);

/* pmrecovery.c */
extern void pmh_recovery_flag_files(XLogRecPtr redo_start, bool distrust);
extern void pmh_recovery_finish(void);
extern void pmh_mark_needs_rebuild(const RelFileNode *node);

/* pmbuild.c */
extern PmhIndex *pmh_open(Relation index);
extern double pmh_build_fill(Relation index);

/* pmutility.c */
extern void pmh_utility_init(void);

/* pmcleaner.c */
extern void pmh_sweep_orphans(int elevel);
extern FullTransactionId pmh_recent_full_xid(TransactionId xid);
extern bool pmh_find_main_fork(Oid db, Oid rel, BackendId backend, RelFileNode *node);
extern void pmhash_worker_main(Datum arg) pg_attribute_noreturn();

/* pmxact.c */
extern void pmh_xact_init(void);
extern void pmh_remember_created(const PmhFileKey *key, Oid relid, const char *path);
extern void pmh_queue_insert(PmhIndex *ix, uint32 hash, PmhTid tid, XLogRecPtr lsn);

/* access method callbacks */
extern IndexBuildResult *pmhashbuild(Relation heap, Relation index, IndexInfo *indexInfo);
extern void pmhashbuildempty(Relation index);
extern bool pmhashinsert(Relation index, Datum *values, bool *isnull, ItemPointer ht_ctid,
						 Relation heapRel, IndexUniqueCheck checkUnique,
						 bool indexUnchanged, IndexInfo *indexInfo);
extern IndexBulkDeleteResult *pmhashbulkdelete(IndexVacuumInfo *info,
											   IndexBulkDeleteResult *stats,
											   IndexBulkDeleteCallback callback,
											   void *callback_state);
extern IndexBulkDeleteResult *pmhashvacuumcleanup(IndexVacuumInfo *info,
												  IndexBulkDeleteResult *stats);
extern void pmhashcostestimate(PlannerInfo *root, IndexPath *path, double loop_count,
							   Cost *indexStartupCost, Cost *indexTotalCost,
							   Selectivity *indexSelectivity, double *indexCorrelation,
							   double *indexPages);
extern bytea *pmhashoptions(Datum reloptions, bool validate);
extern bool pmhashvalidate(Oid opclassoid);
extern IndexScanDesc pmhashbeginscan(Relation index, int nkeys, int norderbys);
extern void pmhashrescan(IndexScanDesc scan, ScanKey keys, int nkeys,
						 ScanKey orderbys, int norderbys);
extern bool pmhashgettuple(IndexScanDesc scan, ScanDirection dir);
extern int64 pmhashgetbitmap(IndexScanDesc scan, TIDBitmap *tbm);
extern void pmhashendscan(IndexScanDesc scan);

#endif							/* PMHASH_H */
