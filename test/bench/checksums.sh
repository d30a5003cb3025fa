#!/usr/bin/env bash
# test/bench/checksums.sh: what bucket checksums cost pmhash, in one run.
#
# pmhash keeps checksums of its buckets and posting blocks when the cluster
# has data checksums.  This starts two throwaway clusters side by side, one
# initialized with data checksums and one without, both with their pmhash
# files on /dev/shm (PMEM_IS_PMEM_FORCE=1), loads the same ROWS random int8
# keys into each with a pmhash index, and then, REPS times with the two
# clusters alternating:
#   AM-level probes: PROBES present and PROBES absent keys through the
#     index AM API (pmhash_bench_probe, LOOPS passes), nanoseconds per probe;
#   inserts: INSERT_ROWS more rows in one statement, microseconds per row
#     (the rows are deleted and the table vacuumed after each run).
# It keeps the best of each, checks every index with pmhash_verify, and
# prints and writes test/bench/out/checksums.csv with the ratios
# (with checksums / without).  Environment: ROWS (1000000), PROBES (200000),
# INSERT_ROWS (200000), LOOPS (5), REPS (3).
set -u
source "$(dirname "$0")/../lib/common.sh"
cd "$REPO"

ROWS=${ROWS:-1000000}
PROBES=${PROBES:-200000}
INSERT_ROWS=${INSERT_ROWS:-200000}
LOOPS=${LOOPS:-5}
REPS=${REPS:-3}
OUT=$REPO/test/bench/out
CSV=$OUT/checksums.csv
WORK=$(mktemp -d /tmp/pmhash-checksums-XXXXXX)
chmod 755 "$WORK"
mkdir -p "$OUT"

# Stop with a message.
die() {
	echo "checksums.sh: $*" >&2
	exit 1
}

# Run SQL on cluster $1 ("on" or "off"), printing only results.
sql() {
	local c=$1
	shift
	PGHOST=$WORK/$c PGPORT=$(cat "$WORK/$c.port") PGUSER=$(pg_user) PGDATABASE=postgres \
		psql -X -q -At -v ON_ERROR_STOP=1 "$@"
}

# Start the cluster with ("on") or without ("off") data checksums.
start() {
	local c=$1 port shm
	mkdir -p "$WORK/$c"
	as_root chown "$(pg_user)" "$WORK/$c"
	as_pg initdb -D "$WORK/$c/data" -A trust --no-sync $([ "$c" = on ] && echo --data-checksums) \
		>/dev/null || die "initdb failed"
	port=$(free_port)
	echo "$port" >"$WORK/$c.port"
	shm=$(mktemp -d /dev/shm/pmhash-checksums-XXXXXX)
	as_root chown "$(pg_user)" "$shm"
	echo "$shm" >"$WORK/$c.shm"
	printf '%s\n' "port = $port" "listen_addresses = ''" "unix_socket_directories = '$WORK/$c'" \
		"shared_preload_libraries = 'pmhash'" "pmhash.directory = '$shm'" \
		"shared_buffers = 1GB" "max_wal_size = 8GB" "autovacuum = off" |
		as_pg tee -a "$WORK/$c/data/postgresql.conf" >/dev/null
	PMEM_IS_PMEM_FORCE=1 as_pg pg_ctl -D "$WORK/$c/data" -l "$WORK/$c/server.log" -w start \
		>/dev/null || die "cluster $c did not start"
}

# Stop both clusters and remove their files.
cleanup() {
	for c in on off; do
		[ -d "$WORK/$c/data" ] && as_pg pg_ctl -D "$WORK/$c/data" -m fast -w stop >/dev/null 2>&1
		[ -f "$WORK/$c.shm" ] && as_root rm -rf "$(cat "$WORK/$c.shm")"
	done
}
trap cleanup EXIT

# Load the table, its index and the probe keys into cluster $1.
load() {
	sql "$1" <<EOF
CREATE EXTENSION pmhash;
CREATE EXTENSION pmhash_bench;
SELECT setseed(0.42);
CREATE TABLE t (id bigint, k bigint);
INSERT INTO t SELECT i, (random() * 4e18)::bigint FROM generate_series(1, $ROWS) i;
CREATE INDEX t_k ON t USING pmhash (k);
CREATE TABLE present AS SELECT k FROM t ORDER BY random() LIMIT $PROBES;
CREATE TABLE absent AS SELECT (random() * 4e18)::bigint + 1 AS k FROM generate_series(1, $PROBES);
CREATE TABLE ins AS SELECT $ROWS + i AS id, (random() * 4e18)::bigint AS k
	FROM generate_series(1, $INSERT_ROWS) i;
VACUUM ANALYZE;
EOF
}

# Nanoseconds per AM-level probe of the keys of table $2 in cluster $1.
probe_ns() {
	sql "$1" -c "SELECT round(ns_per_probe::numeric, 1) FROM pmhash_bench_probe('t_k',
		(SELECT array_agg(k) FROM $2), $LOOPS)"
}

# Microseconds per row of one INSERT of the rows of ins in cluster $1; the
# rows are removed again afterwards.
insert_us() {
	sql "$1" <<EOF
SELECT extract(epoch FROM clock_timestamp()) AS t0 \gset
INSERT INTO t SELECT id, k FROM ins;
SELECT round(((extract(epoch FROM clock_timestamp()) - :t0) * 1e6 / $INSERT_ROWS)::numeric, 3);
DELETE FROM t WHERE id > $ROWS;
VACUUM t;
EOF
}

# The smaller of two numbers ($1 may be empty).
best() {
	if [ -z "$1" ]; then echo "$2"; else python3 -c "print(min($1, $2))"; fi
}

install_packages
build_install ""
make -C test/bench/am -s clean
make -C test/bench/am -s PG_CFLAGS="-Wall -Wextra -Werror -Wno-unused-parameter" ||
	die "building test/bench/am failed"
as_root make -C test/bench/am -s install >/dev/null || die "installing test/bench/am failed"

for c in on off; do
	start "$c"
	load "$c" || die "loading cluster $c failed"
	[ "$(sql "$c" -c 'SHOW data_checksums')" = "$c" ] || die "cluster $c: wrong data_checksums"
done

declare -A BEST
for rep in $(seq 1 "$REPS"); do
	order="on off"
	[ $((rep % 2)) = 0 ] && order="off on"
	for c in $order; do
		for what in present absent; do
			v=$(probe_ns "$c" "$what") || die "probe failed"
			BEST[$what-$c]=$(best "${BEST[$what-$c]:-}" "$v")
		done
		v=$(insert_us "$c") || die "insert failed"
		BEST[insert-$c]=$(best "${BEST[insert-$c]:-}" "$v")
	done
	echo "== repetition $rep of $REPS done"
done

for c in on off; do
	n=$(sql "$c" -c "SELECT pmhash_verify('t_k') = (SELECT count(*) FROM t)") || die "verify failed"
	[ "$n" = t ] || die "cluster $c: pmhash_verify does not count every row"
done

echo "metric,with_checksums,without,ratio" >"$CSV"
printf '%-28s %14s %14s %8s\n' metric "with checksums" without ratio
for m in present:am_present_ns absent:am_absent_ns insert:insert_us_per_row; do
	key=${m%%:*}
	name=${m#*:}
	ratio=$(python3 -c "print(round(${BEST[$key-on]} / ${BEST[$key-off]}, 3))")
	echo "$name,${BEST[$key-on]},${BEST[$key-off]},$ratio" >>"$CSV"
	printf '%-28s %14s %14s %8s\n' "$name" "${BEST[$key-on]}" "${BEST[$key-off]}" "$ratio"
done
echo "(best of $REPS; $ROWS rows, $PROBES probe keys, $INSERT_ROWS inserted rows; $CSV)"
