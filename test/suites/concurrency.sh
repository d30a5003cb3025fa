#!/usr/bin/env bash
# test/suites/concurrency.sh: pmhash under concurrent writers, readers and VACUUM.
#
# Loads ~50k rows (heavy key, NULLs, duplicates) into conc_rows with pmhash
# indexes on k (4 shards) and t (2 shards), then runs for
# PMHASH_CONCURRENCY_SECONDS seconds (default 120) 8 pgbench clients with the
# weighted scripts of test/concurrency/ (insert batches, deletes, updates,
# index and bitmap probes, same-snapshot scan comparisons of one key and of
# a 150-key "= ANY" array) while a second pgbench with one client runs
# VACUUM and pmhash_verify every few seconds.
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
source "$SCRIPTS/../lib/rowcheck.sh"
SECONDS_TO_RUN=${PMHASH_CONCURRENCY_SECONDS:-120}
PGBENCH=/usr/lib/postgresql/15/bin/pgbench
LOG=$PGHOST/server.log
GRACE=300
export PGOPTIONS="${PGOPTIONS:-} -c statement_timeout=10min"

mkdir -p "$WORK"


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
	sql "DROP TABLE conc_rows; DROP FUNCTION conc_new_key(), conc_t(int8), conc_random_id(), conc_check(text, int8, int)"
fi
echo "# $TAP_N checks, $TAP_FAILED failed"
[ "$TAP_FAILED" = 0 ]
