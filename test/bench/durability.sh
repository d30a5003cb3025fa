#!/usr/bin/env bash
# test/bench/durability.sh: the cost of pmhash's durability, against hash and
# btree in the same runs.
#
#   1. WAL bytes per inserted row over ROWS (default 1,000,000) inserts into a
#      table with one index, pmhash vs hash vs btree, with the table's own WAL
#      (no index) as the baseline;
#   2. commit latency of one-row INSERT transactions (pgbench, 1 client) with a
#      pmhash, hash or btree index, on a cluster whose pmhash files are on
#      /dev/shm with PMEM_IS_PMEM_FORCE=1 (pmem path) and on one whose files
#      are on the ordinary disk (msync path, where the syncer makes them
#      durable behind the commits): LATENCY_REPS runs of each, rotated, and
#      the median of each;
#   3. with RECOVERY_ROWS (default 10,000,000) entries, on both paths, for no
#      index, pmhash, hash and btree: the time of a CHECKPOINT after 200,000
#      inserts, then, after 200,000 more, crash recovery: restart after an
#      immediate stop, and the first query's time.
# Writes test/bench/out/durability.csv and prints a table.  Environment:
# ROWS, RECOVERY_ROWS, LATENCY_SECONDS (default 20), LATENCY_REPS (default 3).
set -u
cd "$(dirname "$0")/../.."
source test/lib/common.sh

ROWS=${ROWS:-1000000}
RECOVERY_ROWS=${RECOVERY_ROWS:-10000000}
LATENCY_SECONDS=${LATENCY_SECONDS:-20}
LATENCY_REPS=${LATENCY_REPS:-3}
OUT=test/bench/out
WORK=$(mktemp -d /tmp/pmhash-durability-XXXXXX)
chmod 755 "$WORK"
mkdir -p "$OUT"
CSV=$OUT/durability.csv
echo "metric,am,path,value,unit" > "$CSV"

# Record one result.
result() {
	echo "$1,$2,$3,$4,$5" >> "$CSV"
	printf '%-26s %-7s %-6s %12s %s\n' "$1" "$2" "$3" "$4" "$5"
}

# Run SQL quietly, printing only the result.
sql() {
	psql -X -q -At -v ON_ERROR_STOP=1 -c "$1"
}

# WAL bytes per row of ROWS inserts into a table with an index of method $1 ('' for none).
wal_per_row() {
	local am=$1
	sql "DROP TABLE IF EXISTS w; CREATE TABLE w (id bigint, k bigint)"
	[ -n "$am" ] && sql "CREATE INDEX w_k ON w USING $am (k)"
	sql "CHECKPOINT"
	sql "SELECT pg_current_wal_insert_lsn()" > "$WORK/lsn0"
	sql "INSERT INTO w SELECT i, (random() * 4e18)::bigint FROM generate_series(1, $ROWS) i"
	sql "SELECT round((pg_current_wal_insert_lsn() - '$(cat "$WORK/lsn0")'::pg_lsn) / $ROWS::numeric, 1)"
}

# Average commit latency (ms) of one-row insert transactions with an index of method $1.
commit_latency() {
	local am=$1
	sql "DROP TABLE IF EXISTS c; CREATE TABLE c (id bigserial, k bigint); CREATE INDEX c_k ON c USING $am (k)"
	sql "INSERT INTO c (k) SELECT (random() * 4e18)::bigint FROM generate_series(1, 100000)"
	echo 'INSERT INTO c (k) VALUES ((random() * 4e18)::bigint);' > "$WORK/insert.sql"
	chmod 644 "$WORK/insert.sql"
	pgbench -n -c 1 -T "$LATENCY_SECONDS" -f "$WORK/insert.sql" postgres 2>/dev/null |
		sed -nE 's/^latency average = ([0-9.]+) ms/\1/p'
}

# The median of the values of $1 in file $2 (lines "name value").
median_of() {
	awk -v n="$1" '$1 == n { print $2 }' "$2" | sort -g |
		awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# Milliseconds of SQL $1 (psql's timing).
timed_ms() {
	psql -X -q -At -c '\timing on' -c "$1" | sed -nE 's/^Time: ([0-9.]+) ms.*/\1/p'
}

# With an index of method $1 (none: no index) on RECOVERY_ROWS rows: the ms of
# a CHECKPOINT after 200,000 inserts; then, after 200,000 more, the seconds
# for the server to come back after an immediate stop, and the first query's ms.
checkpoint_and_recovery() {
	local am=$1 checkpoint t0 t1 first
	sql "DROP TABLE IF EXISTS r; CREATE TABLE r (id bigint, k bigint)"
	sql "INSERT INTO r SELECT i, (random() * 4e18)::bigint FROM generate_series(1, $RECOVERY_ROWS) i"
	[ "$am" = none ] || sql "CREATE INDEX r_k ON r USING $am (k)"
	sql "CHECKPOINT"
	sql "INSERT INTO r SELECT i, (random() * 4e18)::bigint FROM generate_series(1, 200000) i"
	checkpoint=$(timed_ms "CHECKPOINT")
	# changes after the checkpoint, for replay to redo
	sql "INSERT INTO r SELECT i, (random() * 4e18)::bigint FROM generate_series(1, 200000) i"
	as_pg pg_ctl -D "$PGDATA_DIR" -m immediate -w stop >/dev/null
	t0=$(date +%s.%N)
	as_pg pg_ctl -D "$PGDATA_DIR" -l "$PGHOST/server.log" -w start >/dev/null
	t1=$(date +%s.%N)
	first=$(psql -X -q -At -c "SET enable_seqscan = off" -c '\timing on' \
		-c "SELECT count(*) FROM r WHERE k = 42" | sed -nE 's/^Time: ([0-9.]+) ms.*/\1/p')
	echo "$checkpoint $(echo "$t1 - $t0" | bc -l | xargs printf '%.2f') $first"
}

install_packages
dpkg -s bc >/dev/null 2>&1 || as_root apt-get install -y -qq bc >/dev/null
build_install ""

for path in pmem msync; do
	start_cluster "$WORK/$path" "$path" "max_wal_size = 8GB" "checkpoint_timeout = 30min" \
		"shared_buffers = 2GB"
	sql "CREATE EXTENSION pmhash"
	echo "== $path cluster, pmhash files in $(pmhash_dir); load: $(cut -d' ' -f1-3 /proc/loadavg)"
	if [ "$path" = pmem ]; then
		base=$(wal_per_row "")
		result wal_bytes_per_row none "$path" "$base" bytes
		for am in pmhash hash btree; do
			total=$(wal_per_row "$am")
			result wal_bytes_per_row "$am" "$path" "$total" bytes
			result index_wal_bytes_per_row "$am" "$path" "$(echo "$total - $base" | bc)" bytes
		done
	fi
	: >"$WORK/latency"
	ams="pmhash hash btree"
	for rep in $(seq "$LATENCY_REPS"); do
		for am in $ams; do
			echo "$am $(commit_latency "$am")" >>"$WORK/latency"
		done
		ams="${ams#* } ${ams%% *}"
	done
	for am in pmhash hash btree; do
		result commit_latency "$am" "$path" "$(median_of "$am" "$WORK/latency")" ms
	done
	sql "DROP TABLE c"
	for am in none pmhash hash btree; do
		read -r checkpoint restart first < <(checkpoint_and_recovery "$am")
		result checkpoint_after_inserts "$am" "$path" "$checkpoint" ms
		result recovery_restart "$am" "$path" "$restart" s
		[ "$am" = none ] || result recovery_first_query "$am" "$path" "$first" ms
	done
	grep -E "pmhash: .* entries .* checked|pmhash: replayed|redo done" "$PGHOST/server.log" | tail -4 | sed 's/^/  log: /'
	stop_cluster
done
echo "results in $CSV"
