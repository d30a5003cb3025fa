/*-------------------------------------------------------------------------
 *
 * pmmeta.c
 *	  The metapage: block 0 of an index's main fork.
 *
 * Each index has a small ordinary main fork whose block 0 records the build
 * generation of its file, its shard bits and the pmhash.directory it was
 * created in; core's transactional storage carries the main fork through
 * DROP, TRUNCATE, REINDEX and recovery.  A file whose header does not match its
 * metapage is damaged.  An unlogged index's init fork holds a metapage
 * marked to reset the file after a crash.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmmeta.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xloginsert.h"
#include "common/pg_prng.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/smgr.h"
#include "utils/builtins.h"
#include "utils/rel.h"

#include "pmhash.h"

/* Read and check the metapage of an index (and its LSN, if lsn is not NULL). */
void
pmhash_read_meta(Relation index, PmhashMetaData *meta, XLogRecPtr *lsn)
{
	Buffer		buf;
	Page		page;
	PmhashPageOpaqueData *opaque;
	PmhashMetaData *m;

	if (RelationGetNumberOfBlocks(index) == 0)
		pmhash_raise_damaged(RelationGetRelationName(index), "The index has no metapage.");
	buf = ReadBuffer(index, PMHASH_META_BLKNO);
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	opaque = (PmhashPageOpaqueData *) PageGetSpecialPointer(page);
	m = (PmhashMetaData *) PageGetContents(page);
	if (PageIsNew(page) || PageGetSpecialSize(page) != MAXALIGN(sizeof(PmhashPageOpaqueData)) ||
		opaque->page_id != PMHASH_PAGE_ID || m->magic != PMHASH_META_MAGIC ||
		m->version != PMHASH_META_VERSION || m->shard_bits > PMH_MAX_SHARD_BITS)
	{
		UnlockReleaseBuffer(buf);
		pmhash_raise_damaged(RelationGetRelationName(index),
						  "The metapage is not a pmhash metapage.");
	}
	memcpy(meta, m, sizeof(PmhashMetaData));
	if (lsn)
		*lsn = PageGetLSN(page);
	UnlockReleaseBuffer(buf);
}

/* Lay out a metapage in a page image. */
static void
fill_meta_page(Page page, const PmhashMetaData *meta)
{
	PmhashPageOpaqueData *opaque;

	PageInit(page, BLCKSZ, sizeof(PmhashPageOpaqueData));
	opaque = (PmhashPageOpaqueData *) PageGetSpecialPointer(page);
	opaque->page_id = PMHASH_PAGE_ID;
	memcpy(PageGetContents(page), meta, sizeof(PmhashMetaData));
	((PageHeader) page)->pd_lower = (PageGetContents(page) + sizeof(PmhashMetaData)) - (char *) page;
}

/*
 * Write the metapage of a fork: the main fork through shared buffers, the
 * init fork of an unlogged index directly (as contrib/bloom does).
 */
void
pmhash_write_meta(Relation index, ForkNumber fork, const PmhashMetaData *meta)
{
	if (fork == MAIN_FORKNUM)
	{
		Buffer		buf;

		if (RelationGetNumberOfBlocks(index) == 0)
			buf = ReadBufferExtended(index, MAIN_FORKNUM, P_NEW, RBM_NORMAL, NULL);
		else
			buf = ReadBuffer(index, PMHASH_META_BLKNO);
		Assert(BufferGetBlockNumber(buf) == PMHASH_META_BLKNO);
		LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
		START_CRIT_SECTION();
		fill_meta_page(BufferGetPage(buf), meta);
		MarkBufferDirty(buf);
		if (RelationNeedsWAL(index))
			log_newpage_buffer(buf, true);
		END_CRIT_SECTION();
		UnlockReleaseBuffer(buf);
	}
	else
	{
		PGAlignedBlock block;

		fill_meta_page(block.data, meta);
		PageSetChecksumInplace(block.data, PMHASH_META_BLKNO);
		smgrwrite(RelationGetSmgr(index), fork, PMHASH_META_BLKNO, block.data, true);
		log_newpage(&index->rd_locator, fork, PMHASH_META_BLKNO, block.data, true);
		smgrimmedsync(RelationGetSmgr(index), fork);
	}
}

/* A random, nonzero build generation. */
uint64
pmhash_new_generation(void)
{
	uint64		gen = 0;

	while (gen == 0)
	{
		if (!pg_strong_random(&gen, sizeof(gen)))
			gen = pg_prng_uint64(&pg_global_prng_state);
	}
	return gen;
}

/* Metapage contents for a file. */
void
pmhash_make_meta(PmhashMetaData *meta, uint64 generation, uint32 shard_bits, uint32 flags)
{
	memset(meta, 0, sizeof(PmhashMetaData));
	meta->magic = PMHASH_META_MAGIC;
	meta->version = PMHASH_META_VERSION;
	meta->build_generation = generation;
	meta->shard_bits = shard_bits;
	meta->flags = flags;
	strlcpy(meta->directory, pmhash_directory, MAXPGPATH);
}

/* Metapage of the init fork of an unlogged index. */
void
pmhash_write_init_meta(Relation index, uint32 shard_bits)
{
	PmhashMetaData meta;

	pmhash_make_meta(&meta, 0, shard_bits, PMHASH_META_INIT_FORK);
	pmhash_write_meta(index, INIT_FORKNUM, &meta);
}
