#!/usr/bin/env bash
# test/suites/tap.sh: run the Perl TAP tests in test/t/ with prove.
# The tests start their own clusters with PostgreSQL::Test::Cluster, which
# refuses to run as root, so they run as the PostgreSQL user from a copy of
# test/t in the work directory.  They do not use the cluster the runner
# started, so they run once, in the pmem pass.
set -u
WORK=$1
REPO=$(cd "$(dirname "$0")/../.." && pwd)
source "$REPO/test/lib/common.sh"

if [ "${PMEM_IS_PMEM_FORCE:-0}" != 1 ]; then
	echo "# TAP tests run in the pmem pass only"
	exit 0
fi
mkdir -p "$WORK/tap"
cp -r "$REPO/test/t" "$WORK/tap/"
as_root chown -R "$(pg_user)" "$WORK/tap"
cd "$WORK/tap"
n=0
rc=0
for t in t/*.pl; do
	[ -e "$t" ] || continue
	n=$((n + 1))
	log="$WORK/tap/$(basename "$t").log"
	if as_pg env PERL5LIB="$PGXS_DIR/src/test/perl" PG_REGRESS="$PGXS_DIR/src/test/regress/pg_regress" \
		TESTDIR="$WORK/tap" prove -v "$t" >"$log" 2>&1; then
		echo "ok $n - tap $(basename "$t")"
	else
		echo "not ok $n - tap $(basename "$t")"
		tail -30 "$log" | sed 's/^/# /'
		rc=1
	fi
done
exit $rc
