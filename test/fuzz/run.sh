#!/usr/bin/env bash
# test/fuzz/run.sh: fuzz the core's file loader, verifier and lookups.
#
# Builds test/fuzz/fuzz_file with clang's libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer, writes a seed corpus of real index file images
# (test/fuzz/make_seeds.c) into a fresh work directory, and fuzzes for
# FUZZ_SECONDS seconds (default 60; the test command's run).  Prints
# "ok - ..." or "not ok - ..." and exits non-zero if the fuzzer found a
# crash, a leak or a hang; the crashing input is kept in the work directory
# (its path is printed) and becomes a regression test by adding it to
# test/fuzz/regressions/, whose files every run replays first.
#
#   bash test/fuzz/run.sh                     one minute
#   FUZZ_SECONDS=3600 bash test/fuzz/run.sh   an hour
set -u
cd "$(dirname "$0")/../.."
source test/lib/common.sh
install_packages >/dev/null
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
WORK=$(mktemp -d /tmp/pmhash-fuzz-XXXXXX)
CLANG=${CLANG:-clang-14}
CORE="src/core/*.c"

if ! $CLANG -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-o "$WORK/fuzz_file" test/fuzz/fuzz_file.c $CORE >"$WORK/build.log" 2>&1; then
	cat "$WORK/build.log"
	echo "not ok 1 - fuzz target builds"
	exit 1
fi
if ! gcc -std=gnu11 -O2 -o "$WORK/make_seeds" test/fuzz/make_seeds.c test/core/memtable.c $CORE \
	>>"$WORK/build.log" 2>&1; then
	cat "$WORK/build.log"
	echo "not ok 1 - seed generator builds"
	exit 1
fi
echo "ok 1 - fuzz target and seed generator build"
mkdir -p "$WORK/corpus"
"$WORK/make_seeds" "$WORK/corpus" >/dev/null || { echo "not ok 2 - seed corpus written"; exit 1; }
echo "ok 2 - seed corpus of $(ls "$WORK/corpus" | wc -l) real index files"
rc=0
if [ -d test/fuzz/regressions ] && [ -n "$(ls test/fuzz/regressions)" ]; then
	if "$WORK/fuzz_file" test/fuzz/regressions/* >"$WORK/regressions.log" 2>&1; then
		echo "ok 3 - earlier crashing inputs replay cleanly"
	else
		tail -30 "$WORK/regressions.log"
		echo "not ok 3 - earlier crashing inputs replay cleanly"
		rc=1
	fi
fi
(cd "$WORK" && ./fuzz_file -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
	-max_len=$((256 * 1024)) -print_final_stats=1 corpus >fuzz.log 2>&1)
frc=$?
grep -E "^stat::number_of_executed_units|^stat::new_units_added" "$WORK/fuzz.log" | sed 's/^/# /'
if [ "$frc" = 0 ]; then
	echo "ok 4 - $FUZZ_SECONDS s of fuzzing found nothing"
else
	tail -40 "$WORK/fuzz.log"
	ls "$WORK"/crash-* "$WORK"/leak-* "$WORK"/timeout-* 2>/dev/null | sed 's/^/# input: /'
	echo "not ok 4 - $FUZZ_SECONDS s of fuzzing found nothing"
	rc=1
fi
[ "$rc" = 0 ] && rm -rf "$WORK"
exit $rc
