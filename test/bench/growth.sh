#!/usr/bin/env bash
# test/bench/growth.sh: an index created on an empty table while the table
# grows, pmhash against hash and btree (and no index, the bound) on the
# same cluster, on the msync path (files on the ordinary disk) and on the
# persistent-memory path (files on /dev/shm, PMEM_IS_PMEM_FORCE=1).
#
# For each path a new cluster; for each index, in rotated order, a new
# table g (k int8) with its index made while empty, then three workloads:
#   mixed   a loader inserting ROWS random keys, BATCH rows per statement,
#           while one pgbench client inserts single rows with random keys,
#           logging every transaction's latency; the client's connection is
#           terminated when the loader ends;
#   loader  the loader alone, into a new table;
#   single  the pgbench client alone for SINGLE_SECONDS, into a new table.
# Reports per path and index: load time, the single-row latency p50, p99,
# p99.9 and max, the number over 10 ms and the rate of single-row inserts,
# the WAL written, the largest WAL record of pmhash's resource manager during the mixed
# workload (pg_walinspect), and the index's shards, segments, buckets and
# size at its end, with the distribution of pmhash's entries over its shards
# (least, median, 99th percentile and most per shard, pmhash_shards) and its
# largest segment.  Writes test/bench/out/growth.txt.  Environment: ROWS
# (10,000,000), BATCH (200,000), SINGLE_SECONDS (30), PATHS ("msync pmem"),
# INDEXES ("pmhash hash btree none"), MODES ("mixed loader single"), REPS
# (1: repetitions, each in another order of the indexes; the report gives
# each figure's median, the per-run lines are in growth-rows.txt);
# LOADER_RATE holds the loader to that many rows per second, so that every
# index meets the same write rate (a faster loader writes more WAL per
# second, which the single-row commits' WAL flushes then wait for);
# SKIP_BUILD=1 measures the installed pmhash; SETTINGS adds lines to
# postgresql.conf, separated by ";" (e.g. "pmhash.sync_interval = 30s").
set -u
cd "$(dirname "$0")/../.."
source test/lib/common.sh

ROWS=${ROWS:-10000000}
BATCH=${BATCH:-200000}
SINGLE_SECONDS=${SINGLE_SECONDS:-30}
PATHS=${PATHS:-msync pmem}
INDEXES=${INDEXES:-pmhash hash btree none}
MODES=${MODES:-mixed loader single}
REPS=${REPS:-1}
OUT=test/bench/out
WORK=$(mktemp -d /tmp/pmhash-growth-XXXXXX)
chmod 755 "$WORK"
mkdir -p "$OUT"
RESULTS=$WORK/results
: >"$RESULTS"

# Stop the cluster and remove the work directory (the clusters keep all of
# their WAL for pg_walinspect: gigabytes per run).
cleanup() {
	stop_cluster
	as_root rm -rf "$WORK"
}

# Stop with a message.
die() {
	echo "growth.sh: $*" >&2
	exit 1
}

# psql on the cluster, quiet, unaligned, stopping at the first error.
gsql() {
	psql -X -q -At -v ON_ERROR_STOP=1 -d postgres "$@"
}

# A new empty table g with an index of method $1 ("none": no index).
new_table() {
	gsql -c "DROP TABLE IF EXISTS g; CREATE TABLE g (k int8)" || die "CREATE TABLE failed"
	[ "$1" = none ] || gsql -c "CREATE INDEX g_k ON g USING $1 (k)" || die "CREATE INDEX USING $1 failed"
	gsql -c "CHECKPOINT" || die "CHECKPOINT failed"
}

# Insert ROWS random keys, BATCH per statement, at most LOADER_RATE rows
# per second if set; prints the seconds taken.
load() {
	local start end n=0 wait
	start=$(date +%s.%N)
	while [ "$n" -lt "$ROWS" ]; do
		gsql -c "INSERT INTO g SELECT (random() * 9e18)::int8 FROM generate_series(1, $BATCH)" ||
			die "the loader's insert failed"
		n=$((n + BATCH))
		if [ -n "${LOADER_RATE:-}" ]; then
			wait=$(awk -v s="$start" -v now="$(date +%s.%N)" -v n="$n" -v r="$LOADER_RATE" \
				'BEGIN { w = s + n / r - now; if (w < 0) w = 0; printf "%.3f", w }')
			sleep "$wait"
		fi
	done
	end=$(date +%s.%N)
	awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }'
}

# Start the single-row client in the background, logging to $WORK/$1.*; $2
# seconds, or until its connection is terminated when $2 is 0.
start_single() {
	local prefix=$WORK/$1 duration=${2:-0}
	rm -f "$prefix".*
	echo "INSERT INTO g VALUES ((random() * 9e18)::int8);" >"$WORK/single.sql"
	chmod 644 "$WORK/single.sql"
	(cd "$WORK" && exec pgbench -n -c 1 -T "$([ "$duration" -gt 0 ] && echo "$duration" || echo 100000)" \
		-l --log-prefix="$prefix" -f "$WORK/single.sql" -d postgres) >"$prefix.out" 2>&1 &
	SINGLE_PID=$!
	# wait for its connection
	for _ in $(seq 1 100); do
		[ "$(gsql -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgbench' AND query LIKE 'INSERT INTO g VALUES%'")" = 1 ] && return 0
		sleep 0.1
	done
	die "the single-row client did not start: $(cat "$prefix.out")"
}

# End the single-row client by terminating its connection.
stop_single() {
	gsql -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'pgbench'" >/dev/null
	wait "$SINGLE_PID" 2>/dev/null
}

# The single-row latencies in log files $1.*: "p50 p99 p999 max over10ms rate" (ms, per s).
latencies() {
	cat "$1".[0-9]* 2>/dev/null | awk '{ printf "%d %d.%06d\n", $3, $5, $6 }' | sort -n | awk '
		{ v[NR] = $1 / 1000; t = $2; if (NR == 1 || t < t0) t0 = t; if (t > t1) t1 = t; if ($1 > 10000) over++ }
		END {
			if (NR == 0) { print "- - - - - -"; exit }
			printf "%.2f %.2f %.2f %.1f %d %.0f\n", v[int(NR * 0.5) + 1], v[int(NR * 0.99) + 1],
				v[int(NR * 0.999) + 1], v[NR], over, NR / (t1 > t0 ? t1 - t0 : 1)
		}'
}

# The largest record of pmhash's resource manager since LSN $1 (bytes).
largest_record() {
	gsql -c "SELECT coalesce(max(record_length), 0) FROM pg_get_wal_records_info('$1', pg_current_wal_flush_lsn())
		WHERE resource_manager LIKE '%pmhash%'"
}

# "shards segments buckets size_MB" of index g_k (or of the table alone),
# then its entries per shard (least, median, 99th percentile, most) and
# its largest segment in kB ("-" but for pmhash).
index_shape() {
	case "$1" in
		pmhash)
			gsql -c "SELECT shards, segments, buckets, round(file_bytes / 1048576.0) FROM pmhash_stats('g_k')" | tr '|' ' '
			gsql -c "SELECT min(entries), percentile_disc(0.5) WITHIN GROUP (ORDER BY entries),
				percentile_disc(0.99) WITHIN GROUP (ORDER BY entries), max(entries),
				round(max(segment_bytes) / 1024.0) FROM pmhash_shards('g_k')" | tr '|' ' '
			;;
		none) echo "- - - 0 - - - - -" ;;
		*) echo "- - - $(gsql -c "SELECT round(pg_relation_size('g_k') / 1048576.0)") - - - - -" ;;
	esac
}

# One workload $3 with index $2 on path $1: appends a line to $RESULTS.
run_one() {
	local path=$1 am=$2 mode=$3 start_lsn secs lat wal rec shape rows
	new_table "$am"
	start_lsn=$(gsql -c "SELECT pg_current_wal_insert_lsn()")
	case "$mode" in
		mixed)
			start_single "$path-$am-$mode" 0
			secs=$(load)
			stop_single
			;;
		loader) secs=$(load) ;;
		single)
			start_single "$path-$am-$mode" "$SINGLE_SECONDS"
			wait "$SINGLE_PID"
			secs=$SINGLE_SECONDS
			;;
	esac
	lat="- - - - - -"
	[ "$mode" = loader ] || lat=$(latencies "$WORK/$path-$am-$mode")
	wal=$(gsql -c "SELECT round(pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$start_lsn') / 1048576.0)")
	rec=-
	[ "$am" = pmhash ] && rec=$(largest_record "$start_lsn")
	[ -n "$rec" ] || rec=-
	shape=$(index_shape "$am" | tr '\n' ' ')
	rows=$(gsql -c "SELECT count(*) FROM g")
	echo "$path $am $mode $rows $secs $lat $wal $rec $shape" | tee -a "$RESULTS"
}

trap cleanup EXIT
install_packages
[ -n "${SKIP_BUILD:-}" ] || build_install "" || die "building pmhash failed"
for path in $PATHS; do
	IFS=';' read -r -a extra <<<"${SETTINGS:-}"
	start_cluster "$WORK/cluster" "$path" "max_wal_size = 4GB" "wal_keep_size = 16GB" "${extra[@]}" ||
		die "the $path cluster did not start"
	gsql -c "CREATE EXTENSION pmhash; CREATE EXTENSION pg_walinspect" || die "CREATE EXTENSION failed"
	set -- $INDEXES
	for rep in $(seq 1 "$REPS"); do
		for mode in $MODES; do
			for am in "$@"; do
				run_one "$path" "$am" "$mode"
			done
			set -- "${@:2}" "$1"
		done
	done
	gsql -c "DROP TABLE g"
	stop_cluster
	as_root rm -rf "$WORK/cluster"
done

{
	echo "growth.sh: PostgreSQL $(pg_config --version | awk '{print $2}'), commit $(git rev-parse --short HEAD), $(nproc) CPUs, $(date -u +%F)"
	echo "$ROWS rows by $BATCH per statement${LOADER_RATE:+, at most $LOADER_RATE rows/s}; single-row client alone for $SINGLE_SECONDS s; latencies in ms${SETTINGS:+; settings: $SETTINGS}"
	echo
	echo "$REPS repetitions, indexes in rotated order; each figure the median of the repetitions"
	echo
	echo "| path | index | workload | rows | load or run (s) | p50 | p99 | p99.9 | max | over 10 ms | single-row inserts/s | WAL (MB) | largest pmhash record (B) | shards | segments | buckets | index MB | entries per shard: least | median | p99 | most | largest segment (kB) |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	# the median of each column over the lines of one path, index and workload
	sort -k1,3 "$RESULTS" | awk '
		function flush(   i, j, n, m, a, t, line) {
			if (key == "") return
			line = key
			for (i = 4; i <= nf; i++) {
				n = 0
				for (j = 1; j <= cnt; j++) if (v[j, i] != "-") a[++n] = v[j, i] + 0
				if (n == 0) { line = line " -"; continue }
				for (j = 2; j <= n; j++) { t = a[j]; m = j - 1; while (m > 0 && a[m] > t) { a[m + 1] = a[m]; m-- } a[m + 1] = t }
				line = line " " sprintf("%.10g", (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2)
			}
			print line
		}
		{ k = $1 " " $2 " " $3; if (k != key) { flush(); key = k; cnt = 0 } cnt++; nf = NF; for (i = 4; i <= NF; i++) v[cnt, i] = $i }
		END { flush() }' | sed 's/ / | /g; s/^/| /; s/$/ |/'
} | tee "$OUT/growth.txt"
cp "$RESULTS" "$OUT/growth-rows.txt"
