#!/usr/bin/env bash
# test/suites/structure.sh: the structural checks of the source tree
# (test/structure.py): no call cycle among the glue files, the layering of
# src/README's "Source files", src/core/ free of PostgreSQL headers, no .c
# file over the size limit, a comment above every function.  First its
# self-test (a small tree with one deliberate violation of each rule, each of
# which must be reported), then the check of this tree.  Needs no server and
# reads only the sources, so it runs once, in the pmem pass.  Usage:
# structure.sh [WORKDIR] (unused; the runner passes one to every suite).
# Prints "ok N - ..." / "not ok N - ..." lines; exits non-zero on failure.
set -u
REPO=$(cd "$(dirname "$0")/../.." && pwd)
source "$REPO/test/lib/common.sh"

if [ "${PMEM_IS_PMEM_FORCE:-0}" != 1 ]; then
	echo "# the structural checks run in the pmem pass only"
	exit 0
fi

# Run test/structure.py with the given arguments, its results renumbered into
# this suite's; its other lines are passed through.  A run that fails without
# a "not ok" line (a crash) counts as one failure.
run_structure() {
	local output rc line failed_before=$TAP_FAILED
	output=$(python3 "$REPO/test/structure.py" "$@" 2>&1)
	rc=$?
	while IFS= read -r line; do
		case "$line" in
			"ok "*) tap_result 0 "${line#ok * - }" ;;
			"not ok "*) tap_result 1 "${line#not ok * - }" ;;
			*) echo "$line" ;;
		esac
	done <<<"$output"
	if [ "$rc" != 0 ] && [ "$TAP_FAILED" = "$failed_before" ]; then
		tap_result 1 "test/structure.py $* exited with status $rc"
	fi
}

run_structure --self-test
run_structure "$REPO"
[ "$TAP_FAILED" = 0 ]
