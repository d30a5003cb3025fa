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
#include "tcop/utility.h"
#include "pmcompat.h"
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

/* equality's operator number: btree's since 0.2, 1 in 0.1 (pmvalidate.c) */
#define PMHASH_EQUAL_STRATEGY		3
#define PMHASH_EQUAL_STRATEGY_0_1	1

#define PMHASH_DEFAULT_FILLFACTOR	75	/* as for hash indexes */
#define PMHASH_MIN_FILLFACTOR		10

#define PMHASH_MAX_SHARDS		(1 << PMH_MAX_SHARD_BITS)
#define PMHASH_SHARD_CHUNKS	(PMH_MAX_SHARD_BITS + 1)	/* of a share's shard states */
#define PMHASH_WEIGH_EVERY	256		/* a shard's entries between looks at the
										 * shards' average (pmshard.c) */
#define PMHASH_WEIGH_SLOTS	128		/* slots whose counters estimate the average */
#define PMHASH_SHARD_ENTRIES	2048	/* target size of a shard: builds aim at it, and
										 * a shard this full that must grow splits the
										 * shard at the split pointer first */
#define PMHASH_MAX_RETIRED		32

/*
 * Per-shard state in shared memory: the mirror and counters.  The
 * mirror holds only validated values (checked when the file was attached,
 * or computed when the segment was written); every operation takes its
 * segment from it, never from the file's descriptors or segment header.
 */
typedef struct PmhashShardState
{
	PmhShardMirror mirror;		/* written under the shard lock */
	PmhCounts	counts;			/* protected by the shard lock */
	uint64		removals;		/* entries removed (by VACUUM); under the shard lock */
	bool		broken;			/* recovery: the segment failed validation */
} PmhashShardState;

/* A segment waiting until no reader can still be inside it. */
typedef struct PmhashRetired
{
	uint64		unit;
	uint64		units;
	uint64		epoch;
} PmhashRetired;

typedef enum PmhashShareState
{
	PMHASH_SHARE_FREE = 0,
	PMHASH_SHARE_READY
} PmhashShareState;

/* Identity of an index file: relfilenode (tablespace zeroed) plus owning backend for temp. */
typedef struct PmhashFileKey
{
	RelFileLocator node;
	ProcNumber	backend;
} PmhashFileKey;

/* Shared state of one attached index. */
typedef struct PmhashShare
{
	PmhashFileKey	key;
	uint32		share_gen;		/* changes whenever the share changes hands */
	PmhashShareState state;
	uint64		build_generation;
	uint32		shard_bits;
	pg_atomic_uint64 shard_map;	/* level, split pointer, descriptor unit */
	bool		map_logged;		/* a MAP record was written since attaching */
	bool		checksums;		/* buckets and posting blocks carry checksums */
	bool		durable;		/* false for temporary indexes */
	uint64		last_use;		/* attach clock, for eviction */
	pg_atomic_uint64 file_units;	/* current length of the file */
	pg_atomic_uint32 unsynced;	/* changes since the syncer's last sync */
	uint64		pool_unit;		/* shared pool space of this share */
	uint64		pool_units;
	/*
	 * Shard states by slot, in chunks: chunk 0 (in the share's pool space)
	 * holds slots below 2^(shard_bits + 1), chunk k >= 1 the 2^(shard_bits +
	 * k) slots from 2^(shard_bits + k), in pool space of its own, taken when
	 * a split first needs a slot of it (pmhash_share_reserve).
	 */
	PmhashShardState *chunks[PMHASH_SHARD_CHUNKS];
	PmhExtent	chunk_pool[PMHASH_SHARD_CHUNKS];	/* pool space of chunks 1 on */
	PmhFreeMap	freemap;		/* file space; under the allocation lock */
	PmhExtent	freemap_pool;	/* pool space of the free map's extents */
	int			nretired;
	PmhashRetired	retired[PMHASH_MAX_RETIRED];
	int			alloc_lock;		/* index into the lock array */
	char		path[MAXPGPATH];
} PmhashShare;

/* The state of a slot's shard in a share (its chunk must exist). */
static inline PmhashShardState *
pmhash_shard_state(PmhashShare *share, uint32 slot)
{
	int			top;

	if (slot < (UINT32_C(2) << share->shard_bits))
		return &share->chunks[0][slot];
	top = pg_leftmost_one_pos32(slot);
	return &share->chunks[top - share->shard_bits][slot - (UINT32_C(1) << top)];
}

/* What one backend knows about one index file. */
typedef struct PmhashLocal
{
	PmhashFileKey	key;			/* hash key */
	PmhashShare    *share;
	uint32		share_gen;
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
	XLogRecPtr	dirty_since;	/* WAL insert position at the first of them */
	bool		left_to_syncer; /* a commit left changes to the syncer */
	bool		deferred;		/* bulk build: flushes wait for the end */
	bool		building;		/* this backend rebuilds it from the table */
	bool		logged;			/* changes are WAL-logged (set by each open) */
	bool		redo_dirty;		/* replay changed it since its last sync */
	PmhEntry   *pending;		/* inserted entries not yet WAL-logged */
	SubTransactionId *pending_subids;	/* the subtransaction of each */
	uint32		npending;
	XLogRecPtr	pending_since;	/* earliest stamp among them */
	RelFileLocator node;			/* full identity for WAL records */
} PmhashLocal;

/*
 * Entries a scan found dead to every transaction under the one hash code it
 * probed, and the state of that code's shard before the probe (pmvacuum.c).
 */
typedef struct PmhashKilled
{
	uint32		code;
	uint32		share_gen;
	uint64		removals;
	ItemPointer tids;			/* in any order, repeats allowed */
	int			ntids;
	int			maxtids;
} PmhashKilled;

/* Who removed entries from a shard, which says how replay finds them. */
typedef enum PmhashRemoval
{
	PMHASH_REMOVAL_VACUUM,		/* dead rows and phantoms on unused TIDs: by TID */
	PMHASH_REMOVAL_KILL,		/* rows a scan found dead: by TID, with a horizon */
	PMHASH_REMOVAL_PHANTOMS		/* phantoms on TIDs the heap reused: by hash and TID */
} PmhashRemoval;

/* Reads keys of heap tuples as an index computes them (pmkey.c). */
typedef struct PmhashKeyReader
{
	Relation	heap;
	Relation	index;
	IndexInfo  *info;
	int			nkeys;			/* key columns */
	FmgrInfo   *eq;				/* each column's equality function */
	EState	   *estate;			/* for expressions, else NULL */
	bool		owns_expressions;	/* prepared the expressions in estate */
	ExprState  *predicate;		/* a partial index's, in estate, else NULL */
	TupleTableSlot *slot;
	struct IndexFetchTableData *fetch;
} PmhashKeyReader;

/* pmsettings.c */
extern char *pmhash_directory;
extern int	pmhash_max_indexes;
extern int	pmhash_max_shards;
extern int	pmhash_shard_locks;
extern bool pmhash_os_crash_shadows;
extern int	pmhash_split_pause_step;
extern int	pmhash_rebuild_pause_step;
extern int	pmhash_sync_interval;
extern bool pmhash_preloaded;
extern void pmhash_define_settings(void);
extern void pmhash_check_preloaded(void);

/* pmhash.c */
extern Datum pmhash_handler(PG_FUNCTION_ARGS);

/* pmshmem.c */
extern void pmhash_shmem_request(void);
extern void pmhash_shmem_startup(void);
extern void pmhash_enter(void);
extern void pmhash_leave(void);
extern void pmhash_leave_all(void);
extern bool pmhash_entered(void);
extern LWLock *pmhash_shard_lock(PmhashShare *share, uint32 shard);
extern void pmhash_lock_shard_pair(PmhashShare *share, uint32 a, uint32 b);
extern void pmhash_unlock_shard_pair(PmhashShare *share, uint32 a, uint32 b);
extern LWLock *pmhash_share_table_lock(void);
extern LWLock *pmhash_file_lock(void);
extern LWLock *pmhash_alloc_lock(PmhashShare *share);
extern LWLock *pmhash_descriptor_lock(PmhashShare *share);
extern PmhashShare *pmhash_share_find(const PmhashFileKey *key);
extern void pmhash_shares_detach_all(void (*on_broken) (PmhashShare *share));
extern PmhashShare *pmhash_share_assign(const PmhashFileKey *key, uint32 shard_bits,
										uint32 nslots);
extern bool pmhash_share_reserve(PmhashShare *share, uint32 nslots);
extern bool pmhash_share_make_room(PmhashShare *share, uint32 slot);
extern void pmhash_share_release(PmhashShare *share);
extern void pmhash_forget_file(const PmhashFileKey *key);
extern uint64 pmhash_forget_counter(void);
extern void pmhash_set_flagged_from(XLogRecPtr position);
extern XLogRecPtr pmhash_flagged_from(void);
extern XLogRecPtr pmhash_defer_floor(void);
extern void pmhash_set_defer_floor(XLogRecPtr position);
extern XLogRecPtr pmhash_durable_position(void);
extern void pmhash_set_durable_position(XLogRecPtr position);
extern void pmhash_share_mark_unsynced(PmhashShare *share);
extern int	pmhash_collect_unsynced(char (*paths)[MAXPGPATH], int max);
extern uint64 pmhash_retire_epoch(void);
extern void pmhash_wait_for_readers(uint64 epoch);
extern bool pmhash_readers_done(uint64 epoch);

/* pmdirectory.c */
extern void pmhash_directory_ensure(void);
extern void pmhash_directory_lock(void);
extern bool pmhash_recovering_from_backup(void);
extern bool pmhash_directory_restore_begin(void);
extern void pmhash_directory_restore_end(XLogRecPtr end);
extern bool pmhash_directory_lost_to_restore(XLogRecPtr meta_lsn);

/* pmfault.c */
extern void pmhash_fault_init(void);
extern void pmhash_fault_register(const char *base, size_t len);
extern void pmhash_fault_unregister(const char *base);
extern void pmhash_fault_set_index(const char *name);
extern void pmhash_report_damaged(int elevel, const char *index_name, const char *detail);
pg_noreturn extern void pmhash_raise_damaged(const char *index_name, const char *detail);

/* pmfilename.c */
extern void pmhash_file_key(Relation index, PmhashFileKey *key);
extern void pmhash_permanent_key(const RelFileLocator *node, PmhashFileKey *key);
extern void pmhash_file_path(const PmhashFileKey *key, char *path);
extern bool pmhash_parse_file_name(const char *name, Oid *db, Oid *rel, ProcNumber *backend);
extern bool pmhash_is_plain_file(const char *path);

/* pmshadow.c */
extern void pmhash_shadow_synced(const char *path, const char *base, uint64 offset, uint64 len);
extern void pmhash_shadow_synced_file(const char *path, int fd);
extern void pmhash_shadow_forget(const char *path);

/* pmdurable.c */
#define PMHASH_SLOT_NAME	"pmhash_durable"	/* keeps the WAL from the durable position */

/* What crash recovery knows of the durable position. */
typedef enum PmhashDurableKnown
{
	PMHASH_DURABLE_NONE,		/* no commit left anything to the syncer */
	PMHASH_DURABLE_AT,			/* replay from the position */
	PMHASH_DURABLE_LOST			/* the position and its WAL are both lost */
} PmhashDurableKnown;

#define PMHASH_BOOT_ID_SIZE	16	/* bytes of a boot id (PmhFileHeader.redo_boot) */

extern void pmhash_fsync_file(const char *path);
extern bool pmhash_boot_id(uint8 id[PMHASH_BOOT_ID_SIZE]);
extern bool pmhash_same_boot(const uint8 recorded[PMHASH_BOOT_ID_SIZE]);
extern bool pmhash_durable_read(XLogRecPtr *position);
extern void pmhash_durable_write(XLogRecPtr position);
extern PmhashDurableKnown pmhash_durable_recall(XLogRecPtr *position);
extern void pmhash_durable_drop_unusable_slot(void);

/* pmmeta.c */
extern void pmhash_read_meta(Relation index, PmhashMetaData *meta, XLogRecPtr *lsn);
extern void pmhash_write_meta(Relation index, ForkNumber fork, const PmhashMetaData *meta);
extern uint64 pmhash_new_generation(void);
extern void pmhash_make_meta(PmhashMetaData *meta, uint64 generation, uint32 shard_bits,
						  uint32 flags);
extern void pmhash_write_init_meta(Relation index, uint32 shard_bits);

/* pmmap.c */
extern PmhashLocal *pmhash_local_entry(const PmhashFileKey *key);
extern void pmhash_unmap_local(PmhashLocal *ix);
extern void pmhash_drop_local(const PmhashFileKey *key);
extern void pmhash_prune_locals(void);
extern void pmhash_map_file(PmhashLocal *ix, const char *path);
extern void pmhash_ensure_mapped(PmhashLocal *ix, uint64 end_unit);
extern void pmhash_foreach_local(void (*fn) (PmhashLocal *ix));
extern void pmhash_pmem_flush(void *arg, const void *addr, size_t len);
extern void pmhash_pmem_drain(void *arg);
extern void pmhash_sync_dirty(PmhashLocal *ix);
extern void pmhash_sync_for_commit(void);
extern void pmhash_sync_or_leave(PmhashLocal *ix);
extern void pmhash_sync_all_dirty(void);
extern PmhPersist pmhash_normal_persist(PmhashLocal *ix);
extern void pmhash_pause_after(int steps, const char *setting);
extern void pmhash_count_step(void);
extern void pmhash_persist_range(char *base, size_t len, int is_pmem, const char *path);
extern void pmhash_redo_will_change(PmhashLocal *ix);
extern void pmhash_redo_synced(XLogRecPtr lsn);
extern void pmhash_mark_built(PmhashLocal *ix);

/* pmspace.c */
extern uint64 pmhash_space_alloc(void *arg, uint64 units);
extern void pmhash_space_free(void *arg, uint64 unit, uint64 units);
extern void pmhash_finish_build(PmhashLocal *ix);

/* pmstorage.c */
extern void pmhash_create_file(const PmhashFileKey *key, const char *path, uint32 shard_bits,
							uint64 generation, uint32 state, bool durable, bool transactional,
							FullTransactionId creator);
extern void pmhash_create_for_redo(const RelFileLocator *node, uint64 generation, uint32 shard_bits,
								uint32 state, FullTransactionId creator);
extern bool pmhash_copy_file(const RelFileLocator *from, const RelFileLocator *to, bool logged);
extern bool pmhash_copy_data_for_redo(const RelFileLocator *node, uint64 file_size, uint64 offset,
									  const char *data, uint32 size, uint32 flags);
extern void pmhash_create_placeholder(const RelFileLocator *node);
extern const char *pmhash_read_file_header(const char *path, PmhFileHeader *hdr);
extern void pmhash_set_file_state(const char *path, uint64 set_bits);
extern void pmhash_settle_file_creator(const char *path);
extern void pmhash_unlink_file(const char *path);

/* pmattach.c */
extern PmhashLocal *pmhash_open_file(Relation index);
extern PmhashLocal *pmhash_open_for_redo(const RelFileLocator *node);
extern PmhashLocal *pmhash_create(Relation index, uint32 shard_bits, bool deferred, bool transactional);
extern const char *pmhash_check_attached_header(PmhashLocal *ix);
extern void pmhash_log_map_once(PmhashLocal *ix);

/* pmshard.c */
#define PMHASH_INSERT_BATCH		256		/* entries per INSERT record at most */

/*
 * Decides, under the shard lock and just before an insert, whether the
 * insert may proceed (src/README, Unique indexes).
 */
typedef bool (*PmhashInsertGate) (void *arg, const PmhSegment *seg,
								  const PmhashShardState *state, uint32 share_gen);

extern int	pmhash_tid_cmp(const void *a, const void *b);
extern void pmhash_check_tid(Relation index, ItemPointer tid);
extern bool pmhash_insert_entry(Relation index, PmhashLocal *ix, uint32 hash, ItemPointer tid,
								PmhInsertMode mode, PmhashInsertGate gate, void *gate_arg);
extern int	pmhash_lookup_entries(Relation index, PmhashLocal *ix, Relation heap,
								  const uint32 *hashes, int n, ItemPointer *tids, int *ntids,
								  int *maxtids, ItemPointer *apart, int *napart);
extern void pmhash_shard_segment(PmhashLocal *ix, uint32 shard, PmhSegment *seg);
extern uint32 pmhash_slots(PmhashLocal *ix);
extern uint32 pmhash_slot_of(PmhashLocal *ix, uint32 hash);
extern uint32 pmhash_lock_shard_of(PmhashLocal *ix, uint32 hash, LWLockMode mode);
extern BlockNumber pmhash_predicate_block(PmhashLocal *ix, uint32 hash);
extern uint64 pmhash_shard_entries(Relation index, PmhashLocal *ix, uint32 shard,
								   PmhEntry **entries, uint64 *maxentries);
extern char *pmhash_shard_damage_detail(uint32 shard);
pg_noreturn extern void pmhash_raise_shard_damaged(const char *index_name, uint32 shard);

/* pmkey.c */

/*
 * The hash code of a key of several columns: each column's hash folded,
 * in column order, into the code of the columns before it (a key of one
 * column is coded by its column's hash alone).  Codes are stored, so this
 * is part of the file format.
 */
static inline uint32
pmhash_fold_hash(uint32 code, uint32 column_hash)
{
	code ^= column_hash + 0x9e3779b9 + (code << 6) + (code >> 2);
	/* murmur3's finalizer: every bit of both inputs reaches every bit */
	code ^= code >> 16;
	code *= 0x85ebca6b;
	code ^= code >> 13;
	code *= 0xc2b2ae35;
	code ^= code >> 16;
	return code;
}

extern uint32 pmhash_hash_key(Relation index, const Datum *key, const bool *isnull);
extern void pmhash_key_reader_begin(PmhashKeyReader *kr, Relation heap, Relation index,
									IndexInfo *info);
extern bool pmhash_key_read(PmhashKeyReader *kr, ItemPointer tid, Snapshot snapshot, Datum *key,
							bool *all_dead, bool *unsettled);
extern bool pmhash_key_read_live(PmhashKeyReader *kr, ItemPointer tid, Datum *key);
extern bool pmhash_key_chain_holds(PmhashKeyReader *kr, ItemPointer tid, uint32 hash,
								   uint32 shard_bits);
extern bool pmhash_key_chain_indexed(PmhashKeyReader *kr, ItemPointer tid);
extern bool pmhash_keys_equal(PmhashKeyReader *kr, const Datum *a, const Datum *b);
extern Datum *pmhash_key_copy(Relation index, const Datum *key);
extern char *pmhash_key_description(Relation index, const Datum *key);
extern void pmhash_key_reader_release(PmhashKeyReader *kr);
extern void pmhash_key_reader_end(PmhashKeyReader *kr);

/* pmxlog.c */
extern XLogRecPtr pmhash_log_create(const RelFileLocator *node, uint64 generation, uint32 shard_bits,
								 uint32 flags);
extern XLogRecPtr pmhash_log_built(const RelFileLocator *node);
extern XLogRecPtr pmhash_log_inserts(const RelFileLocator *node, const PmhEntry *entries,
								  uint32 count, XLogRecPtr since);
extern XLogRecPtr pmhash_log_split(const RelFileLocator *node, uint32 slot, uint64 map,
								   const PmhEntry *entries, uint64 count);
extern XLogRecPtr pmhash_log_map(const RelFileLocator *node, uint64 map);
extern XLogRecPtr pmhash_log_rebuild(const RelFileLocator *node, uint32 shard, double fill,
								  const PmhEntry *entries, uint64 count);
extern XLogRecPtr pmhash_log_delete(const RelFileLocator *node, uint32 shard, PmhashRemoval removal,
								 TransactionId conflict_horizon, PmhEntry *entries,
								 uint64 count);
extern void pmhash_log_copy(const RelFileLocator *to, const char *base, uint64 size);
extern int	pmhash_entry_tid_cmp(const void *a, const void *b);

/* pmredo.c */
extern void pmhash_wal_register(void);

/* pmrecovery.c */
/* Why recovery distrusts every index file and rebuilds them all. */
typedef enum PmhashDistrust
{
	PMHASH_TRUST_FILES,			/* none: flag their unverified entries */
	PMHASH_DISTRUST_BACKUP,		/* a restored base backup lacks them */
	PMHASH_DISTRUST_WAL_GONE,	/* the WAL from the durable position is gone */
	PMHASH_DISTRUST_DURABLE_LOST	/* the durable position and its WAL are */
} PmhashDistrust;

extern void pmhash_recovery_flag_files(XLogRecPtr point, PmhashDistrust distrust);
extern void pmhash_recovery_after_crash(void);
extern void pmhash_recovery_finish(void);
extern void pmhash_mark_needs_rebuild(const RelFileLocator *node);

/* pmbuild.c */
extern PmhashLocal *pmhash_open(Relation index, bool *rebuilt);
extern double pmhash_build_fill(Relation index);
extern char *pmhashbuildphasename(int64 phasenum);

/* pmunique.c */
extern bool pmhash_insert_unique(Relation index, Relation heap, IndexInfo *info, uint32 hash,
								 const Datum *key, ItemPointer tid, IndexUniqueCheck check);

/* pmupsert.c */
extern void pmhash_upsert_init(void);

/* pmgates.c */
extern void pmhash_gates_run(ProcessUtility_hook_type next, PlannedStmt *pstmt,
							 const char *queryString, bool readOnlyTree,
							 ProcessUtilityContext context, ParamListInfo params,
							 QueryEnvironment *queryEnv, DestReceiver *dest,
							 QueryCompletion *qc);

/* pmelements.c and pmsort.c: array elements */

/* An element of a "= ANY(array)" condition, with its hash code. */
typedef struct PmhashArrayElement
{
	uint32		hash;
	Datum		value;
} PmhashArrayElement;

/*
 * The elements of an array condition, sorted by hash code, with where each
 * value of the codes' top bits starts among them (about one element per
 * value): a row's key is compared with the elements of its code only.
 */
typedef struct PmhashElementSet
{
	PmhashArrayElement *elements;	/* NULL: no set */
	int			bits;			/* the top bits of a code that index start */
	int		   *start;			/* per value of those bits, the first
								 * element whose code has it or more; n at
								 * the end */
} PmhashElementSet;

/* pmelements.c */
extern void pmhash_element_set_make(PmhashElementSet *set, PmhashArrayElement *elements, int n);
extern void pmhash_element_set_free(PmhashElementSet *set, bool free_elements);
extern bool pmhash_element_set_contains(Relation index, ScanKey key, const PmhashElementSet *set,
										Datum value);

/* pmsort.c */
extern void pmhash_sort_elements(PmhashArrayElement *elements, int n);
extern void pmhash_sort_codes(uint32 *codes, size_t n);
extern int	pmhash_sort_unique_tids(ItemPointer tids, int n);

/* pmrecheck.c */
extern void pmhash_recheck_init(void);

/* pmprefetch.c: a scan's prefetch of its TIDs' heap pages */
typedef struct PmhashHeapPrefetch
{
	int			prefetched;		/* last TID whose heap page was prefetched */
	BlockNumber prefetched_block;	/* and that page */
	bool		look_up_current;	/* look the page of the TID read at once up */
} PmhashHeapPrefetch;

extern void pmhash_prefetch_begin(PmhashHeapPrefetch *prefetch);
extern void pmhash_prefetch_restart(PmhashHeapPrefetch *prefetch);
extern void pmhash_prefetch_heap(PmhashHeapPrefetch *prefetch, Relation heap, ItemPointer tids,
								 int ntids, int now);

/* pmutility.c */
extern void pmhash_utility_init(void);

/* pmcleaner.c */
extern void pmhash_sweep_orphans(int elevel);
extern FullTransactionId pmhash_recent_full_xid(TransactionId xid);
extern bool pmhash_find_main_fork(Oid db, Oid rel, ProcNumber backend, RelFileLocator *node);
pg_noreturn extern PGDLLEXPORT void pmhash_worker_main(Datum arg);

/* pmsyncer.c */
pg_noreturn extern PGDLLEXPORT void pmhash_syncer_main(Datum arg);

/* pmxact.c */
extern void pmhash_xact_init(void);
extern void pmhash_remember_created(const PmhashFileKey *key, Oid relid, const char *path);
extern void pmhash_queue_insert(PmhashLocal *ix, uint32 hash, PmhTid tid, XLogRecPtr lsn);
extern void pmhash_log_inserts_at_once(void);

/* access method callbacks */
extern IndexBuildResult *pmhashbuild(Relation heap, Relation index, IndexInfo *indexInfo);
extern void pmhashbuildempty(Relation index);
extern bool pmhashinsert(Relation index, Datum *values, bool *isnull, ItemPointer ht_ctid,
						 Relation heapRel, IndexUniqueCheck checkUnique,
						 bool indexUnchanged, IndexInfo *indexInfo);
extern void pmhash_note_probe(PmhashLocal *ix, uint32 code, PmhashKilled *killed);
extern void pmhash_add_killed(PmhashKilled *killed, ItemPointer tid);
extern void pmhash_remove_killed(Relation index, Relation heap, PmhashKilled *killed);
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
extern bool pmhash_is_equal_strategy(int strategy);
extern Oid	pmhash_column_equality(Relation index, int column, StrategyNumber *strategy);
extern void pmhashadjustmembers(Oid opfamilyoid, Oid opclassoid, List *operators,
								List *functions);
extern bool pmhashvalidate(Oid opclassoid);
#if PG_VERSION_NUM >= 180000
extern CompareType pmhashtranslatestrategy(StrategyNumber strategy, Oid opfamily);
extern StrategyNumber pmhashtranslatecmptype(CompareType cmptype, Oid opfamily);
#endif
/*
 * A scan key flag, of the bits left to access methods: the executor
 * rechecks this array condition with a hash table (pmrecheck.c).
 */
#define PMHASH_SK_RECHECK_HASHED	0x00010000

extern IndexScanDesc pmhashbeginscan(Relation index, int nkeys, int norderbys);
extern void pmhashrescan(IndexScanDesc scan, ScanKey keys, int nkeys,
						 ScanKey orderbys, int norderbys);
extern bool pmhashgettuple(IndexScanDesc scan, ScanDirection dir);
extern int64 pmhashgetbitmap(IndexScanDesc scan, TIDBitmap *tbm);
extern void pmhashendscan(IndexScanDesc scan);
extern bool pmhash_scan_kept_elements(IndexScanDesc scan);
extern bool pmhash_scan_array_contains(IndexScanDesc scan, Datum value);

#endif							/* PMHASH_H */
