#!/usr/bin/env bash
# test/suites/tap.sh: run the Perl TAP tests in test/t/ with make prove_installcheck.
# The tests start their own clusters with PostgreSQL::Test::Cluster, which
# refuses to run as root, so make runs as the PostgreSQL user, once per test
# file, from a directory of its own in the work directory (where PGXS puts
# tmp_check/ with the file's logs), with a copy of the Makefile and test/t
# as its source tree (the checkout may be out of that user's reach).  They
# do not use the cluster the runner started, so they run once, in the pmem
# pass.  Prints one "ok N - tap <file>" / "not ok N - tap <file>" line per
# file.
set -u
WORK=$1
REPO=$(cd "$(dirname "$0")/../.." && pwd)
source "$REPO/test/lib/common.sh"

if [ "${PMEM_IS_PMEM_FORCE:-0}" != 1 ]; then
	echo "# TAP tests run in the pmem pass only"
	exit 0
fi
SRC=$WORK/tap/src
mkdir -p "$SRC/test"
cp "$REPO/Makefile" "$SRC/"
cp -r "$REPO/test/t" "$SRC/test/"
as_root chown -R "$(pg_user)" "$WORK/tap"
cd "$SRC" || exit 1
rc=0
for t in test/t/*.pl; do
	[ -e "$t" ] || continue
	name=$(basename "$t")
	dir="$WORK/tap/${name%.pl}"
	log="$WORK/tap/$name.log"
	as_pg mkdir -p "$dir"
	if as_pg make -s -C "$dir" -f "$SRC/Makefile" prove_installcheck \
		PROVE_TESTS="$t" PROVE_FLAGS=-v >"$log" 2>&1; then
		tap_result 0 "tap $name"
	else
		tap_result 1 "tap $name"
		tap_failure "tap $name" "$log" "$WORK/tap/failures"
		rc=1
	fi
done
[ -s "$WORK/tap/failures" ] && { echo "# what failed:"; cat "$WORK/tap/failures"; }
exit $rc
