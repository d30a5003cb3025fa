#!/usr/bin/env bash
# test/lib/common.sh: shared shell functions of the pmhash scripts.
# Installs what the scripts need, builds and installs pmhash, and starts and
# stops throwaway PostgreSQL 15 clusters with pmhash preloaded.  When run as
# root, PostgreSQL runs as the unprivileged user "postgres" (initdb refuses
# root); otherwise as the calling user, with sudo for installing.

PG_BIN=/usr/lib/postgresql/15/bin
PGXS_DIR=/usr/lib/postgresql/15/lib/pgxs
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PACKAGES="postgresql-15 postgresql-server-dev-15 postgresql-contrib libpmem-dev postgresql-15-pgtap
libtap-parser-sourcehandler-pgtap-perl libipc-run-perl make gcc python3 clang-14 libclang-rt-14-dev
python3-jsonschema git"

# Counters of tap_result.
TAP_N=0
TAP_FAILED=0

# Print one TAP-like result line of a suite: $1 is 0 for success, $2 the description.
tap_result() {
	TAP_N=$((TAP_N + 1))
	if [ "$1" = 0 ]; then
		echo "ok $TAP_N - $2"
	else
		echo "not ok $TAP_N - $2"
		TAP_FAILED=$((TAP_FAILED + 1))
	fi
}

# Print the end of the log $2 of a failed test file (named $1), and add its
# failed checks and errors to file $3, which the caller prints last: a CI
# report that shows only the last lines of a suite then still has them.
tap_failure() {
	tail -30 "$2" | sed 's/^/# /'
	{
		echo "# $1:"
		grep -E '^not ok|^# +(got|expected):|Bail out|died|Error running|ERROR:|timed out' "$2" |
			head -12 | sed 's/^/#   /'
	} >>"$3"
}

# Run a command as root (directly, or through sudo).
as_root() {
	if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# The user PostgreSQL runs as.
pg_user() {
	if [ "$(id -u)" = 0 ]; then echo postgres; else id -un; fi
}

# Run a command as the PostgreSQL user, keeping selected environment.
as_pg() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- env PATH="$PG_BIN:$PATH" PMEM_IS_PMEM_FORCE="${PMEM_IS_PMEM_FORCE:-0}" "$@"
	else
		env PATH="$PG_BIN:$PATH" "$@"
	fi
}

# Install the packages the scripts need, unless they are all there.
install_packages() {
	local missing=""
	for p in $PACKAGES; do
		dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
	done
	if [ -n "$missing" ]; then
		echo "== installing:$missing"
		as_root apt-get update -qq
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
	fi
	# Debian's postgresql-common may start a default cluster; it is not used
	if [ "$(id -u)" = 0 ] && command -v pg_ctlcluster >/dev/null 2>&1; then
		pg_ctlcluster 15 main stop >/dev/null 2>&1 || true
	fi
}

# Build and install pmhash; extra compiler flags in $1, further arguments
# go to make (for another version: PG_CONFIG=..., CFLAGS=...).
build_install() {
	local cflags="-Wall -Wextra -Werror ${1:-}"
	shift $(($# > 0 ? 1 : 0))
	echo "== building pmhash (PG_CFLAGS=$cflags)"
	make -C "$REPO" -s clean
	make -C "$REPO" -s "$@" PG_CFLAGS="$cflags" &&
		as_root make -C "$REPO" -s "$@" install >/dev/null
}

# A free TCP port on the loopback interface.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Start a throwaway cluster.  Sets PGDATA_DIR, PGHOST, PGPORT, PGUSER and
# CLUSTER_SHM (the /dev/shm directory it made, if any).
#   $1: directory to create it in; $2: "pmem" (file directory on /dev/shm,
#   PMEM_IS_PMEM_FORCE=1) or "msync" (files inside the data directory on the
#   ordinary disk); further arguments: extra postgresql.conf lines.
start_cluster() {
	local base=$1 mode=$2
	shift 2
	mkdir -p "$base"
	chmod 755 "$base"
	as_root chown "$(pg_user)" "$base"
	PGDATA_DIR=$base/data
	CLUSTER_SHM=""
	as_root rm -rf "$PGDATA_DIR"
	PGPORT=$(free_port)
	PGHOST=$base
	PGUSER=$(pg_user)
	export PGHOST PGPORT PGUSER PGDATABASE=postgres
	as_pg initdb -D "$PGDATA_DIR" -A trust --no-sync >/dev/null
	if [ "$mode" = pmem ]; then
		CLUSTER_SHM=$(mktemp -d /dev/shm/pmhash-XXXXXX)
		as_root chown "$(pg_user)" "$CLUSTER_SHM"
	fi
	{
		echo "port = $PGPORT"
		echo "listen_addresses = ''"
		echo "unix_socket_directories = '$base'"
		echo "shared_preload_libraries = 'pmhash'"
		echo "max_connections = 40"
		echo "shared_buffers = 256MB"
		echo "max_prepared_transactions = 4"
		echo "fsync = on"
		echo "synchronous_commit = on"
		[ -z "$CLUSTER_SHM" ] || echo "pmhash.directory = '$CLUSTER_SHM'"
		for line in "$@"; do echo "$line"; done
	} | as_pg tee -a "$PGDATA_DIR/postgresql.conf" >/dev/null
	if [ "$mode" = pmem ]; then export PMEM_IS_PMEM_FORCE=1; else export PMEM_IS_PMEM_FORCE=0; fi
	as_pg pg_ctl -D "$PGDATA_DIR" -l "$base/server.log" -w start >/dev/null
}

# Write to file $1 the variables that let a later process reach and stop the
# cluster of the last start_cluster (source it, then psql or stop_cluster).
save_cluster_env() {
	echo "export PGHOST=$PGHOST PGPORT=$PGPORT PGUSER=$PGUSER PGDATA_DIR=$PGDATA_DIR CLUSTER_SHM=$CLUSTER_SHM" >"$1"
}

# The pmhash.directory of the running cluster, as an absolute path.
pmhash_dir() {
	local d
	d=$(psql -XAtc "SHOW pmhash.directory")
	case "$d" in /*) echo "$d" ;; *) echo "$PGDATA_DIR/$d" ;; esac
}

# Stop a cluster started by start_cluster and remove its files.
stop_cluster() {
	as_pg pg_ctl -D "$PGDATA_DIR" -m fast -w stop >/dev/null 2>&1 || true
	# made by start_cluster, even when an extra line chose another directory
	[ -z "${CLUSTER_SHM:-}" ] || as_root rm -rf "$CLUSTER_SHM"
	CLUSTER_SHM=""
}
