# Makefile for pmhash (PGXS)

PG_CONFIG ?= pg_config

EXTENSION = pmhash

MODULE_big = pmhash
OBJS = \
	src/pmattach.o \
	src/pmbatch.o \
	src/pmbuild.o \
	src/pmcleaner.o \
	src/pmcost.o \
	src/pmdirectory.o \
	src/pmdurable.o \
	src/pmelements.o \
	src/pmfault.o \
	src/pmfilename.o \
	src/pmfuncs.o \
	src/pmhash.o \
	src/pminsert.o \
	src/pmkey.o \
	src/pmmap.o \
	src/pmmeta.o \
	src/pmparallel.o \
	src/pmprefetch.o \
	src/pmrecheck.o \
	src/pmrecovery.o \
	src/pmredo.o \
	src/pmscan.o \
	src/pmsettings.o \
	src/pmsort.o \
	src/pmshadow.o \
	src/pmshard.o \
	src/pmshmem.o \
	src/pmspace.o \
	src/pmsyncer.o \
	src/pmstorage.o \
	src/pmunique.o \
	src/pmupsert.o \
	src/pmgates.o \
	src/pmutility.o \
	src/pmvacuum.o \
	src/pmvalidate.o \
	src/pmxact.o \
	src/pmxlog.o \
	src/pmxlogdesc.o \
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

# the install script of the first version and one update script per later
# version: CREATE EXTENSION runs the chain, as for contrib modules
DATA = $(patsubst $(srcdir)/%,%,$(wildcard $(srcdir)/sql/$(EXTENSION)--*.sql))
PGFILEDESC = "pmhash - persistent hash index access method"

# PostgreSQL's headers as system headers: -Wextra is for our code, not theirs
PG_CPPFLAGS = -I$(srcdir)/src -isystem $(shell $(PG_CONFIG) --includedir-server)
SHLIB_LINK = -lpmem

# make installcheck: the pg_regress suite (sql/*.sql but the extension
# script, expected/*.out) against an installed, running server, which must
# have pmhash in shared_preload_libraries (the tests CREATE EXTENSION pmhash
# in a fresh database); PGHOST, PGPORT and PGUSER say which server.
REGRESS = $(sort $(patsubst %.sql,%,$(filter-out $(EXTENSION)--%, \
	$(notdir $(wildcard $(srcdir)/sql/*.sql)))))
REGRESS_OPTS = --inputdir=$(srcdir) --outputdir=$(CURDIR)

# make installcheck then runs the isolation specs, test/isolation/specs/*.spec
# (expected output in test/isolation/expected/), with pg_isolation_regress
# against the same server, in a fresh database isolation_regression; results
# and differences land in output_iso/ (results/, regression.diffs) in the
# directory make runs in.  make installcheck-isolation runs only them.
ISOLATION = $(sort $(basename $(notdir $(wildcard $(srcdir)/test/isolation/specs/*.spec))))
ISOLATION_OPTS = --inputdir=$(srcdir)/test/isolation

# make prove_installcheck: the TAP tests in test/t/ (PROVE_TESTS=test/t/001_files.pl
# for one file) against the installed pmhash; they start their own clusters,
# so need no running server, but, as initdb, refuse to run as root.  Their
# logs go to tmp_check/ in the directory make runs in (make -f
# /path/to/Makefile from another directory keeps the source tree clean).
PROVE_TESTS = test/t/*.pl
EXTRA_CLEAN = tmp_check

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

# PGXS defines how to run prove (cd to the source directory, PG_REGRESS,
# TESTDIR, the include path of PostgreSQL::Test) but no target of its own;
# TAP_TESTS = 1 would make installcheck run the TAP tests too
.PHONY: prove_installcheck
prove_installcheck:
	$(prove_installcheck)

# the isolation specs alone (make installcheck runs them after REGRESS, but
# not if a REGRESS test fails)
.PHONY: installcheck-isolation
installcheck-isolation:
	$(pg_isolation_regress_installcheck) $(ISOLATION_OPTS) $(ISOLATION)

# make dist: the release archive for PGXN, pmhash-<version>.zip (in
# DIST_DIR, by default the directory make runs in), from the committed tree
# (git archive HEAD): the build files, the sources, the SQL scripts and
# every test, nothing else (.ci/ is CI's, not a user's).  The
# version is the control file's default_version, as semver: 0.2 -> 0.2.0;
# META.json must say the same (test/suites/packaging.sh checks it).
EXTVERSION = $(shell sed -n "s/^default_version = '\([0-9.]*\)'/\1/p" $(srcdir)/pmhash.control)
DISTVERSION = $(EXTVERSION)$(if $(word 3,$(subst ., ,$(EXTVERSION))),,.0)
DIST_FILES = Makefile META.json README.md pmhash.control src sql expected test
DIST_DIR ?= $(CURDIR)
.PHONY: dist
dist:
	git -C $(srcdir) archive --format=zip --prefix=$(EXTENSION)-$(DISTVERSION)/ \
		-o $(DIST_DIR)/$(EXTENSION)-$(DISTVERSION).zip HEAD $(DIST_FILES)
