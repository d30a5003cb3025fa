/*-------------------------------------------------------------------------
 *
 * pmxlog.h
 *	  WAL record formats of pmhash (resource manager 187).
 *
 * What each record means, when it is written and how it is replayed:
 * src/README, WAL records.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmxlog.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef PMXLOG_H
#define PMXLOG_H

#include "access/xlogdefs.h"
#include "lib/stringinfo.h"
#include "storage/itemptr.h"
#include "pmcompat.h"

#define XLOG_PMHASH_CREATE		0x00
#define XLOG_PMHASH_INSERT		0x10
#define XLOG_PMHASH_DELETE		0x20
#define XLOG_PMHASH_REBUILD		0x30
#define XLOG_PMHASH_COPY		0x40
#define XLOG_PMHASH_BUILT		0x50
#define XLOG_PMHASH_KILL		0x60
#define XLOG_PMHASH_DELETE_EXACT	0x70
#define XLOG_PMHASH_COPY_DATA	0x80
#define XLOG_PMHASH_SPLIT		0x90
#define XLOG_PMHASH_MAP			0xA0

typedef struct xl_pmhash_create
{
	RelFileLocator node;
	uint64		generation;
	uint32		shard_bits;
	uint32		flags;
} xl_pmhash_create;

/* CREATE flags */
#define XLOG_PMHASH_CREATE_TRANSACTIONAL	0x0001	/* undone if the record's
													 * transaction aborts */
#define XLOG_PMHASH_CREATE_BUILDING			0x0002	/* unfinished until a BUILT
													 * record */

/*
 * INSERT: a batch of entries one backend inserted, each stamped in the file
 * with a WAL position no earlier than since.  Followed by count packed
 * (hash, TID) pairs of 10 bytes.
 */
typedef struct xl_pmhash_insert
{
	RelFileLocator node;
	uint32		count;
	XLogRecPtr	since;
} xl_pmhash_insert;

#define PACKED_ENTRY_SIZE	(sizeof(uint32) + sizeof(ItemPointerData))

/*
 * DELETE, DELETE_EXACT and REBUILD: a shard and its entries, encoded by
 * pmh_codec.c: for DELETE only TIDs (sorted), whose every entry in the
 * shard goes; for DELETE_EXACT (hash, TID) pairs (sorted by hash), where
 * other entries of those TIDs stay: phantoms of a crash on TIDs the heap
 * gave to new rows; for REBUILD the whole content (sorted by hash).
 */
typedef struct xl_pmhash_entries
{
	RelFileLocator node;
	uint32		shard;
	uint32		fill_permille;	/* REBUILD: bucket fill of the new layout */
	uint64		count;
} xl_pmhash_entries;

/*
 * COPY, as pmhash 0.2 wrote it: a file copied to a new relfilenode, named
 * by its source alone.  No longer written; replay cannot know the source as
 * of the record, so it has the copy rebuilt from its table.
 */
typedef struct xl_pmhash_copy
{
	RelFileLocator from;
	RelFileLocator to;
} xl_pmhash_copy;

/*
 * COPY_DATA: a part of a file copied to a new relfilenode (ALTER INDEX SET
 * TABLESPACE, CREATE DATABASE), as the copy was made: size bytes at offset,
 * which follow this header.  The parts of one copy are logged in order;
 * parts of zeros between the first and the last are left out.
 */
typedef struct xl_pmhash_copy_data
{
	RelFileLocator node;			/* the copy */
	uint32		flags;
	uint32		size;
	uint64		offset;
	uint64		file_size;		/* of the whole copy */
} xl_pmhash_copy_data;

/* COPY_DATA flags */
#define XLOG_PMHASH_COPY_FIRST	0x0001	/* create the file anew, file_size long */
#define XLOG_PMHASH_COPY_LAST	0x0002	/* the copy is whole: make it durable */

/*
 * KILL: entries a scan found dead to every transaction, removed from one
 * shard; encoded as for DELETE after this header.  Hot-standby queries
 * whose snapshots precede conflict_horizon may still need them.
 */
typedef struct xl_pmhash_kill
{
	xl_pmhash_entries entries;	/* fill_permille unused */
	TransactionId conflict_horizon;
} xl_pmhash_kill;

/* BUILT: a build outside a transaction (CREATE_BUILDING) finished */
/*
 * SPLIT: a shard split at the split pointer of map (the map before the
 * split), entries.shard being its slot; the shard's entries, with their
 * hash codes, follow.
 */
typedef struct xl_pmhash_split
{
	xl_pmhash_entries entries;	/* fill_permille unused */
	uint64		map;
} xl_pmhash_split;

/*
 * MAP: the shard map of an index as a writer found it, logged once per
 * attachment of its share before the first record that names a slot
 * (src/README, The shard map in the WAL).
 */
typedef struct xl_pmhash_map
{
	RelFileLocator node;
	uint64		map;
} xl_pmhash_map;

typedef struct xl_pmhash_built
{
	RelFileLocator node;
} xl_pmhash_built;

/* pmxlogdesc.c */
struct XLogReaderState;
extern void pmhash_desc(StringInfo buf, struct XLogReaderState *record);
extern const char *pmhash_identify(uint8 info);

#endif							/* PMXLOG_H */
