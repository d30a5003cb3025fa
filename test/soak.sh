#!/usr/bin/env bash
# test/soak.sh: pmhash under a long mixed load with maintenance and crashes.
#
# For each persistence path in SOAK_MODES (default "pmem msync"), starts a
# throwaway cluster, loads the concurrency suite's table conc_rows (~50k
# rows, pmhash indexes on k and t, and a unique one on u), and for
# SOAK_SECONDS seconds (default 600) runs 4 pgbench clients inserting,
# deleting, updating, upserting by u and probing, while this script, every
# 2 to 6 seconds, does in turn: VACUUM, REINDEX INDEX CONCURRENTLY (of the
# k and the u index by turns), kill -9 of a random client backend, CREATE INDEX
# CONCURRENTLY and DROP INDEX CONCURRENTLY of a third pmhash index, and
# another kill -9 (a kill makes the server reset every backend and recover;
# pgbench is then started again).  Afterwards it drops the invalid indexes
# that interrupted concurrent builds left, vacuums, and checks that for
# every value of k, t and u (and absent ones) index scan, bitmap scan and
# seqscan give the same rows, that pmhash_verify and pmhash_stats agree and
# count exactly the non-null values, that no value of u occurs twice (by a
# seqscan) and the u index still refuses a duplicate, that the server is up
# and that its log shows no crash other than the kills and no PANIC or
# failed assertion.  Prints
# "ok N - ..." lines and a summary of what ran; exits non-zero on failure.
# Usage: soak.sh WORKDIR.
#
#   bash test/soak.sh /tmp/soak                  10 minutes per path
#   SOAK_SECONDS=60 bash test/soak.sh /tmp/soak  the test command's run
#   SOAK_SETTINGS="maintenance_work_mem = 1MB" bash test/soak.sh /tmp/soak
#                 extra postgresql.conf lines, separated by ';' (here: every
#                 build and REINDEX of the k and t indexes spills its batches
#                 to temporary files, without parallel workers)
# By default (SOAK_SETTINGS unset) the settings are those of PARALLEL_BUILDS:
# every REINDEX and CREATE INDEX CONCURRENTLY scans the table with two
# parallel workers, and the run checks that they were launched.
set -u
WORK=${1:?usage: soak.sh WORKDIR}/soak
SCRIPTS=$(cd "$(dirname "$0")/concurrency" && pwd)
source "$SCRIPTS/../lib/common.sh"
source "$SCRIPTS/../lib/rowcheck.sh"
SOAK_SECONDS=${SOAK_SECONDS:-600}
SOAK_MODES=${SOAK_MODES:-"pmem msync"}
PARALLEL_BUILDS="min_parallel_table_scan_size = 0;max_parallel_maintenance_workers = 2;maintenance_work_mem = 256MB"
IFS=';' read -r -a SOAK_EXTRA <<<"${SOAK_SETTINGS-$PARALLEL_BUILDS}"
PGBENCH=/usr/lib/postgresql/15/bin/pgbench
mkdir -p "$WORK"
chmod 755 "$WORK"

# Wait until the server accepts connections again (after a kill), up to 2 minutes.
wait_ready() {
	local i
	for i in $(seq 1 240); do
		psql -XAtqc "SELECT 1" >/dev/null 2>&1 && return 0
		sleep 0.5
	done
	return 1
}

# Start the workload in the background for $1 seconds; its pid in WORKLOAD_PID.
start_workload() {
	"$PGBENCH" -n -c 4 -j 2 -T "$1" \
		-f "$SCRIPTS/insert.sql@3" -f "$SCRIPTS/delete.sql@2" -f "$SCRIPTS/update.sql@2" \
		-f "$SCRIPTS/probe.sql@4" -f "$SCRIPTS/upsert.sql@3" >>"$WORK/$MODE-workload.log" 2>&1 &
	WORKLOAD_PID=$!
}

# Run build statement $1, with the DEBUG line that counts its parallel workers.
build_sql() {
	PGOPTIONS="$PGOPTIONS -c client_min_messages=debug1" sql "$1"
}

# The next maintenance action of the cycle VACUUM, REINDEX, kill, build,
# kill; counts it in ACTIONS.  REINDEX takes the k and the u index by turns.
maintain() {
	local pid index
	NEXT_ACTION=$(((NEXT_ACTION + 1) % 5))
	case $NEXT_ACTION in
		0) sql "VACUUM conc_rows" >>"$MAINT_LOG" 2>&1 && ACTIONS[vacuum]=$((ACTIONS[vacuum] + 1)) ;;
		1)
			index=conc_rows_k
			[ $((ACTIONS[reindex] % 2)) = 1 ] && index=conc_rows_u
			build_sql "REINDEX INDEX CONCURRENTLY $index" >>"$MAINT_LOG" 2>&1 &&
				ACTIONS[reindex]=$((ACTIONS[reindex] + 1))
			;;
		3) build_sql "CREATE INDEX CONCURRENTLY conc_rows_kt ON conc_rows USING pmhash (k)" >>"$MAINT_LOG" 2>&1 &&
			sql "DROP INDEX CONCURRENTLY conc_rows_kt" >>"$MAINT_LOG" 2>&1 &&
			ACTIONS[build]=$((ACTIONS[build] + 1)) ;;
		*)
			pid=$(sql "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend'
				AND pid <> pg_backend_pid() AND query NOT LIKE '%pg_stat_activity%'
				ORDER BY random() LIMIT 1" 2>/dev/null)
			[ -n "$pid" ] || return
			as_root kill -9 "$pid" 2>/dev/null || return
			ACTIONS[kill]=$((ACTIONS[kill] + 1))
			wait_ready || return
			;;
	esac
}

# pmhash_verify and pmhash_stats of index $1 agree, and count exactly the
# non-null values of column $2 after the final VACUUM: it removed the
# entries the kills left of rows that were lost, also those whose TIDs
# later inserts reused.
check_entries() {
	local out verified entries rows
	out=$(sql "SELECT pmhash_verify('$1') || ' ' || (SELECT entries FROM pmhash_stats('$1')) || ' ' ||
		(SELECT count($2) FROM conc_rows)" 2>&1)
	read -r verified entries rows <<<"$out"
	echo "# $1: verify, stats entries, non-null $2: $out"
	[ "${verified:-x}" = "${entries:-y}" ] && [ "${verified:-x}" = "${rows:-y}" ]
	tap_result $? "$MODE: pmhash_verify and pmhash_stats of $1 agree and count every non-null $2"
}

# No value of u occurs twice among the rows (by a seqscan), the workload
# added values beyond the setup's, and the u index refuses a duplicate with
# 23505.
check_unique() {
	local beyond refused=1 out
	check_no_repeats conc_rows u "$MODE: no value of u occurs twice among the rows (seqscan)"
	beyond=$(sql "SELECT count(*) FROM conc_rows WHERE substr(u, 2)::int > 20000" 2>&1)
	echo "# u: values beyond the setup's: $beyond"
	[ "${beyond:-0}" -gt 0 ] 2>/dev/null
	tap_result $? "$MODE: the upserts added values of u beyond the setup's"
	out=$(sql <<-SQL 2>&1
		\set VERBOSITY verbose
		INSERT INTO conc_rows (u) SELECT u FROM conc_rows WHERE u IS NOT NULL LIMIT 1;
		SQL
	)
	echo "$out" | grep -q '23505: duplicate key value violates unique constraint "conc_rows_u"' && refused=0
	tap_result $refused "$MODE: the u index refuses a duplicate"
	[ $refused = 0 ] || echo "$out" | sed 's/^/# /'
}

# Drop what interrupted concurrent builds and reindexes left: invalid indexes and the third index.
drop_leftovers() {
	local idx
	for idx in $(sql "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = 'conc_rows'::regclass AND (NOT i.indisvalid OR c.relname = 'conc_rows_kt')"); do
		sql "DROP INDEX $idx" >/dev/null
	done
}

for MODE in $SOAK_MODES; do
	start_cluster "$WORK/$MODE" "$MODE" "autovacuum = off" "restart_after_crash = on" "${SOAK_EXTRA[@]}"
	LOG=$WORK/$MODE/server.log
	MAINT_LOG=$WORK/$MODE-maintenance.log
	export PGOPTIONS="-c statement_timeout=10min"
	sql <"$SCRIPTS/setup.sql" >"$WORK/$MODE-setup.out" 2>&1
	tap_result $? "$MODE: setup: ~50k rows, pmhash indexes on k and t"
	sql <"$SCRIPTS/setup_unique.sql" >>"$WORK/$MODE-setup.out" 2>&1
	tap_result $? "$MODE: setup: unique pmhash index on u"
	declare -A ACTIONS=([vacuum]=0 [reindex]=0 [build]=0 [kill]=0)
	NEXT_ACTION=-1
	deadline=$((SECONDS + SOAK_SECONDS))
	runs=0
	while [ "$SECONDS" -lt "$deadline" ]; do
		start_workload $((deadline - SECONDS))
		runs=$((runs + 1))
		while kill -0 "$WORKLOAD_PID" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do
			sleep $((2 + RANDOM % 5))
			[ "$SECONDS" -lt "$deadline" ] && maintain
		done
		wait "$WORKLOAD_PID"
		wait_ready
	done
	echo "# $MODE: $SOAK_SECONDS s, pgbench started $runs times, $(grep -ho 'number of transactions actually processed: [0-9]*' "$WORK/$MODE-workload.log" |
		awk '{s += $NF} END {print s + 0}') transactions completed; VACUUM ${ACTIONS[vacuum]}, REINDEX CONCURRENTLY ${ACTIONS[reindex]}, CREATE/DROP INDEX CONCURRENTLY ${ACTIONS[build]}, kill -9 ${ACTIONS[kill]}"
	parallel=$(grep -cE 'pmhash build of index .*: [1-9][0-9]* of [0-9]+ parallel workers launched' "$MAINT_LOG")
	echo "# $MODE: builds that launched parallel workers: $parallel"
	if [ -z "${SOAK_SETTINGS+set}" ]; then
		[ "$parallel" -gt 0 ]
		tap_result $? "$MODE: REINDEX and CREATE INDEX CONCURRENTLY scanned with parallel workers"
	fi
	wait_ready
	tap_result $? "$MODE: the server accepts connections after the run"
	drop_leftovers
	final_vacuum
	tap_result $? "$MODE: final VACUUM removed every dead row version"
	for column in "k:g" "t:conc_t(g)" "u:'u' || g"; do
		compare_column "${column%%:*}" "${column#*:}"
	done
	check_entries conc_rows_k k
	check_entries conc_rows_t t
	check_entries conc_rows_u u
	check_unique
	bad=$(grep -E 'PANIC:|TRAP:|terminated by signal' "$LOG" | grep -v 'terminated by signal 9: Killed' | head -5)
	[ -z "$bad" ]
	tap_result $? "$MODE: no crash but the kills, no PANIC, no failed assertion in the server log"
	[ -n "$bad" ] && echo "$bad" | sed 's/^/# /'
	stop_cluster
done
echo "# $TAP_N checks, $TAP_FAILED failed"
[ "$TAP_FAILED" = 0 ]
