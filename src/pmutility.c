/*-------------------------------------------------------------------------
 *
 * pmutility.c
 *	  Carrying index files through utility commands that core performs on
 *	  relation files alone.
 *
 * ALTER INDEX ... SET TABLESPACE (and ALTER TABLE ALL IN TABLESPACE) give
 * an index a new relfilenode and copy its main fork; CREATE DATABASE copies
 * the relation files of its template.  Neither knows about pmhash files, so
 * this hook copies them after the command, rewriting the identity in their
 * header, and WAL-logs the content of the copy so that standbys and
 * recovery make the same copy, whatever the source holds by then.
 * A copy made by a transaction that aborts is removed; the old file of a
 * moved index goes with its main fork when the transaction commits.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmutility.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_tablespace.h"
#include "common/relpath.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/bufmgr.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/md.h"
#include "tcop/utility.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "pmhash.h"

/* What CREATE DATABASE made: the new database and its directories. */
typedef struct CreatedDatabase
{
	Oid			dboid;
	List	   *directories;	/* palloc'd paths */
} CreatedDatabase;

typedef struct IndexStorage
{
	Oid			relid;
	Oid			relnode;
	Oid			spc;
	char		persistence;
} IndexStorage;

static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/* Whether a statement may give indexes new relfilenodes in other tablespaces. */
static bool
moves_tablespaces(Node *stmt)
{
	ListCell   *lc;

	if (IsA(stmt, AlterTableMoveAllStmt))
		return true;
	if (!IsA(stmt, AlterTableStmt))
		return false;
	foreach(lc, ((AlterTableStmt *) stmt)->cmds)
	{
		if (((AlterTableCmd *) lfirst(lc))->subtype == AT_SetTableSpace)
			return true;
	}
	return false;
}

/* The storage of every pmhash index of this database (none without the AM). */
static List *
pmhash_indexes(void)
{
	Oid			amoid = get_index_am_oid("pmhash", true);
	List	   *result = NIL;
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;

	if (!OidIsValid(amoid))
		return NIL;
	ScanKeyInit(&key, Anum_pg_class_relam, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(amoid));
	rel = table_open(RelationRelationId, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 1, &key);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Form_pg_class form = (Form_pg_class) GETSTRUCT(tuple);
		IndexStorage *is;

		if (form->relkind != RELKIND_INDEX)
			continue;
		is = palloc(sizeof(IndexStorage));
		is->relid = form->oid;
		is->relnode = form->relfilenode;
		is->spc = form->reltablespace;
		is->persistence = form->relpersistence;
		result = lappend(result, is);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return result;
}

/* Copy the file of one index to its new relfilenode; log it and undo it on abort. */
static void
carry_file(const RelFileLocator *from, const RelFileLocator *to, Oid relid, bool logged)
{
	PmhashFileKey	key;
	char		path[MAXPGPATH];

	if (!pmhash_copy_file(from, to, logged))
		return;					/* no source file: opening the index reports it */
	memset(&key, 0, sizeof(key));
	key.node = *to;
	key.node.spcOid = InvalidOid;
	key.backend = INVALID_PROC_NUMBER;
	pmhash_file_path(&key, path);
	pmhash_remember_created(&key, relid, path);
}

/* After a move: copy the files of indexes that got a new relfilenode. */
static void
carry_moved_indexes(List *before)
{
	ListCell   *lc;

	foreach(lc, before)
	{
		IndexStorage *was = lfirst(lc);
		HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(was->relid));
		Form_pg_class form;
		RelFileLocator from;
		RelFileLocator to;

		if (!HeapTupleIsValid(tuple))
			continue;
		form = (Form_pg_class) GETSTRUCT(tuple);
		if (form->relfilenode != was->relnode && was->persistence != RELPERSISTENCE_TEMP)
		{
			from.spcOid = was->spc ? was->spc : MyDatabaseTableSpace;
			from.dbOid = MyDatabaseId;
			from.relNumber = was->relnode;
			to.spcOid = form->reltablespace ? form->reltablespace : MyDatabaseTableSpace;
			to.dbOid = MyDatabaseId;
			to.relNumber = form->relfilenode;
			carry_file(&from, &to, was->relid, was->persistence == RELPERSISTENCE_PERMANENT);
		}
		ReleaseSysCache(tuple);
	}
}

/* The template a CREATE DATABASE copies. */
static char *
template_of(CreatedbStmt *stmt)
{
	ListCell   *lc;

	foreach(lc, stmt->options)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "template") == 0)
			return defGetString(def);
	}
	return "template1";
}

/* The directories of a new database, one per tablespace that holds one. */
static List *
database_directories(Oid dboid)
{
	List	   *result = NIL;
	Relation	rel = table_open(TableSpaceRelationId, AccessShareLock);
	TableScanDesc scan = table_beginscan_catalog(rel, 0, NULL);
	HeapTuple	tuple;

	while ((tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Oid			spc = ((Form_pg_tablespace) GETSTRUCT(tuple))->oid;
		char	   *path;
		struct stat st;

		if (spc == GLOBALTABLESPACE_OID)
			continue;
		path = GetDatabasePath(dboid, spc);
		if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
			result = lappend(result, path);
		else
			pfree(path);
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	return result;
}

/*
 * Error cleanup of a CREATE DATABASE whose index files could not be
 * copied: core's copy is done and its own failure callback gone, so remove
 * what it made, as that callback does: the new database's buffers, its
 * pending sync requests and its directories (arg: a CreatedDatabase).
 */
static void
remove_created_database(int code pg_attribute_unused(), Datum arg)
{
	CreatedDatabase *made = (CreatedDatabase *) DatumGetPointer(arg);
	ListCell   *lc;

	DropDatabaseBuffers(made->dboid);
	ForgetDatabaseSyncRequests(made->dboid);
	foreach(lc, made->directories)
	{
		if (!rmtree((char *) lfirst(lc), true))
			ereport(WARNING,
					(errmsg("could not remove directory \"%s\"", (char *) lfirst(lc))));
	}
}

/* Copy the index files of a template database to a new database. */
static void
copy_database_files(Oid template_oid, Oid new_oid)
{
	DIR		   *dir;
	struct dirent *de;

	dir = AllocateDir(pmhash_directory);
	while (dir != NULL && (de = ReadDirExtended(dir, pmhash_directory, LOG)) != NULL)
	{
		Oid			db;
		Oid			rel;
		ProcNumber	backend;
		RelFileLocator from;
		RelFileLocator to;

		if (!pmhash_parse_file_name(de->d_name, &db, &rel, &backend) ||
			backend != INVALID_PROC_NUMBER || db != template_oid)
			continue;
		from.spcOid = InvalidOid;
		from.dbOid = template_oid;
		from.relNumber = rel;
		to = from;
		to.dbOid = new_oid;
		carry_file(&from, &to, InvalidOid, true);
	}
	if (dir != NULL)
		FreeDir(dir);
}

/*
 * After CREATE DATABASE: copy the template's index files to the new
 * database; if that fails, the new database's directories go too.
 */
static void
carry_template_files(CreatedbStmt *stmt)
{
	Oid			template_oid = get_database_oid(template_of(stmt), true);
	Oid			new_oid = get_database_oid(stmt->dbname, true);
	CreatedDatabase made;

	if (!OidIsValid(template_oid) || !OidIsValid(new_oid))
		return;
	made.dboid = new_oid;
	made.directories = database_directories(new_oid);
	PG_ENSURE_ERROR_CLEANUP(remove_created_database, PointerGetDatum(&made));
	{
		copy_database_files(template_oid, new_oid);
	}
	PG_END_ENSURE_ERROR_CLEANUP(remove_created_database, PointerGetDatum(&made));
}

/* ProcessUtility hook. */
static void
pmhash_ProcessUtility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
					  ProcessUtilityContext context, ParamListInfo params,
					  QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;
	List	   *before = NIL;

	if (moves_tablespaces(stmt))
		before = pmhash_indexes();
	pmhash_gates_run(prev_ProcessUtility, pstmt, queryString, readOnlyTree, context,
					 params, queryEnv, dest, qc);
	if (before != NIL)
		carry_moved_indexes(before);
	if (IsA(stmt, CreatedbStmt))
		carry_template_files((CreatedbStmt *) stmt);
}

/* Install the hook (from _PG_init, preloading only). */
void
pmhash_utility_init(void)
{
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = pmhash_ProcessUtility;
}
