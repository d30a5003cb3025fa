/*-------------------------------------------------------------------------
 *
 * pmxlog.c
 *	  Writing pmhash's WAL records.
 *
 * Each function writes one record and returns its position (a copy's
 * content takes several); when each is called relative to its change and
 * lock is in src/README, WAL records.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmxlog.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xloginsert.h"
#include "utils/memutils.h"

#include "pmhash.h"
#include "pmxlog.h"

#define COPY_DATA_PART		(256 * 1024)	/* bytes of a copy per COPY_DATA record */

/* Log the creation of an empty index file. */
XLogRecPtr
pmhash_log_create(const RelFileLocator *node, uint64 generation, uint32 shard_bits, uint32 flags)
{
	xl_pmhash_create xlrec;

	xlrec.node = *node;
	xlrec.generation = generation;
	xlrec.shard_bits = shard_bits;
	xlrec.flags = flags;
	XLogBeginInsert();
	XLogRegisterData((char *) &xlrec, sizeof(xlrec));
	return XLogInsert(RM_PMHASH_ID, XLOG_PMHASH_CREATE);
}

/* Log the end of a build outside a transaction (CREATE_BUILDING). */
XLogRecPtr
pmhash_log_built(const RelFileLocator *node)
{
	xl_pmhash_built xlrec;

	xlrec.node = *node;
	XLogBeginInsert();
	XLogRegisterData((char *) &xlrec, sizeof(xlrec));
	return XLogInsert(RM_PMHASH_ID, XLOG_PMHASH_BUILT);
}

/* Log a batch of inserted entries, stamped in the file no earlier than since. */
XLogRecPtr
pmhash_log_inserts(const RelFileLocator *node, const PmhEntry *entries, uint32 count,
				XLogRecPtr since)
{
	xl_pmhash_insert xlrec;
	char	   *packed = palloc(count * PACKED_ENTRY_SIZE);
	XLogRecPtr	lsn;

	for (uint32 i = 0; i < count; i++)
	{
		memcpy(packed + i * PACKED_ENTRY_SIZE, &entries[i].hash, sizeof(uint32));
		memcpy(packed + i * PACKED_ENTRY_SIZE + sizeof(uint32), &entries[i].tid,
			   sizeof(ItemPointerData));
	}
	xlrec.node = *node;
	xlrec.count = count;
	xlrec.since = since;
	XLogBeginInsert();
	XLogRegisterData((char *) &xlrec, sizeof(xlrec));
	XLogRegisterData(packed, count * PACKED_ENTRY_SIZE);
	lsn = XLogInsert(RM_PMHASH_ID, XLOG_PMHASH_INSERT);
	pfree(packed);
	return lsn;
}

/* qsort comparator: entries by TID. */
int
pmhash_entry_tid_cmp(const void *a, const void *b)
{
	return pmh_tid_cmp(((const PmhEntry *) a)->tid, ((const PmhEntry *) b)->tid);
}

/*
 * Log a shard's entries, compactly encoded, as a REBUILD or SPLIT (with
 * their hash codes), DELETE or KILL record; a KILL's header carries
 * conflict_horizon, a SPLIT's the map before the split.
 */
static XLogRecPtr
log_entries(const RelFileLocator *node, uint8 info, uint32 shard, double fill,
			TransactionId conflict_horizon, uint64 map, const PmhEntry *entries, uint64 count)
{
	union
	{
		xl_pmhash_entries entries;
		xl_pmhash_kill kill;
		xl_pmhash_split split;
	}			xlrec;
	uint8	   *encoded = palloc_extended(pmh_encoded_max(count), MCXT_ALLOC_HUGE);
	size_t		len;
	XLogRecPtr	lsn;

	len = pmh_encode_entries(entries, count,
							 info == XLOG_PMHASH_REBUILD || info == XLOG_PMHASH_SPLIT ||
							 info == XLOG_PMHASH_DELETE_EXACT,
							 encoded);
	/* no uninitialized padding goes into the WAL */
	memset(&xlrec, 0, sizeof(xlrec));
	xlrec.entries.node = *node;
	xlrec.entries.shard = shard;
	xlrec.entries.fill_permille = (uint32) (fill * 1000);
	xlrec.entries.count = count;
	XLogBeginInsert();
	if (info == XLOG_PMHASH_KILL)
	{
		xlrec.kill.conflict_horizon = conflict_horizon;
		XLogRegisterData((char *) &xlrec, sizeof(xl_pmhash_kill));
	}
	else if (info == XLOG_PMHASH_SPLIT)
	{
		xlrec.split.map = map;
		XLogRegisterData((char *) &xlrec, sizeof(xl_pmhash_split));
	}
	else
		XLogRegisterData((char *) &xlrec, sizeof(xl_pmhash_entries));
	if (len > 0)
		XLogRegisterData((char *) encoded, len);
	lsn = XLogInsert(RM_PMHASH_ID, info);
	pfree(encoded);
	return lsn;
}

/* Log the whole content of a rebuilt shard, sorted by hash. */
XLogRecPtr
pmhash_log_rebuild(const RelFileLocator *node, uint32 shard, double fill,
				const PmhEntry *entries, uint64 count)
{
	return log_entries(node, XLOG_PMHASH_REBUILD, shard, fill, InvalidTransactionId, 0,
					   entries, count);
}

/* Log a split of the shard at map's split pointer (slot), with its entries sorted by hash. */
XLogRecPtr
pmhash_log_split(const RelFileLocator *node, uint32 slot, uint64 map, const PmhEntry *entries,
				 uint64 count)
{
	return log_entries(node, XLOG_PMHASH_SPLIT, slot, 0, InvalidTransactionId, map, entries,
					   count);
}

/* Log the shard map of an index. */
XLogRecPtr
pmhash_log_map(const RelFileLocator *node, uint64 map)
{
	xl_pmhash_map xlrec;

	xlrec.node = *node;
	xlrec.map = map;
	XLogBeginInsert();
	XLogRegisterData((char *) &xlrec, sizeof(xlrec));
	return XLogInsert(RM_PMHASH_ID, XLOG_PMHASH_MAP);
}

/*
 * Log the entries removed from a shard: by VACUUM (DELETE), by a scan that
 * found their rows dead to every transaction (KILL, with the conflict
 * horizon of hot-standby queries), or by VACUUM as phantoms on reused TIDs
 * (DELETE_EXACT).  Sorted here as their encoding needs.
 */
XLogRecPtr
pmhash_log_delete(const RelFileLocator *node, uint32 shard, PmhashRemoval removal,
				  TransactionId conflict_horizon, PmhEntry *entries, uint64 count)
{
	if (removal == PMHASH_REMOVAL_PHANTOMS)
	{
		qsort(entries, count, sizeof(PmhEntry), pmh_entry_cmp);
		return log_entries(node, XLOG_PMHASH_DELETE_EXACT, shard, 0, InvalidTransactionId, 0,
						   entries, count);
	}
	qsort(entries, count, sizeof(PmhEntry), pmhash_entry_tid_cmp);
	return log_entries(node, removal == PMHASH_REMOVAL_KILL ? XLOG_PMHASH_KILL : XLOG_PMHASH_DELETE,
					   shard, 0, conflict_horizon, 0, entries, count);
}

/* Whether len bytes at data are all zero. */
static bool
all_zero(const char *data, size_t len)
{
	for (size_t i = 0; i < len; i++)
	{
		if (data[i] != 0)
			return false;
	}
	return true;
}

/*
 * Log the whole content of a file copied to a new relfilenode, as it is at
 * base, in parts of COPY_DATA_PART bytes; parts of zeros between the first
 * and the last are left out, since replay creates the file zeroed.
 */
void
pmhash_log_copy(const RelFileLocator *to, const char *base, uint64 size)
{
	for (uint64 offset = 0; offset < size; offset += COPY_DATA_PART)
	{
		xl_pmhash_copy_data xlrec;

		memset(&xlrec, 0, sizeof(xlrec));
		xlrec.node = *to;
		xlrec.size = (uint32) Min(COPY_DATA_PART, size - offset);
		xlrec.offset = offset;
		xlrec.file_size = size;
		if (offset == 0)
			xlrec.flags |= XLOG_PMHASH_COPY_FIRST;
		if (offset + xlrec.size == size)
			xlrec.flags |= XLOG_PMHASH_COPY_LAST;
		if (xlrec.flags == 0 && all_zero(base + offset, xlrec.size))
			continue;
		XLogBeginInsert();
		XLogRegisterData((char *) &xlrec, sizeof(xlrec));
		XLogRegisterData((char *) base + offset, xlrec.size);
		(void) XLogInsert(RM_PMHASH_ID, XLOG_PMHASH_COPY_DATA);
	}
}
