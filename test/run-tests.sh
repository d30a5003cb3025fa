#!/usr/bin/env bash
# test/run-tests.sh: run every pmhash test suite; ends with "N passed, N failed".
#
# Installs what it needs, builds pmhash twice (warnings as errors; then with
# assertions enabled, which is the build the suites run against), runs the
# core unit tests, the core benchmark on a small table (which checks every
# lookup it times), a minute of fuzzing of the core's file loader, verifier
# and lookups (test/fuzz/run.sh), the packaging checks (META.json against
# PGXN's meta-spec, one version, the update chain, make dist's archive
# builds: test/suites/packaging.sh), a full file system under pmhash.directory
# (test/fullfs.sh) and a minute's soak with crashes (test/soak.sh) on both
# paths, pmhash built (-Wall -Wextra -Werror) and its pg_regress suite,
# isolation specs and pgTAP files run on PostgreSQL 16, 17 and 18 (test/versions-regress.sh,
# which installs them), its TAP tests on 18 and some of them on 16 and 17
# (test/versions-tap.sh), then the SQL-level suites on PostgreSQL 15 on two
# throwaway clusters: one with its
# index files on /dev/shm and PMEM_IS_PMEM_FORCE=1 (the pmem path: flush and
# fence), one with them in the data directory on the ordinary disk (the
# msync path).  Exits non-zero if anything failed.  PG_MAJOR=16, 17 or 18
# runs only that version's pg_regress suite, isolation specs, pgTAP and TAP files.
set -u
cd "$(dirname "$0")/.."
source test/lib/common.sh

# the TAP files that run on 16 and 17 (every one runs on 15 and 18)
VERSION_TAP_SUBSET="002 003 004 005 009 011 016 018 019 020 021 022 024"
WORK=$(mktemp -d /tmp/pmhash-tests-XXXXXX)
chmod 755 "$WORK"
PASSED=0
FAILED=0
FAILURES=""

# Record one test result.
record() {
	if [ "$2" = 0 ]; then
		PASSED=$((PASSED + 1))
		echo "ok   - $1"
	else
		FAILED=$((FAILED + 1))
		FAILURES="$FAILURES $1"
		echo "FAIL - $1"
	fi
}

# Run a suite script that prints "ok - name" / "not ok - name" lines.
run_suite() {
	local label=$1 log=$WORK/$1.log
	shift
	"$@" >"$log" 2>&1
	local rc=$? n=0
	while read -r line; do
		case "$line" in
			"ok "*) record "$label: ${line#ok * - }" 0; n=$((n + 1)) ;;
			"not ok "*) record "$label: ${line#not ok * - }" 1; n=$((n + 1)) ;;
		esac
	done < <(grep -E '^(not )?ok [0-9]* ?- ' "$log")
	if [ "$rc" != 0 ] && [ "$n" = 0 ]; then
		record "$label" 1
	fi
	if [ "$rc" != 0 ]; then
		echo "---- $label output (last 40 lines) ----"
		tail -40 "$log"
		echo "----"
	fi
}

# Record the tests of a pg_regress or pg_isolation_regress log, "test NAME
# ... ok" or "FAILED"; $1 the label, $2 the log, $3 the exit status of make.
# A failed make with no failed test (no server, a missing expected file)
# counts as one failure.
record_regress_log() {
	local label=$1 log=$2 rc=$3 name status failed=0
	while read -r name status; do
		[ "$status" = ok ] || failed=1
		record "$label: $name" "$([ "$status" = ok ] && echo 0 || echo 1)"
	done < <(sed -nE 's/^(test| ) *([a-z0-9_-]+) +\.\.\. +(ok|FAILED).*/\2 \3/p' "$log")
	if [ "$rc" != 0 ] && [ "$failed" = 0 ]; then
		record "$label: make" 1
		tail -20 "$log"
	fi
}

# make installcheck: pg_regress over the Makefile's REGRESS (every test in
# sql/), then pg_isolation_regress over its ISOLATION (every spec in
# test/isolation/specs/), each test counted; $1 is the label of the
# pg_regress tests, "regress-MODE", the specs are "isolation-MODE".  Run as
# two makes, so that a failing pg_regress test does not keep the specs from
# running.
run_regress() {
	local label=$1 ilabel=${1/regress/isolation} rc
	rm -rf results regression.diffs regression.out output_iso
	make -s installcheck ISOLATION= PGHOST="$PGHOST" PGPORT="$PGPORT" PGUSER="$PGUSER" \
		>"$WORK/$label.log" 2>&1
	rc=$?
	record_regress_log "$label" "$WORK/$label.log" "$rc"
	if [ -s regression.diffs ]; then
		echo "---- $label: regression.diffs (first 80 lines) ----"
		head -80 regression.diffs
		cp regression.diffs "$WORK/$label.diffs"
	fi
	make -s installcheck-isolation PGHOST="$PGHOST" PGPORT="$PGPORT" PGUSER="$PGUSER" \
		>"$WORK/$ilabel.log" 2>&1
	rc=$?
	record_regress_log "$ilabel" "$WORK/$ilabel.log" "$rc"
	if [ -s output_iso/regression.diffs ]; then
		echo "---- $ilabel: output_iso/regression.diffs (first 80 lines) ----"
		head -80 output_iso/regression.diffs
		cp output_iso/regression.diffs "$WORK/$ilabel.diffs"
	fi
}

# The core benchmark on 200000 keys: fails on any wrong lookup result or an
# unsound table, not on its speed floors.
run_core_bench() {
	local file=/dev/shm/pmhash-test-bench-$$ rc
	make -s -C test/bench/core -B >"$WORK/core-bench.log" 2>&1 &&
		PMEM_IS_PMEM_FORCE=1 test/bench/core/bench_core -n 200000 -r 1 -f "$file" \
			>>"$WORK/core-bench.log" 2>&1
	rc=$?
	rm -f "$file"
	[ "$rc" = 0 ] || tail -20 "$WORK/core-bench.log"
	return "$rc"
}

install_packages

# PG_MAJOR=16, 17 or 18: that version's suites alone (pg_regress, isolation
# and every TAP file), for development
if [ -n "${PG_MAJOR:-}" ] && [ "$PG_MAJOR" != 15 ]; then
	run_suite versions bash test/versions-regress.sh "$PG_MAJOR"
	run_suite versions-tap bash test/versions-tap.sh "$PG_MAJOR"
	echo
	echo "$PASSED passed, $FAILED failed"
	[ "$FAILED" = 0 ] && as_root rm -rf "$WORK"
	[ "$FAILED" = 0 ]
	exit
fi

build_install ""
record "build with -Wall -Wextra -Werror" $?
run_suite core make -s core-check
run_core_bench
record "core benchmark on 200000 keys: every lookup right, table sound" $?
run_suite fuzz bash test/fuzz/run.sh
run_suite packaging bash test/suites/packaging.sh "$WORK"
build_install "-DUSE_ASSERT_CHECKING"
record "build with assertions" $?
run_suite fullfs bash test/fullfs.sh "$WORK"
run_suite soak env SOAK_SECONDS=60 bash test/soak.sh "$WORK"
run_suite versions bash test/versions-regress.sh 16 17 18
# the TAP files on 18, the current major, but 013 (rebuilds of 3M rows cut
# short, 13 minutes there; what it tests does not depend on the version);
# on 16 and 17 those of crash recovery, standbys, PITR, pg_upgrade,
# databases and templates, logical replication, phantoms of a crash in
# partial indexes (whose plans 16 and later filter less), the operations of issue 74
# (template copies, restarts, the fallback, rebuilds on use), the
# syncer's slot and shards that split (their replay, restarts, the WAL
# record bound)
run_suite versions-tap-18 env PMHASH_VERSION_TAP_SKIP=013 bash test/versions-tap.sh 18
run_suite versions-tap-16-17 env PMHASH_VERSION_TAP="$VERSION_TAP_SUBSET" bash test/versions-tap.sh 16 17

for mode in pmem msync; do
	start_cluster "$WORK/$mode" "$mode"
	echo "== $mode cluster on port $PGPORT, files in $(pmhash_dir)"
	run_regress "regress-$mode"
	for suite in test/suites/*.sh; do
		[ -e "$suite" ] || continue
		run_suite "$(basename "$suite" .sh)-$mode" bash "$suite" "$WORK/$mode"
	done
	stop_cluster
done

echo
if [ -n "$FAILURES" ]; then
	echo "failed:$FAILURES"
	echo "logs and the clusters' files kept in $WORK"
else
	# the clusters' files take gigabytes; the logs stay
	for dir in "$WORK"/*/; do as_root rm -rf "$dir"; done
	echo "logs in $WORK"
fi
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
