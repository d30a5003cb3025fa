/*-------------------------------------------------------------------------
 *
 * pmfault.c
 *	  Reporting damaged index files, and turning a fault on a mapped index
 *	  file into an ERROR.
 *
 * Reading a mapped file past its end, after someone truncated it, or
 * reading poisoned persistent memory raises SIGBUS, which would take the
 * whole server through crash recovery.  pmhash catches SIGBUS and, if the
 * faulting address lies in one of this backend's index mappings while the
 * backend is inside a pmhash operation, raises an ERROR instead: the
 * interrupted instruction was a plain load or store of pmhash's own code,
 * and LWLocks and memory are released by the usual error cleanup.  Any
 * other SIGBUS gets the default action, as before.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/pmfault.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "utils/builtins.h"

#include "pmhash.h"

#define MAX_GUARDED_MAPPINGS 256

typedef struct GuardedMapping
{
	const char *base;
	size_t		len;
} GuardedMapping;

static GuardedMapping mappings[MAX_GUARDED_MAPPINGS];
static int	nmappings = 0;
static const char *current_index = NULL;

/* Remember a mapping so that faults in it become errors. */
void
pmhash_fault_register(const char *base, size_t len)
{
	for (int i = 0; i < nmappings; i++)
	{
		if (mappings[i].base == NULL)
		{
			mappings[i].len = len;
			mappings[i].base = base;
			return;
		}
	}
	if (nmappings < MAX_GUARDED_MAPPINGS)
	{
		mappings[nmappings].len = len;
		mappings[nmappings].base = base;
		nmappings++;
	}
}

/* Forget a mapping before it is unmapped. */
void
pmhash_fault_unregister(const char *base)
{
	for (int i = 0; i < nmappings; i++)
	{
		if (mappings[i].base == base)
			mappings[i].base = NULL;
	}
}

/* Name the index of the operation in progress, for the error message. */
void
pmhash_fault_set_index(const char *name)
{
	current_index = name;
}

/* Whether an address lies in a registered mapping. */
static bool
address_is_mapped_index(const char *addr)
{
	for (int i = 0; i < nmappings; i++)
	{
		if (mappings[i].base != NULL && addr >= mappings[i].base &&
			addr < mappings[i].base + mappings[i].len)
			return true;
	}
	return false;
}

/* SIGBUS handler. */
static void
sigbus_handler(int signo pg_attribute_unused(), siginfo_t *info,
			   void *context pg_attribute_unused())
{
	if (pmhash_entered() && address_is_mapped_index((const char *) info->si_addr))
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("pmhash index \"%s\" could not read its file",
						current_index ? current_index : "?"),
				 errdetail("The mapped file was truncated, or the memory holding it reported an error."),
				 errhint("Rebuild the index with REINDEX INDEX %s.",
						 current_index ? current_index : "...")));
	/* not ours: the default action, when the faulting instruction reruns */
	signal(SIGBUS, SIG_DFL);
}

/* Install the SIGBUS handler (in the postmaster; children inherit it). */
void
pmhash_fault_init(void)
{
	struct sigaction act;

	memset(&act, 0, sizeof(act));
	act.sa_sigaction = sigbus_handler;
	act.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&act.sa_mask);
	sigaction(SIGBUS, &act, NULL);
}

/* Report a damaged index at elevel; the hint says how to repair it. */
void
pmhash_report_damaged(int elevel, const char *index_name, const char *detail)
{
	ereport(elevel,
			(errcode(ERRCODE_INDEX_CORRUPTED),
			 errmsg("pmhash index \"%s\" is damaged", index_name),
			 errdetail("%s", detail),
			 errhint("Rebuild the index with REINDEX INDEX %s.", quote_identifier(index_name))));
}

/* Raise an error for a damaged index. */
void
pmhash_raise_damaged(const char *index_name, const char *detail)
{
	pmhash_report_damaged(ERROR, index_name, detail);
	pg_unreachable();
}
