/*-------------------------------------------------------------------------
 *
 * pmcompat.h
 *	  What differs between the PostgreSQL major versions pmhash builds
 *	  against, 15 to 18.
 *
 * pmhash's code uses the names and signatures of the newest version
 * (RelFileLocator, ProcNumber, ...); this header maps them back to those of
 * older versions.  Features that exist on some versions only are under
 * #if PG_VERSION_NUM where they are used.  Included by pmhash.h and
 * pmxlog.h, after postgres.h.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmcompat.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef PMCOMPAT_H
#define PMCOMPAT_H

#include "commands/vacuum.h"
#include "common/relpath.h"
#include "replication/slot.h"
#include "storage/standby.h"
#if PG_VERSION_NUM >= 160000
#include "storage/relfilelocator.h"
#else
#include "storage/relfilenode.h"
#endif

#if PG_VERSION_NUM < 160000
/* 16 renamed RelFileNode to RelFileLocator. */
#define RelFileLocator RelFileNode
/* ... and its tablespace field, */
#define spcOid spcNode
/* ... its database field, */
#define dbOid dbNode
/* ... its relation field, */
#define relNumber relNode
/* ... its comparison, */
#define RelFileLocatorEquals(a, b) RelFileNodeEquals(a, b)
/* ... and a relation's field that holds it. */
#define rd_locator rd_node
/* 16 generalized pg_class_ownercheck; pmhash asks only about relations. */
#define object_ownercheck(classid, objectid, roleid) \
	(AssertMacro((classid) == RelationRelationId), pg_class_ownercheck(objectid, roleid))
/* 16 made INIT_BUFFERTAG a function taking pointers. */
#define InitBufferTag(tag, rlocator, forknum, blocknum) \
	INIT_BUFFERTAG(*(tag), *(rlocator), forknum, blocknum)
/* 16 added whether the relation is a catalog (for logical slots on standbys). */
#define ResolveRecoveryConflictWithSnapshot(horizon, isCatalogRel, locator) \
	ResolveRecoveryConflictWithSnapshot(horizon, locator)
#endif

#if PG_VERSION_NUM < 170000
/* 17 replaced BackendId by ProcNumber (and made it count from 0). */
typedef BackendId ProcNumber;
/* ... with its invalid value. */
#define INVALID_PROC_NUMBER InvalidBackendId
/* 17 removed PGPROC.pgprocno for this macro. */
#define GetNumberFromPGProc(proc) ((proc)->pgprocno)
/* 17 renamed ShmemVariableCache. */
#define TransamVariables ShmemVariableCache
/* 17 added whether a slot fails over and whether it is synced from a primary. */
#define ReplicationSlotCreate(name, db_specific, persistency, two_phase, failover, synced) \
	ReplicationSlotCreate(name, db_specific, persistency, two_phase)
#endif

#if PG_VERSION_NUM < 160000
/* 16 records why a slot was invalidated; 15 only clears its restart position. */
#define pmhash_slot_invalidated(slot) \
	((slot)->data.restart_lsn == InvalidXLogRecPtr && (slot)->data.invalidated_at != InvalidXLogRecPtr)
#else
/* Whether a replication slot was invalidated (and so keeps no WAL). */
#define pmhash_slot_invalidated(slot) ((slot)->data.invalidated != RS_INVAL_NONE)
#endif

#if PG_VERSION_NUM < 180000
/* 18 added whether to refuse an invalidated slot; earlier versions never do. */
#define ReplicationSlotAcquire(name, nowait, error_if_invalid) \
	ReplicationSlotAcquire(name, nowait)
/* 18 added whether the delay is for ANALYZE. */
#define vacuum_delay_point(is_analyze) vacuum_delay_point()
/* 18 replaced pg_attribute_noreturn(), written after a declaration, by this. */
#define pg_noreturn pg_attribute_noreturn()
/* A relation fork's path, palloc'd (18 returns it in a struct by value). */
#define pmhash_relpath(rlocator, backend, forknum) \
	relpathbackend(rlocator, backend, forknum)
#else
/* A relation fork's path, palloc'd (18 returns it in a struct by value). */
#define pmhash_relpath(rlocator, backend, forknum) \
	pstrdup(relpathbackend(rlocator, backend, forknum).str)
#endif

#endif							/* PMCOMPAT_H */
