#!/usr/bin/env bash
# test/suites/concurrency.sh: pmhash under concurrent writers, readers and VACUUM.
#
# Loads ~50k rows (heavy key, NULLs, duplicates) into conc_rows with pmhash
# indexes on k (4 shards) and t (2 shards), then runs for
# PMHASH_CONCURRENCY_SECONDS seconds (default 120) 8 pgbench clients with the
# weighted scripts of test/concurrency/ (insert batches, deletes, updates,
# index and bitmap probes, same-snapshot scan comparisons) while a second
# pgbench with one client runs VACUUM and pmhash_verify every few seconds.
# Afterwards, for every distinct key of each column and some absent ones,
# the rows found by an index scan and by a bitmap scan must equal those of a
# seqscan; pmhash_verify and pmhash_stats must count the non-null keys after
# a final VACUUM; the shards must have grown; and the server log must show no
# error.  Usage: concurrency.sh WORKDIR (with the cluster environment set).
# Prints "ok N - ..." / "not ok N - ..." lines; exits non-zero on failure.
# A hang counts as a failure: pgbench gets 5 minutes beyond its duration,
# every statement 10 minutes.  Durations below 10 s fail the VACUUM check,
# which wants at least two rounds.
set -u

WORK=${1:?usage: concurrency.sh WORKDIR}/concurrency
SCRIPTS=$(cd "$(dirname "$0")/../concurrency" && pwd)
source "$SCRIPTS/../lib/common.sh"
SECONDS_TO_RUN=${PMHASH_CONCURRENCY_SECONDS:-120}
PGBENCH=/usr/lib/postgresql/15/bin/pgbench
LOG=$PGHOST/server.log
GRACE=300
export PGOPTIONS="${PGOPTIONS:-} -c statement_timeout=10min"

mkdir -p "$WORK"


# Run SQL (from $1, or stdin) in psql, unaligned, stopping at the first error.
sql() {
	if [ $# -gt 0 ]; then
		psql -XAtq -v ON_ERROR_STOP=1 -c "$1"
	else
		psql -XAtq -v ON_ERROR_STOP=1
	fi
}

# Buckets and shards of index $1, as "buckets shards".
index_size() {
	sql "SELECT buckets || ' ' || shards FROM pmhash_stats('$1')"
}

# Size of the server log in bytes (0 if it does not exist yet).
log_size() {
	stat -c %s "$LOG" 2>/dev/null || echo 0
}

# Print pgbench's summary of log file $1 as comments, one line per script.
report_pgbench() {
	awk -v name="$(basename "$1" .log)" '
		/^(number of (clients|transactions|failed)|latency average|tps)/ { print "# " name ": " $0 }
		/^SQL script/ { script = $NF; sub(".*/", "", script) }
		/^ - [0-9]+ transactions/ { sub("^ - ", ""); print "# " name ": " script ": " $0 }' "$1"
}

# The SET commands that force scan type $1 (index, bitmap, seq).
force_scan() {
	case $1 in
		index) echo "SET enable_seqscan = off; SET enable_bitmapscan = off; SET enable_indexscan = on;" ;;
		bitmap) echo "SET enable_seqscan = off; SET enable_bitmapscan = on; SET enable_indexscan = off;" ;;
		seq) echo "SET enable_seqscan = on; SET enable_bitmapscan = off; SET enable_indexscan = off;" ;;
	esac
}

# Query giving, for each value v of temp table probe_$1, the sorted ids of
# rows with $1 = v (one correlated subquery per value, so a scan per value).
ids_per_value() {
	echo "SELECT p.v, (SELECT array_agg(c.id ORDER BY c.id) FROM conc_rows c WHERE c.$1 = p.v) AS ids FROM probe_$1 p"
}

# SQL creating temp table probe_$1 (column v): every distinct non-null value
# of column $1, plus absent values given by expression $2 of g.
probe_table() {
	echo "CREATE TEMP TABLE probe_$1 AS SELECT DISTINCT $1 AS v FROM conc_rows WHERE $1 IS NOT NULL
		UNION SELECT $2 FROM generate_series(200001, 200100) g; ANALYZE probe_$1;"
}

# Check that the per-value query of column $1 (absent values $2) with scan
# type $3 uses plan node $4 and no seqscan of conc_rows.
check_plan() {
	local plan
	plan=$(sql <<-SQL
		$(probe_table "$1" "$2")
		$(force_scan "$3")
		EXPLAIN (COSTS OFF) $(ids_per_value "$1");
		SQL
	)
	echo "$plan" | grep -q "$4" && ! echo "$plan" | grep -q "Seq Scan on conc_rows"
	tap_result $? "$3 scans of column $1 use \"$4\""
}

# Compare index scan, bitmap scan and seqscan for every distinct value of
# column $1 plus absent values given by expression $2 of g.
compare_column() {
	local col=$1 absent=$2 out
	out=$(sql <<-SQL 2>&1
		$(probe_table "$col" "$absent")
		$(force_scan seq)
		CREATE TEMP TABLE by_seq AS
			SELECT $col AS v, array_agg(id ORDER BY id) AS ids FROM conc_rows
			WHERE $col IS NOT NULL GROUP BY $col;
		$(force_scan index)
		CREATE TEMP TABLE by_index AS $(ids_per_value "$col");
		$(force_scan bitmap)
		CREATE TEMP TABLE by_bitmap AS $(ids_per_value "$col");
		RESET ALL;
		ANALYZE by_seq; ANALYZE by_index; ANALYZE by_bitmap;
		CREATE TEMP TABLE differing AS
			SELECT v, i.ids AS by_index, b.ids AS by_bitmap, s.ids AS by_seq
			FROM probe_$col p LEFT JOIN by_seq s USING (v)
				FULL JOIN by_index i USING (v) FULL JOIN by_bitmap b USING (v)
			WHERE i.ids IS DISTINCT FROM s.ids OR b.ids IS DISTINCT FROM s.ids;
		SELECT 'values=' || count(*) FROM probe_$col;
		SELECT 'mismatches=' || count(*) FROM differing;
		SELECT 'differs: ' || v || ' index ' || coalesce(by_index::text, '{}') || ' bitmap ' ||
			coalesce(by_bitmap::text, '{}') || ' seqscan ' || coalesce(by_seq::text, '{}')
		FROM differing LIMIT 5;
		SQL
	)
	echo "$out" | sed -e 's/^/# /' | cut -c1-400
	echo "$out" | grep -qx "mismatches=0"
	tap_result $? "index scan, bitmap scan and seqscan agree for every value of $col ($(echo "$out" | grep -o 'values=[0-9]*'))"
}

# pmhash_verify and the entries of pmhash_stats for index $1 equal the
# number of non-null values of column $2.
check_counts() {
	local out
	out=$(sql "SELECT pmhash_verify('$1') || ' ' || (SELECT entries FROM pmhash_stats('$1')) || ' ' ||
		(SELECT count($2) FROM conc_rows)" 2>&1)
	echo "# $1: verify, stats entries, non-null $2: $out"
	read -r verified entries rows <<<"$out"
	[ "${verified:-x}" = "${rows:-y}" ] && [ "${entries:-x}" = "${rows:-y}" ]
	tap_result $? "pmhash_verify and pmhash_stats of $1 count the non-null values of $2"
}

# VACUUM conc_rows, with index vacuuming forced (by default VACUUM skips it
# when under 2% of the pages have dead items, leaving their entries), until
# it reports no dead row version it could not remove yet (another session's
# snapshot, such as an autovacuum ANALYZE's, holds them back), at most 30
# times.
final_vacuum() {
	local out dead="" try
	for try in $(seq 1 30); do
		out=$(sql "VACUUM (VERBOSE, INDEX_CLEANUP ON) conc_rows" 2>&1) || { echo "$out" | sed 's/^/# /'; return 1; }
		dead=$(echo "$out" | sed -n 's/.* \([0-9]*\) are dead but not yet removable.*/\1/p' | head -1)
		echo "# final VACUUM, try $try: ${dead:-?} dead row versions not yet removable"
		[ "$dead" = 0 ] && return 0
		sleep 1
	done
	return 1
}

# The index $1 grew from "$2" (buckets shards) and kept its shard count.
check_growth() {
	local now
	now=$(index_size "$1")
	echo "# $1: buckets shards before: $2, after: $now"
	[ "${now#* }" = "${2#* }" ] && [ "${now% *}" -gt "${2% *}" ] 2>/dev/null
	tap_result $? "$1 grew during the run (buckets) with its shard count unchanged"
}

# Server log lines since byte $1 that report errors or crashes.
log_errors() {
	tail -c +$(($1 + 1)) "$LOG" | grep -E 'ERROR:|FATAL:|PANIC:|TRAP:|WARNING:|terminated by signal|was terminated'
}

log_start=$(log_size)
[ -r "$LOG" ]
tap_result $? "server log $LOG is readable"

sql <"$SCRIPTS/setup.sql" >"$WORK/setup.out" 2>&1
setup_rc=$?
tap_result $setup_rc "setup: ~50k rows, pmhash indexes with 4 and 2 shards"
if [ "$setup_rc" != 0 ]; then
	sed 's/^/# /' "$WORK/setup.out"
	exit 1
fi
start_k=$(index_size conc_rows_k)
start_t=$(index_size conc_rows_t)
echo "# start: conc_rows_k $start_k, conc_rows_t $start_t (buckets shards)"

echo "# running 8 clients for $SECONDS_TO_RUN s"
timeout "$((SECONDS_TO_RUN + GRACE))" "$PGBENCH" -n -c 1 -j 1 -T "$SECONDS_TO_RUN" -f "$SCRIPTS/maintenance.sql" \
	>"$WORK/maintenance.log" 2>&1 &
maint_pid=$!
timeout "$((SECONDS_TO_RUN + GRACE))" "$PGBENCH" -n -c 8 -j 2 -T "$SECONDS_TO_RUN" \
	-f "$SCRIPTS/insert.sql@3" -f "$SCRIPTS/delete.sql@2" -f "$SCRIPTS/update.sql@2" \
	-f "$SCRIPTS/probe.sql@4" -f "$SCRIPTS/check.sql@1" \
	>"$WORK/workload.log" 2>&1
workload_rc=$?
wait "$maint_pid"
maint_rc=$?
report_pgbench "$WORK/workload.log"
report_pgbench "$WORK/maintenance.log"
[ "$workload_rc" = 0 ] || tail -20 "$WORK/workload.log" | sed 's/^/# /'
tap_result "$workload_rc" "pgbench workload (8 clients, $SECONDS_TO_RUN s) succeeded"
[ "$maint_rc" = 0 ] || tail -20 "$WORK/maintenance.log" | sed 's/^/# /'
vacuums=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$WORK/maintenance.log")
[ "$maint_rc" = 0 ] && [ "${vacuums:-0}" -ge 2 ]
tap_result $? "VACUUM and pmhash_verify ran concurrently (${vacuums:-0} times) without failure"

final_vacuum
tap_result $? "final VACUUM removed every dead row version"
echo "# rows: $(sql "SELECT count(*) || ' rows, ' || count(k) || ' k, ' || count(t) || ' t, ' ||
	count(DISTINCT k) || ' distinct k, ' || count(*) FILTER (WHERE k = 0) || ' heavy k' FROM conc_rows")"

for column in "k:g" "t:conc_t(g)"; do
	col=${column%%:*}
	check_plan "$col" "${column#*:}" index "Index Scan using conc_rows_$col"
	check_plan "$col" "${column#*:}" bitmap "Bitmap Index Scan on conc_rows_$col"
	compare_column "$col" "${column#*:}"
done
check_counts conc_rows_k k
check_counts conc_rows_t t
check_growth conc_rows_k "$start_k"
check_growth conc_rows_t "$start_t"

errors=$(log_errors "$log_start")
[ -z "$errors" ]
tap_result $? "no ERROR, WARNING, FATAL, PANIC, TRAP or crash in the server log"
[ -n "$errors" ] && echo "$errors" | head -30 | sed 's/^/# /'

if [ "$TAP_FAILED" = 0 ]; then
	sql "DROP TABLE conc_rows; DROP FUNCTION conc_new_key(), conc_t(int8), conc_random_id(), conc_check(text, int8)"
fi
echo "# $TAP_N checks, $TAP_FAILED failed"
[ "$TAP_FAILED" = 0 ]
