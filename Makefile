# Makefile for pmhash (PGXS)

PG_CONFIG ?= pg_config

EXTENSION = pmhash
EXTVERSION = 0.1

MODULE_big = pmhash
OBJS = \
	src/pmbuild.o \
	src/pmcost.o \
	src/pmdirectory.o \
	src/pmdrop.o \
	src/pmfault.o \
	src/pmfile.o \
	src/pmfuncs.o \
	src/pmhash.o \
	src/pminsert.o \
	src/pmrecovery.o \
	src/pmredo.o \
	src/pmscan.o \
	src/pmshard.o \
	src/pmshmem.o \
	src/pmutility.o \
	src/pmvacuum.o \
	src/pmvalidate.o \
	src/pmxlog.o \
	src/core/pmh_alloc.o \
	src/core/pmh_checksum.o \
	src/core/pmh_codec.o \
	src/core/pmh_crc32c.o \
	src/core/pmh_file.o \
	src/core/pmh_lookup.o \
	src/core/pmh_match.o \
	src/core/pmh_modify.o \
	src/core/pmh_rebuild.o \
	src/core/pmh_table.o \
	src/core/pmh_verify.o

DATA = sql/$(EXTENSION)--$(EXTVERSION).sql
PGFILEDESC = "pmhash - persistent hash index access method"

# PostgreSQL's headers as system headers: -Wextra is for our code, not theirs
PG_CPPFLAGS = -I$(srcdir)/src -isystem $(shell $(PG_CONFIG) --includedir-server)
SHLIB_LINK = -lpmem

REGRESS =
REGRESS_OPTS = --inputdir=$(srcdir) --outputdir=$(CURDIR)

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS does not track header dependencies: rebuild everything when a header changes
$(OBJS): $(wildcard $(srcdir)/src/*.h $(srcdir)/src/core/*.h)

# the core builds and is tested without PostgreSQL
CORE_SRCS = $(wildcard $(srcdir)/src/core/*.c)
CORE_HDRS = $(wildcard $(srcdir)/src/core/*.h $(srcdir)/test/core/*.h)
# the core tests: one binary of test_main.c, test_util.c and one file per core module
CORE_TEST_SRCS = $(wildcard $(srcdir)/test/core/test_*.c) $(srcdir)/test/core/memtable.c
test/core/test_core: $(CORE_TEST_SRCS) $(CORE_SRCS) $(CORE_HDRS)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Werror -pthread -o $@ $(filter %.c,$^)

.PHONY: core-check
core-check: test/core/test_core
	./test/core/test_core
