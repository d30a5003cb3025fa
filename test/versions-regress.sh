#!/usr/bin/env bash
# test/versions-regress.sh: pmhash's pg_regress suite and isolation specs
# (make installcheck) and its pgTAP tests (test/suites/pgtap.sh) against
# each PostgreSQL major version given as an argument (16, 17, 18; 15 too,
# but test/run-tests.sh covers it).  For each: installs the version if
# missing (test/lib/pgversions.sh) and pgTAP into it (Debian 13's
# postgresql-17-pgtap, whose SQL files serve the wheels' 16 and 18 too),
# builds pmhash with -Wall -Wextra -Werror in a copy of the tree, installs
# it into that version's tree, starts a throwaway cluster with pmhash
# preloaded (files on the ordinary disk; on 16 without prepared
# transactions, as PostgreSQL's defaults have it), runs make installcheck
# and the pgTAP files and stops the cluster.  17 does all of it inside the
# Debian 13 root, in one run of pgv_in_root, so that the mounts live as
# long as the server.  Ends with "N passed, N failed" (two results per
# version); run as root.
set -u
cd "$(dirname "$0")/.."
source test/lib/common.sh
source test/lib/pgversions.sh

PASSED=0
FAILED=0
WORK=$(mktemp -d /tmp/pmhash-versions-XXXXXX)
chmod 755 "$WORK"

# Print the script that runs inside the Debian 13 root: install the build
# in $1, run a cluster in $2 and make installcheck (its output in
# $2/installcheck.log).
write_in_root_script() {
	cat <<'EOF'
set -u
build=$1 base=$2 bin=/usr/lib/postgresql/17/bin
make -C "$build" -s install PG_CONFIG=$bin/pg_config >/dev/null || exit 1
mkdir -p "$base" && chown postgres "$base"
runuser -u postgres -- $bin/initdb -D "$base/data" -A trust --no-sync >/dev/null || exit 1
cat >>"$base/data/postgresql.conf" <<EOC
port = 5433
listen_addresses = ''
unix_socket_directories = '$base'
shared_preload_libraries = 'pmhash'
max_connections = 40
shared_buffers = 256MB
max_prepared_transactions = 4
EOC
runuser -u postgres -- $bin/pg_ctl -D "$base/data" -l "$base/server.log" -w start >/dev/null || exit 1
PGHOST=$base PGPORT=5433 PGUSER=postgres make -C "$build" installcheck \
	PG_CONFIG=$bin/pg_config >"$base/installcheck.log" 2>&1
echo $? >"$base/installcheck.rc"
PGHOST=$base PGPORT=5433 PGUSER=postgres PSQL_BIN=$bin/psql \
	bash "$build/test/suites/pgtap.sh" "$base/pgtap" >"$base/pgtap.log" 2>&1
echo $? >"$base/pgtap.rc"
runuser -u postgres -- $bin/pg_ctl -D "$base/data" -m fast -w stop >/dev/null
EOF
}

# Install pgTAP into major version $1: Debian 13's package inside the root
# for 17; its SQL files (pgTAP has no C code) copied into a wheel's tree.
install_pgtap() {
	local major=$1
	pgv_install 17 || return 1
	if [ ! -e "$PGV_ROOT/usr/share/postgresql/17/extension/pgtap.control" ] ||
		[ ! -x "$PGV_ROOT/usr/bin/pg_prove" ]; then
		pgv_in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			postgresql-17-pgtap libtap-parser-sourcehandler-pgtap-perl >/dev/null || return 1
	fi
	[ "$major" = 17 ] && return 0
	pgv_pg_config "$major" >/dev/null || return 1
	cp "$PGV_ROOT"/usr/share/postgresql/17/extension/pgtap* "$("$PG_CONFIG" --sharedir)/extension/"
}

# Build, install and run make installcheck and the pgTAP files against
# major version $1; their outputs in $WORK/installcheck-$1.log and
# $WORK/pgtap-$1.log, their exit statuses in $WORK/installcheck-$1.rc and
# $WORK/pgtap-$1.rc (missing if it did not get that far).
regress_version() {
	local major=$1 dir log=$WORK/installcheck-$1.log
	install_pgtap "$major" >"$WORK/pgtap-$major.log" 2>&1 || return 1
	if [ "$major" = 17 ]; then
		dir=$PGV_ROOT/tmp/pmhash-regress
		pgv_copy_tree "$PWD" "$dir" || return 1
		pgv_make 17 "$dir" >"$log" 2>&1 || return 1
		write_in_root_script >"$dir/in-root.sh"
		pgv_in_root bash /tmp/pmhash-regress/in-root.sh /tmp/pmhash-regress /tmp/pmhash-regress/cluster
		for f in installcheck.log pgtap.log installcheck.rc pgtap.rc; do
			cp "$dir/cluster/$f" "$WORK/${f%.*}-$major.${f##*.}" 2>/dev/null
		done
		pgv_remove "$dir"
		return 0
	fi
	dir=$WORK/build-$major
	pgv_copy_tree "$PWD" "$dir" || return 1
	pgv_make "$major" "$dir" >"$log" 2>&1 || return 1
	pgv_make "$major" "$dir" install >>"$log" 2>&1 || return 1
	PG_BIN=$PG_BINDIR
	# 16 keeps PostgreSQL's default max_prepared_transactions, 0: the suite
	# must pass on a default-configured server (expected/prepared_1.out)
	if [ "$major" = 16 ]; then
		start_cluster "$WORK/cluster-$major" msync "max_prepared_transactions = 0"
	else
		start_cluster "$WORK/cluster-$major" msync
	fi
	pgv_make "$major" "$dir" installcheck >"$log" 2>&1
	echo $? >"$WORK/installcheck-$major.rc"
	PSQL_BIN=$PG_BIN/psql bash test/suites/pgtap.sh "$WORK/pgtap-$major" >"$WORK/pgtap-$major.log" 2>&1
	echo $? >"$WORK/pgtap-$major.rc"
	stop_cluster
}

# Record the result of $2 (installcheck or pgtap) on major version $1 from
# its exit status file: passed if it holds 0.
report() {
	local major=$1 what=$2 label=pgTAP
	[ "$what" = installcheck ] && label="make installcheck"
	if [ "$(cat "$WORK/$what-$major.rc" 2>/dev/null)" = 0 ]; then
		echo "ok $((PASSED + FAILED + 1)) - PostgreSQL $major: $label"
		PASSED=$((PASSED + 1))
	else
		echo "not ok $((PASSED + FAILED + 1)) - PostgreSQL $major: $label"
		FAILED=$((FAILED + 1))
	fi
}

for major in "$@"; do
	regress_version "$major"
	report "$major" installcheck
	grep -E '^(not ok|# .*(passed|failed))' "$WORK/installcheck-$major.log"
	report "$major" pgtap
	grep -E '^not ok' "$WORK/pgtap-$major.log"
done
if [ "$FAILED" = 0 ]; then
	as_root rm -rf "$WORK"
else
	echo "logs, builds and clusters kept in $WORK"
fi
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
