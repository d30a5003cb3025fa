#!/usr/bin/env bash
# test/versions-build.sh: build pmhash with -Wall -Wextra -Werror against
# each PostgreSQL major version it supports (15, 16, 17, 18; or those given
# as arguments), installing each first if missing (test/lib/pgversions.sh
# says from where).  For 17 the tree is copied into the Debian 13 root and
# built there, as a Debian 13 user would.  Prints, per version, the time the
# install and the build took, and ends with "N passed, N failed".  Builds
# only: it installs pmhash nowhere and starts no server.
set -u
cd "$(dirname "$0")/.."
source test/lib/pgversions.sh

PASSED=0
FAILED=0
WORK=$(mktemp -d /tmp/pmhash-versions-XXXXXX)

# Seconds since the epoch, with fractions.
now() {
	date +%s.%N
}

# Seconds from $1 to now, one decimal.
since() {
	awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'
}

for major in ${@:-$(pgv_majors)}; do
	t0=$(now)
	if ! pgv_pg_config "$major" >"$WORK/install-$major.log" 2>&1; then
		echo "not ok - PostgreSQL $major: install failed ($(since "$t0") s)"
		tail -20 "$WORK/install-$major.log"
		FAILED=$((FAILED + 1))
		continue
	fi
	install_s=$(since "$t0")
	if [ "$major" = 17 ]; then
		dir=$PGV_ROOT/tmp/pmhash-build
	else
		dir=$WORK/build-$major
	fi
	pgv_copy_tree "$PWD" "$dir" || { FAILED=$((FAILED + 1)); continue; }
	t0=$(now)
	if pgv_make "$major" "$dir" >"$WORK/build-$major.log" 2>&1; then
		echo "ok - $(pgv_version "$major"): install ${install_s} s, build $(since "$t0") s"
		PASSED=$((PASSED + 1))
	else
		echo "not ok - PostgreSQL $major: build failed ($(since "$t0") s)"
		grep -E 'error|warning' "$WORK/build-$major.log" | head -20
		FAILED=$((FAILED + 1))
	fi
	[ "$major" != 17 ] || pgv_remove "$dir"
done
rm -rf "$WORK"
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
