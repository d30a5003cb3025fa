/*-------------------------------------------------------------------------
 *
 * pmxlogdesc.c
 *	  Descriptions of pmhash's WAL records (rm_desc, rm_identify), as
 *	  pg_waldump and pg_walinspect show them.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmxlogdesc.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlogreader.h"
#include "lib/stringinfo.h"

#include "pmhash.h"
#include "pmxlog.h"

/* rm_desc: readable records for pg_walinspect. */
void
pmhash_desc(StringInfo buf, XLogReaderState *record)
{
	uint8		info = XLogRecGetInfo(record) & ~XLR_INFO_MASK;
	char	   *data = XLogRecGetData(record);

	switch (info)
	{
		case XLOG_PMHASH_CREATE:
			{
				xl_pmhash_create *xlrec = (xl_pmhash_create *) data;

				appendStringInfo(buf, "rel %u/%u/%u; generation " UINT64_FORMAT "; shards %u%s%s",
								 xlrec->node.spcOid, xlrec->node.dbOid, xlrec->node.relNumber,
								 xlrec->generation, 1U << xlrec->shard_bits,
								 (xlrec->flags & XLOG_PMHASH_CREATE_TRANSACTIONAL) ? "; transactional" : "",
								 (xlrec->flags & XLOG_PMHASH_CREATE_BUILDING) ? "; rebuild from the table" : "");
				break;
			}
		case XLOG_PMHASH_INSERT:
			{
				xl_pmhash_insert *xlrec = (xl_pmhash_insert *) data;

				appendStringInfo(buf, "rel %u/%u/%u; entries %u; stamped since %X/%X",
								 xlrec->node.spcOid, xlrec->node.dbOid, xlrec->node.relNumber,
								 xlrec->count, LSN_FORMAT_ARGS(xlrec->since));
				break;
			}
		case XLOG_PMHASH_DELETE:
		case XLOG_PMHASH_DELETE_EXACT:
		case XLOG_PMHASH_REBUILD:
		case XLOG_PMHASH_SPLIT:
		case XLOG_PMHASH_KILL:
			{
				xl_pmhash_entries *xlrec = (xl_pmhash_entries *) data;

				appendStringInfo(buf, "rel %u/%u/%u; shard %u; entries " UINT64_FORMAT,
								 xlrec->node.spcOid, xlrec->node.dbOid, xlrec->node.relNumber,
								 xlrec->shard, xlrec->count);
				if (info == XLOG_PMHASH_KILL)
					appendStringInfo(buf, "; conflict horizon %u",
									 ((xl_pmhash_kill *) data)->conflict_horizon);
				if (info == XLOG_PMHASH_SPLIT)
					appendStringInfo(buf, "; level %u",
									 pmh_map_level(((xl_pmhash_split *) data)->map));
				break;
			}
		case XLOG_PMHASH_COPY:
			{
				xl_pmhash_copy *xlrec = (xl_pmhash_copy *) data;

				appendStringInfo(buf, "from rel %u/%u/%u; to rel %u/%u/%u",
								 xlrec->from.spcOid, xlrec->from.dbOid, xlrec->from.relNumber,
								 xlrec->to.spcOid, xlrec->to.dbOid, xlrec->to.relNumber);
				break;
			}
		case XLOG_PMHASH_COPY_DATA:
			{
				xl_pmhash_copy_data *xlrec = (xl_pmhash_copy_data *) data;

				appendStringInfo(buf, "rel %u/%u/%u; bytes %u at " UINT64_FORMAT " of " UINT64_FORMAT "%s%s",
								 xlrec->node.spcOid, xlrec->node.dbOid, xlrec->node.relNumber,
								 xlrec->size, xlrec->offset, xlrec->file_size,
								 (xlrec->flags & XLOG_PMHASH_COPY_FIRST) ? "; first" : "",
								 (xlrec->flags & XLOG_PMHASH_COPY_LAST) ? "; last" : "");
				break;
			}
		case XLOG_PMHASH_MAP:
			{
				xl_pmhash_map *xlrec = (xl_pmhash_map *) data;

				appendStringInfo(buf, "rel %u/%u/%u; level %u; split pointer %u",
								 xlrec->node.spcOid, xlrec->node.dbOid, xlrec->node.relNumber,
								 pmh_map_level(xlrec->map), pmh_map_split(xlrec->map));
				break;
			}
		case XLOG_PMHASH_BUILT:
			{
				xl_pmhash_built *xlrec = (xl_pmhash_built *) data;

				appendStringInfo(buf, "rel %u/%u/%u",
								 xlrec->node.spcOid, xlrec->node.dbOid, xlrec->node.relNumber);
				break;
			}
	}
}

/* rm_identify: the name of a record's type. */
const char *
pmhash_identify(uint8 info)
{
	switch (info & ~XLR_INFO_MASK)
	{
		case XLOG_PMHASH_CREATE:
			return "CREATE";
		case XLOG_PMHASH_INSERT:
			return "INSERT";
		case XLOG_PMHASH_DELETE:
			return "DELETE";
		case XLOG_PMHASH_REBUILD:
			return "REBUILD";
		case XLOG_PMHASH_SPLIT:
			return "SPLIT";
		case XLOG_PMHASH_MAP:
			return "MAP";
		case XLOG_PMHASH_COPY:
			return "COPY";
		case XLOG_PMHASH_BUILT:
			return "BUILT";
		case XLOG_PMHASH_KILL:
			return "KILL";
		case XLOG_PMHASH_DELETE_EXACT:
			return "DELETE_EXACT";
		case XLOG_PMHASH_COPY_DATA:
			return "COPY_DATA";
	}
	return NULL;
}
