/*-------------------------------------------------------------------------
 *
 * pmgates.c
 *	  Statements that PostgreSQL 15-17 cannot serve with pmhash indexes,
 *	  refused with a clear error.
 *
 * Two things that PostgreSQL 18 does with any access method that
 * translates compare types (amtranslatecmptype) fail inside core on older
 * versions:
 *
 * A foreign key whose referenced columns have a unique pmhash index (and
 * no unique index of another access method earlier in the table's index
 * list): 15-17 raise the internal error "only b-tree indexes are supported
 * for foreign keys" (ATAddForeignKeyConstraint).  The foreign key may come
 * from CREATE TABLE, ALTER TABLE ADD CONSTRAINT or ADD COLUMN, or a
 * partition being attached, so pmhash_gates_run turns that error, wherever
 * such a statement raises it, into a feature-not-supported error with a
 * hint.  pmutility.c's ProcessUtility hook runs every utility statement
 * through it.
 *
 * A pmhash index as a table's replica identity on 17: the subscriber's
 * apply worker looks up equality only for btree and hash there
 * (get_equal_strategy_number_for_am) and stops at the first replicated
 * UPDATE or DELETE with "missing operator 0".  pmhash_gates_run refuses ALTER
 * TABLE ... REPLICA IDENTITY USING INDEX of a pmhash index on 17; 15 and
 * 16 look the operator up by the operator class, and 18 asks the access
 * method.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmgates.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "commands/defrem.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "pmhash.h"

#if PG_VERSION_NUM < 180000

/* The error 15-17 raise for a foreign key that references a pmhash index. */
#define FOREIGN_KEY_BTREE_ONLY "only b-tree indexes are supported for foreign keys"

#if PG_VERSION_NUM >= 170000
/* Whether index "name" of the table of an ALTER TABLE is a pmhash index. */
static bool
is_pmhash_index_of(AlterTableStmt *stmt, const char *name)
{
	Oid			table = RangeVarGetRelid(stmt->relation, NoLock, true);
	Oid			pmhash_am = get_index_am_oid("pmhash", true);
	Oid			index;

	if (!OidIsValid(table) || !OidIsValid(pmhash_am))
		return false;
	index = get_relname_relid(name, get_rel_namespace(table));
	return OidIsValid(index) && get_rel_relam(index) == pmhash_am;
}

/* Refuse a pmhash index as a replica identity (PostgreSQL 17). */
static void
refuse_replica_identity(Node *node)
{
	AlterTableStmt *stmt;
	ListCell   *lc;

	if (!IsA(node, AlterTableStmt))
		return;
	stmt = (AlterTableStmt *) node;
	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst(lc);
		ReplicaIdentityStmt *identity;

		if (cmd->subtype != AT_ReplicaIdentity)
			continue;
		identity = (ReplicaIdentityStmt *) cmd->def;
		if (identity->identity_type != REPLICA_IDENTITY_INDEX ||
			!is_pmhash_index_of(stmt, identity->name))
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("pmhash index \"%s\" cannot be a replica identity on PostgreSQL 17",
						identity->name),
				 errdetail("PostgreSQL 17's logical replication subscribers find rows by a replica identity index only with btree or hash operators."),
				 errhint("Use a unique btree index or REPLICA IDENTITY FULL; PostgreSQL 15, 16 and 18 accept a pmhash index.")));
	}
}
#endif

#endif

/* Run the next ProcessUtility hook, or core's. */
static void
run_next(ProcessUtility_hook_type next, PlannedStmt *pstmt, const char *queryString,
		 bool readOnlyTree, ProcessUtilityContext context, ParamListInfo params,
		 QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	if (next)
		next(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);
}

/*
 * Run a utility statement through the next hook (or core), refusing on 17
 * what it cannot replicate, and on 15-17 giving a foreign key that
 * references a unique pmhash index a clear error.  pmutility.c's hook calls
 * this in place of the next hook.
 */
void
pmhash_gates_run(ProcessUtility_hook_type next, PlannedStmt *pstmt, const char *queryString,
				 bool readOnlyTree, ProcessUtilityContext context, ParamListInfo params,
				 QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
#if PG_VERSION_NUM < 180000
	Node	   *stmt = pstmt->utilityStmt;
	MemoryContext caller = CurrentMemoryContext;

#if PG_VERSION_NUM >= 170000
	refuse_replica_identity(stmt);
#endif
	if (!IsA(stmt, AlterTableStmt) && !IsA(stmt, CreateStmt))
	{
		run_next(next, pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
		return;
	}
	PG_TRY();
	{
		run_next(next, pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
	}
	PG_CATCH();
	{
		ErrorData  *error;

		MemoryContextSwitchTo(caller);
		error = CopyErrorData();
		if (error->sqlerrcode != ERRCODE_INTERNAL_ERROR || error->message == NULL ||
			strcmp(error->message, FOREIGN_KEY_BTREE_ONLY) != 0)
			PG_RE_THROW();
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a foreign key cannot reference a unique pmhash index before PostgreSQL 18"),
				 errdetail("Before PostgreSQL 18, foreign keys are checked only through btree indexes, and the first unique index on the referenced columns is a pmhash index."),
				 errhint("Create a unique btree index on the referenced columns before the pmhash one, or reference them on PostgreSQL 18.")));
	}
	PG_END_TRY();
#else
	run_next(next, pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
#endif
}
