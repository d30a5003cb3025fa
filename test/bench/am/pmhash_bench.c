/*-------------------------------------------------------------------------
 *
 * pmhash_bench.c
 *	  AM-level probe benchmark: equality probes through the generic index
 *	  access method API, for any index whose operator family has an
 *	  equality strategy (pmhash, hash, btree, ...).
 *
 * pmhash_bench_probe(index, keys, loops) opens the index and its table,
 * finds in the index's operator family the equality operator between the
 * indexed type and the element type of "keys" (a search operator whose
 * restriction estimator is eqsel), and then, in one index scan, rescans once
 * per key with an equality scan key and reads every TID the access method
 * returns with index_getnext_tid.  The heap is never visited, so the same
 * code times pmhash, hash and btree without the executor's overhead.  It is
 * a benchmark helper in its own extension, not part of pmhash.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/bench/am/pmhash_bench.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/index.h"
#include "catalog/pg_amop.h"
#include "catalog/pg_class.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "parser/parse_coerce.h"
#include "portability/instr_time.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/catcache.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(pmhash_bench_probe);

/*
 * The equality search operator of "opfamily" between "lefttype" and
 * "righttype", or InvalidOid; its strategy number goes to *strategy.
 */
static Oid
find_equality_operator(Oid opfamily, Oid lefttype, Oid righttype,
					   StrategyNumber *strategy)
{
	CatCList   *members;
	Oid			result = InvalidOid;

	members = SearchSysCacheList3(AMOPSTRATEGY,
								  ObjectIdGetDatum(opfamily),
								  ObjectIdGetDatum(lefttype),
								  ObjectIdGetDatum(righttype));
	for (int i = 0; i < members->n_members; i++)
	{
		Form_pg_amop amop = (Form_pg_amop) GETSTRUCT(&members->members[i]->tuple);

		if (amop->amoppurpose == AMOP_SEARCH &&
			get_oprrest(amop->amopopr) == F_EQSEL)
		{
			result = amop->amopopr;
			*strategy = amop->amopstrategy;
			break;
		}
	}
	ReleaseSysCacheList(members);
	return result;
}

/*
 * pmhash_bench_probe(index regclass, keys anyarray, loops int)
 *		returns (ns_per_probe float8, tids int8)
 *
 * Times loops * cardinality(keys) equality probes of the first column of
 * the index; tids is the number of TIDs one pass over the keys returned.
 */
Datum
pmhash_bench_probe(PG_FUNCTION_ARGS)
{
	Oid			indexoid = PG_GETARG_OID(0);
	ArrayType  *keys = PG_GETARG_ARRAYTYPE_P(1);
	int32		loops = PG_GETARG_INT32(2);
	Oid			keytype = ARR_ELEMTYPE(keys);
	Oid			heapoid;
	Relation	heap;
	Relation	index;
	Oid			opcintype;
	Oid			righttype;
	Oid			eqop;
	StrategyNumber strategy = InvalidStrategy;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *datums;
	bool	   *nulls;
	int			nkeys;
	ScanKeyData skey;
	Snapshot	snapshot;
	IndexScanDesc scan;
	instr_time	start;
	instr_time	elapsed;
	int64		ntids = 0;
	TupleDesc	tupdesc;
	Datum		values[2];
	bool		isnull[2] = {false, false};

	if (loops < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("loops must be at least 1")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);

	/* lock the table before its index, as the executor does */
	if (get_rel_relkind(indexoid) != RELKIND_INDEX)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not an index", get_rel_name(indexoid))));
	heapoid = IndexGetRelation(indexoid, false);
	if (pg_class_aclcheck(heapoid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, get_rel_name(heapoid));
	heap = table_open(heapoid, AccessShareLock);
	index = index_open(indexoid, AccessShareLock);

	/* the equality operator for the key type, or for a binary-compatible one */
	opcintype = index->rd_opcintype[0];
	righttype = keytype;
	eqop = find_equality_operator(index->rd_opfamily[0], opcintype, righttype, &strategy);
	if (!OidIsValid(eqop) && IsBinaryCoercible(keytype, opcintype))
	{
		righttype = opcintype;
		eqop = find_equality_operator(index->rd_opfamily[0], opcintype, righttype, &strategy);
	}
	if (!OidIsValid(eqop))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("operator family of index \"%s\" has no equality operator for %s = %s",
						RelationGetRelationName(index), format_type_be(opcintype),
						format_type_be(keytype))));

	get_typlenbyvalalign(keytype, &typlen, &typbyval, &typalign);
	deconstruct_array(keys, keytype, typlen, typbyval, typalign, &datums, &nulls, &nkeys);
	for (int i = 0; i < nkeys; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("keys must not contain NULLs")));
	}

	/* as ExecIndexBuildScanKeys does: subtype is the operator's right type */
	ScanKeyEntryInitialize(&skey, 0, 1, strategy, righttype,
						   index->rd_indcollation[0], get_opcode(eqop), (Datum) 0);

	snapshot = RegisterSnapshot(GetTransactionSnapshot());
#if PG_VERSION_NUM >= 180000
	/* 18 takes the scan's instrumentation (EXPLAIN's Index Searches): none */
	scan = index_beginscan(heap, index, snapshot, NULL, 1, 0);
#else
	scan = index_beginscan(heap, index, snapshot, 1, 0);
#endif

	INSTR_TIME_SET_CURRENT(start);
	for (int32 l = 0; l < loops; l++)
	{
		for (int i = 0; i < nkeys; i++)
		{
			skey.sk_argument = datums[i];
			index_rescan(scan, &skey, 1, NULL, 0);
			while (index_getnext_tid(scan, ForwardScanDirection) != NULL)
				ntids++;
			if ((i & 1023) == 0)
				CHECK_FOR_INTERRUPTS();
		}
	}
	INSTR_TIME_SET_CURRENT(elapsed);
	INSTR_TIME_SUBTRACT(elapsed, start);

	index_endscan(scan);
	UnregisterSnapshot(snapshot);
	index_close(index, AccessShareLock);
	table_close(heap, AccessShareLock);

	values[0] = Float8GetDatum(nkeys > 0 ?
							   INSTR_TIME_GET_DOUBLE(elapsed) * 1e9 / ((double) nkeys * loops) :
							   0.0);
	values[1] = Int64GetDatum(ntids / loops);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, isnull)));
}
