/*-------------------------------------------------------------------------
 *
 * pmvalidate.c
 *	  Operator classes and families of pmhash: their validation, the
 *	  strategy numbers they may use, and the lookup of their equality.
 *
 * Equality is strategy 3 (PMHASH_EQUAL_STRATEGY), btree's number, because
 * code of PostgreSQL 15 that looks up the equality of any unique index
 * (logical replication's apply worker) asks for btree's number.  Version
 * 0.1 of the extension numbered it 1 (PMHASH_EQUAL_STRATEGY_0_1); its
 * families keep working until ALTER EXTENSION pmhash UPDATE renumbers them,
 * so both numbers are accepted and the lookup tries 3 first.
 *
 * A family is valid when every operator is equality, a boolean search
 * operator whose input types both have a hash function (support function 1)
 * in the family, and every support function hashes one value of its type to
 * an int4.  The hash function may take a type with the same representation
 * (bool hashed as "char", date as int4, bytea as internal), as core's hash
 * families do.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmvalidate.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/amapi.h"
#include "access/amvalidate.h"
#include "access/htup_details.h"
#include "catalog/pg_amop.h"
#include "catalog/pg_amproc.h"
#include "catalog/pg_opclass.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "parser/parse_coerce.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "pmhash.h"

/* Whether a function can serve as the hash function of a type. */
static bool
hash_function_fits(Oid funcid, Oid type)
{
	HeapTuple	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	Form_pg_proc proc;
	Oid			argtype;
	bool		fits;

	if (!HeapTupleIsValid(tuple))
		return false;
	proc = (Form_pg_proc) GETSTRUCT(tuple);
	if (proc->pronargs != 1 || proc->prorettype != INT4OID || proc->proretset)
	{
		ReleaseSysCache(tuple);
		return false;
	}
	argtype = proc->proargtypes.values[0];
	ReleaseSysCache(tuple);

	if (argtype == type || IsBinaryCoercible(type, argtype))
		return true;
	if (argtype == INTERNALOID)
		return get_typlen(type) == -1;
	fits = get_typlen(argtype) == get_typlen(type) &&
		get_typbyval(argtype) == get_typbyval(type) &&
		get_typtype(argtype) == TYPTYPE_BASE && get_typtype(type) == TYPTYPE_BASE;
	return fits;
}

/* Name of an operator family. */
static char *
opfamily_name(Oid opfamilyoid)
{
	HeapTuple	tuple = SearchSysCache1(OPFAMILYOID, ObjectIdGetDatum(opfamilyoid));
	char	   *name;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for operator family %u", opfamilyoid);
	name = pstrdup(NameStr(((Form_pg_opfamily) GETSTRUCT(tuple))->opfname));
	ReleaseSysCache(tuple);
	return name;
}

/* Whether a strategy number means equality (in this version or in 0.1). */
bool
pmhash_is_equal_strategy(int strategy)
{
	return strategy == PMHASH_EQUAL_STRATEGY || strategy == PMHASH_EQUAL_STRATEGY_0_1;
}

/*
 * The equality operator of a family for two types, and its strategy
 * number; InvalidOid if the family has none.
 */
static Oid
equality_in_family(Oid opfamily, Oid lefttype, Oid righttype, StrategyNumber *strategy)
{
	Oid			eq;

	*strategy = PMHASH_EQUAL_STRATEGY;
	eq = get_opfamily_member(opfamily, lefttype, righttype, *strategy);
	if (OidIsValid(eq))
		return eq;
	*strategy = PMHASH_EQUAL_STRATEGY_0_1;
	return get_opfamily_member(opfamily, lefttype, righttype, *strategy);
}

/*
 * The equality operator of a key column of index (counted from 0) on its
 * operator class's input type, and its strategy number.
 */
Oid
pmhash_column_equality(Relation index, int column, StrategyNumber *strategy)
{
	Oid			opfamily = index->rd_opfamily[column];
	Oid			type = index->rd_opcintype[column];
	Oid			eq = equality_in_family(opfamily, type, type, strategy);

	if (!OidIsValid(eq))
		elog(ERROR, "missing equality operator (%u,%u) in operator family %u of index \"%s\"",
			 type, type, opfamily, RelationGetRelationName(index));
	return eq;
}

/* amadjustmembers: refuse operators that are not equality. */
void
pmhashadjustmembers(Oid opfamilyoid pg_attribute_unused(),
					Oid opclassoid pg_attribute_unused(),
					List *operators, List *functions pg_attribute_unused())
{
	ListCell   *lc;

	foreach(lc, operators)
	{
		OpFamilyMember *op = (OpFamilyMember *) lfirst(lc);

		if (!pmhash_is_equal_strategy(op->number))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("invalid operator number %d for access method pmhash", op->number),
					 errhint("pmhash indexes support only equality, operator number %d.",
							 PMHASH_EQUAL_STRATEGY)));
	}
}

/* amvalidate */
bool
pmhashvalidate(Oid opclassoid)
{
	bool		result = true;
	HeapTuple	classtup;
	Form_pg_opclass classform;
	Oid			opfamilyoid;
	Oid			opcintype;
	char	   *opfamilyname;
	CatCList   *oprlist;
	CatCList   *proclist;
	List	   *hashed_types = NIL;
	bool		class_has_operator = false;

	classtup = SearchSysCache1(CLAOID, ObjectIdGetDatum(opclassoid));
	if (!HeapTupleIsValid(classtup))
		elog(ERROR, "cache lookup failed for operator class %u", opclassoid);
	classform = (Form_pg_opclass) GETSTRUCT(classtup);
	opfamilyoid = classform->opcfamily;
	opcintype = classform->opcintype;
	opfamilyname = opfamily_name(opfamilyoid);

	oprlist = SearchSysCacheList1(AMOPSTRATEGY, ObjectIdGetDatum(opfamilyoid));
	proclist = SearchSysCacheList1(AMPROCNUM, ObjectIdGetDatum(opfamilyoid));

	for (int i = 0; i < proclist->n_members; i++)
	{
		Form_pg_amproc procform = (Form_pg_amproc) GETSTRUCT(&proclist->members[i]->tuple);

		if (procform->amprocnum != 1)
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("operator family \"%s\" of access method pmhash contains function %s with invalid support number %d",
							opfamilyname, format_procedure(procform->amproc),
							procform->amprocnum)));
			result = false;
			continue;
		}
		if (procform->amproclefttype != procform->amprocrighttype ||
			!hash_function_fits(procform->amproc, procform->amproclefttype))
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("operator family \"%s\" of access method pmhash contains function %s with wrong signature for support number %d",
							opfamilyname, format_procedure(procform->amproc), 1)));
			result = false;
			continue;
		}
		hashed_types = list_append_unique_oid(hashed_types, procform->amproclefttype);
	}

	for (int i = 0; i < oprlist->n_members; i++)
	{
		Form_pg_amop oprform = (Form_pg_amop) GETSTRUCT(&oprlist->members[i]->tuple);

		if (!pmhash_is_equal_strategy(oprform->amopstrategy) ||
			oprform->amoppurpose != AMOP_SEARCH)
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("operator family \"%s\" of access method pmhash contains operator %s with invalid strategy number %d or purpose",
							opfamilyname, format_operator(oprform->amopopr),
							oprform->amopstrategy)));
			result = false;
			continue;
		}
		if (!check_amop_signature(oprform->amopopr, BOOLOID,
								  oprform->amoplefttype, oprform->amoprighttype))
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("operator family \"%s\" of access method pmhash contains operator %s with wrong signature",
							opfamilyname, format_operator(oprform->amopopr))));
			result = false;
			continue;
		}
		if (!list_member_oid(hashed_types, oprform->amoplefttype) ||
			!list_member_oid(hashed_types, oprform->amoprighttype))
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("operator family \"%s\" of access method pmhash lacks support function for operator %s",
							opfamilyname, format_operator(oprform->amopopr))));
			result = false;
		}
		if (oprform->amoplefttype == opcintype && oprform->amoprighttype == opcintype)
			class_has_operator = true;
	}

	if (!class_has_operator || !list_member_oid(hashed_types, opcintype))
	{
		ereport(INFO,
				(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
				 errmsg("operator class \"%s\" of access method pmhash is missing its operator or support function",
						NameStr(classform->opcname))));
		result = false;
	}

	ReleaseCatCacheList(proclist);
	ReleaseCatCacheList(oprlist);
	ReleaseSysCache(classtup);
	return result;
}

#if PG_VERSION_NUM >= 180000
/*
 * Equality's strategy number in a family: 3, or 1 in a family of version
 * 0.1 that has no operator numbered 3 (tried in that order, as
 * equality_in_family does).
 */
static StrategyNumber
family_equal_strategy(Oid opfamily)
{
	CatCList   *oprlist = SearchSysCacheList1(AMOPSTRATEGY, ObjectIdGetDatum(opfamily));
	bool		has_current = false;
	bool		has_0_1 = false;

	for (int i = 0; i < oprlist->n_members; i++)
	{
		Form_pg_amop oprform = (Form_pg_amop) GETSTRUCT(&oprlist->members[i]->tuple);

		has_current |= oprform->amopstrategy == PMHASH_EQUAL_STRATEGY;
		has_0_1 |= oprform->amopstrategy == PMHASH_EQUAL_STRATEGY_0_1;
	}
	ReleaseCatCacheList(oprlist);
	return has_0_1 && !has_current ? PMHASH_EQUAL_STRATEGY_0_1 : PMHASH_EQUAL_STRATEGY;
}

/* amtranslatestrategy: both of equality's numbers mean equality. */
CompareType
pmhashtranslatestrategy(StrategyNumber strategy, Oid opfamily pg_attribute_unused())
{
	return pmhash_is_equal_strategy(strategy) ? COMPARE_EQ : COMPARE_INVALID;
}

/* amtranslatecmptype: equality is the family's equality number; nothing else is. */
StrategyNumber
pmhashtranslatecmptype(CompareType cmptype, Oid opfamily)
{
	if (cmptype != COMPARE_EQ)
		return InvalidStrategy;
	return family_equal_strategy(opfamily);
}
#endif
