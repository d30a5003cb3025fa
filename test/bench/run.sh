#!/usr/bin/env bash
# test/bench/run.sh: pmhash against PostgreSQL's hash and btree indexes, side
# by side, in one cluster and one run.
#
# Installs what it needs (common.sh's packages and python3-matplotlib), builds
# and installs pmhash and the helper extension of test/bench/am/, starts a
# throwaway cluster with its pmhash files on /dev/shm (PMEM_IS_PMEM_FORCE=1;
# BENCH_PATH=msync puts them on the ordinary disk instead), and measures, for each AM in turn:
#   SQL level, for each data set (1M and 10M random int8 keys, 1M md5 text
#     keys): build time, size, nested-loop probes of present and of absent
#     keys, "k = ANY(array)" with a constant and with a parameter array, and
#     inserts into the indexed table (time and WAL per row); with no index,
#     the rows of the constant arrays fetched by their TIDs (set "tid"), the
#     least execution any index's "k = ANY" could have;
#   AM level: equality probes through the index AM API (pmhash_bench_probe);
#   pgbench select-only and TPC-B-like runs on a copy of the pgbench tables
#     per AM with pgbench_accounts.aid indexed by the AM (select-only also
#     timed in the server: the mean by pg_stat_statements, the median by
#     test/bench/am/bench_exec_time.c), at each scale,
#     client count and shared_buffers setting (the cluster restarted with
#     each; PostgreSQL's default 128MB is smaller than both scales' tables,
#     2GB holds them).  A 1-client run has pgbench and its backend share one
#     CPU (see pgbench_one).  Select-only, with either protocol, also runs on
#     a copy with no index, each row fetched by its TID, and on a copy indexed
#     by tidcalc (test/bench/am), an index that computes the TID from the key:
#     what no index can beat, and what any index scan adds to the fetch.
#     TPC-B-like also runs on a second copy indexed by hash (set "hash2"):
#     how far apart two identical setups land, the noise of its cells.
# Timed SQL- and AM-level measurements are repeated REPS times, the AM order
# rotated each time, and the best is kept; likewise pgbench, PGBENCH_REPS
# times, the AMs' runs of each mode and client count one after another (for
# TPC-B-like, whose runs wait on WAL flushes, the median is kept).
# Then it stops the cluster, runs test/bench/core/run.sh if present (unless
# SKIP_CORE is set), whose test/bench/out/core.csv joins the table (a
# core.csv of an earlier run is removed at the start), and writes
# test/bench/out/: results.md, results.csv, bench.png, scale.png (the scale
# curve, when DATASETS has two or more int8 sets), raw.csv (every
# measurement), meta.txt, run.log, server.log and the pgbench logs.  Floors
# that fail are reported, not turned into an exit status; errors exit non-zero.
#
#   bash test/bench/run.sh            full run (about 60 minutes on 2 cores,
#                                     3 more for the core benchmark)
#   QUICK=1 bash test/bench/run.sh    smoke test: 1M keys, scale 20, short runs
#   DATASETS="i1m i10m i100m" REPS=1 PGBENCH_SCALES=" " SKIP_CORE=1 \
#     bash test/bench/run.sh         the scale curve to 100M rows (25 minutes
#                                     here; about 25 GB of disk and 2 GB of
#                                     /dev/shm)
#
# Settings (environment; QUICK=1 changes the defaults shown in brackets):
#   DATASETS         data sets, <i|t><rows>: i = int8, t = md5 text
#                    ("i1m i10m t1m" [i1m t1m])
#   REPS             repetitions of each timed SQL/AM measurement (3 [1])
#   PROBES           keys per probe table (200000 [20000])
#   INSERT_ROWS      rows inserted in the insert test (200000 [20000])
#   GROW_DATASETS    data sets whose table is also doubled by one insert
#                    ("i1m t1m"; only those of DATASETS count)
#   ANY_KEYS         array sizes of the "k = ANY(array)" test ("1000 10000")
#   AM_LOOPS         passes over the probe keys per AM-level timing (5 [2])
#   PGBENCH_SCALES   pgbench scales ("20 100" [20])
#   PGBENCH_CLIENTS  client counts ("1 2")
#   PGBENCH_SHARED_BUFFERS  shared_buffers of the pgbench runs ("128MB 2GB")
#   PGBENCH_SECONDS  duration of each pgbench run (10 [5])
#   PGBENCH_REPS     repetitions of each pgbench run (3 [1])
#   PGBENCH_MODES    pgbench modes ("select prepared tpcb": select-only,
#                    the same with prepared statements, TPC-B-like)
#   PGBENCH_OPTS     extra pgbench options for every run (none); a -M or
#                    --protocol there also skips the index-free bound of
#                    select-only (tidcalc still runs)
#   SHARED_BUFFERS   shared_buffers of the SQL- and AM-level part (2GB)
#   BENCH_PATH       pmem (files on /dev/shm, PMEM_IS_PMEM_FORCE=1) or msync
#                    (files in the data directory on the ordinary disk) (pmem)
#   EXTRA_SETTINGS   postgresql.conf lines for the cluster, separated by ';'
#                    (none), e.g. "pmhash.sync_interval = 10s"
#   SKIP_CORE        set to skip test/bench/core/run.sh
#   PG_MAJOR         the PostgreSQL major version (15): Debian's packages of
#                    it if installed (15 on Debian 12, 17 on Debian 13), else
#                    a wheel of test/lib/pgversions.sh (16, 18)
set -u
source "$(dirname "$0")/../lib/common.sh"
cd "$REPO"

BENCH=$REPO/test/bench
PYTHON=/usr/bin/python3  # Debian's, where python3-matplotlib installs
SQL=$BENCH/sql
OUT=$BENCH/out
RAW=$OUT/raw.csv
META=$OUT/meta.txt
# the text every select-only statement starts with, pgbench's and the bound's
SELECT_ONLY_PREFIX="SELECT abalance FROM pgbench_accounts WHERE"
AMS="pmhash hash btree"
if [ -n "${QUICK:-}" ]; then
	DATASETS=${DATASETS:-"i1m t1m"}
	REPS=${REPS:-1}
	PROBES=${PROBES:-20000}
	INSERT_ROWS=${INSERT_ROWS:-20000}
	AM_LOOPS=${AM_LOOPS:-2}
	PGBENCH_SCALES=${PGBENCH_SCALES:-20}
	PGBENCH_SECONDS=${PGBENCH_SECONDS:-5}
	PGBENCH_REPS=${PGBENCH_REPS:-1}
fi
DATASETS=${DATASETS:-"i1m i10m t1m"}
REPS=${REPS:-3}
PROBES=${PROBES:-200000}
ANY_KEYS=${ANY_KEYS:-"1000 10000"}
INSERT_ROWS=${INSERT_ROWS:-200000}
GROW_DATASETS=${GROW_DATASETS-"i1m t1m"}
AM_LOOPS=${AM_LOOPS:-5}
PGBENCH_SCALES=${PGBENCH_SCALES:-"20 100"}
PGBENCH_CLIENTS=${PGBENCH_CLIENTS:-"1 2"}
PGBENCH_SHARED_BUFFERS=${PGBENCH_SHARED_BUFFERS:-"128MB 2GB"}
PGBENCH_SECONDS=${PGBENCH_SECONDS:-10}
PGBENCH_REPS=${PGBENCH_REPS:-3}
PGBENCH_MODES=${PGBENCH_MODES:-"select prepared tpcb"}
PGBENCH_OPTS=${PGBENCH_OPTS:-}
BENCH_PATH=${BENCH_PATH:-pmem}
PG_MAJOR=${PG_MAJOR:-15}
EXTRA_SETTINGS=${EXTRA_SETTINGS:-}
case $BENCH_PATH in
	pmem | msync) ;;
	*) echo "BENCH_PATH must be pmem or msync, not '$BENCH_PATH'" >&2; exit 2 ;;
esac
SHARED_BUFFERS=${SHARED_BUFFERS:-2GB}
WORK=""
REP=0
TID_VARS=""

SERVER_LOG=$OUT/server.log
source "$BENCH/lib.sh"

# Run SQL file $4 with extra psql arguments $5...; record its "RESULT metric
# value" lines as section $1, data set $2, AM $3, repetition $REP, and show
# them and its "INFO ..." lines.
measure() {
	local section=$1 ds=$2 am=$3 file=$4 out tag metric value shown=""
	shift 4
	out=$(bpsql -v ds="$ds" -v am="$am" "$@" -f "$SQL/$file") ||
		die "$file failed (section $section, data set $ds, AM $am, repetition $REP)"
	while read -r tag metric value; do
		case $tag in
			RESULT)
				echo "$section,$ds,$am,$metric,$REP,$value" >>"$RAW"
				shown="$shown $metric=$(printf '%.4g' "$value")"
				;;
			INFO) echo "   $metric $value" ;;
		esac
	done <<<"$out"
	[ -n "$shown" ] && printf '   %-6s %-6s %-7s rep %s:%s\n' "$section" "$ds" "$am" "$REP" "$shown"
	return 0
}

# The index AM of pgbench set $1: the AM itself, hash for the control copy.
index_am_of() {
	case $1 in
		hash2) echo hash ;;
		*) echo "$1" ;;
	esac
}

# The words of $2 rotated left by ($1 - 1): the AM order of repetition $1.
rotation() {
	local -a words
	read -r -a words <<<"$2"
	local r=$((($1 - 1) % ${#words[@]}))
	echo "${words[*]:r} ${words[*]:0:r}"
}

# Set N, KEYTYPE, KEYEXPR and ABSENTEXPR for data set $1 (<i|t><rows>, rows
# like 100k, 1m, 10m).
dataset_params() {
	local size=${1:1} mult=1
	case $size in
		*k) mult=1000 ;;
		*m) mult=1000000 ;;
	esac
	N=$((${size%[km]} * mult))
	case $1 in
		i*)
			KEYTYPE=int8
			KEYEXPR="((random() - 0.5) * 1.8e19)::int8"
			ABSENTEXPR=$KEYEXPR
			;;
		t*)
			KEYTYPE=text
			KEYEXPR="md5(random()::text)"
			ABSENTEXPR="md5('absent' || random()::text)"
			;;
		*) die "unknown data set $1" ;;
	esac
}

# Whether data set $1 is one of GROW_DATASETS.
grows() {
	case " $GROW_DATASETS " in
		*" $1 "*) return 0 ;;
		*) return 1 ;;
	esac
}

# One repetition of the SQL-level measurements of AM $2 on data set $1: build,
# probes, inserts (INSERT_ROWS, then, for GROW_DATASETS, as many rows as the
# table holds, each into a fresh index); AM "none" times the inserts into
# the table without index.
sql_level_one() {
	local ds=$1 am=$2 idx=bidx_$1 verify=off checkpoint=off keys
	if [ "$am" = none ]; then
		idx=none
		checkpoint=on
		for keys in $ANY_KEYS; do
			measure sql "$ds" tid any_tid.sql -v kkeys="$keys" -v keytype="$KEYTYPE"
		done
	else
		measure sql "$ds" "$am" build.sql -v idx="$idx"
		measure sql "$ds" "$am" probe.sql -v idx="$idx"
		for keys in $ANY_KEYS; do
			measure sql "$ds" "$am" any.sql -v idx="$idx" -v kkeys="$keys" -v keytype="$KEYTYPE"
		done
	fi
	if [ "$am" = pmhash ] && [ "$REP" = 1 ]; then
		verify=on
	fi
	measure sql "$ds" "$am" insert.sql -v idx="$idx" -v n="$N" -v m="$INSERT_ROWS" \
		-v src="ins_$ds" -v metric=insert -v verify="$verify" -v checkpoint="$checkpoint"
	if grows "$ds"; then
		[ "$am" = none ] || bpsql -c "CREATE INDEX $idx ON t_$ds USING $am (k)" ||
			die "CREATE INDEX failed"
		measure sql "$ds" "$am" insert.sql -v idx="$idx" -v n="$N" -v m="$N" \
			-v src="grow_$ds" -v metric=grow -v verify="$verify" -v checkpoint=on
	fi
}

# All measurements of data set $1: load it, SQL level REPS times over the
# AMs (and the index-less insert), AM level REPS times, then drop it.
run_dataset() {
	local ds=$1 start=$SECONDS am grow
	dataset_params "$ds"
	record_load "$ds"
	echo "== data set $ds: loading"
	REP=0
	grow=off
	grows "$ds" && grow=on
	measure sql "$ds" - dataset.sql -v n="$N" -v m="$INSERT_ROWS" -v p="$PROBES" -v grow="$grow" \
		-v keytype="$KEYTYPE" -v keyexpr="$KEYEXPR" -v absentexpr="$ABSENTEXPR"
	echo "== data set $ds: SQL level"
	for REP in $(seq 1 "$REPS"); do
		for am in $(rotation "$REP" "$AMS none"); do
			sql_level_one "$ds" "$am"
		done
	done
	echo "== data set $ds: AM level"
	for am in $AMS; do
		bpsql -c "CREATE INDEX amidx_${am}_$ds ON t_$ds USING $am (k)" || die "CREATE INDEX failed"
	done
	for REP in $(seq 1 "$REPS"); do
		for am in $(rotation "$REP" "$AMS"); do
			measure am "$ds" "$am" am.sql -v idx="amidx_${am}_$ds" -v loops="$AM_LOOPS"
		done
	done
	bpsql -c "DROP TABLE IF EXISTS grow_$ds; DROP TABLE t_$ds, ins_$ds, pp_$ds, pa_$ds, expect_$ds" || die "DROP TABLE failed"
	echo "== data set $ds done in $((SECONDS - start)) s"
}

# Run command $2... with the pgbench tables of AM $1 (schema pgb_<AM>) first
# on the search path of every connection it opens.
in_set() {
	local am=$1
	shift
	PGOPTIONS="-c search_path=pgb_$am,public" "$@"
}

# Create the pgbench tables of set $1 at scale $2 in schema pgb_<set>:
# pgbench -i, the primary key of pgbench_accounts dropped, and the aid index
# of the set's AM (index_am_of), or none for the pseudo-AM "tid" (whose
# rows are checked to sit where the pgb_select_by_tid*.sql scripts will look
# for them; sets TID_VARS).
create_pgbench_set() {
	local am=$1 scale=$2 per_page
	bpsql -c "SET client_min_messages = warning; DROP SCHEMA IF EXISTS pgb_$am CASCADE; CREATE SCHEMA pgb_$am" ||
		die "CREATE SCHEMA failed"
	in_set "$am" "$PG_BIN/pgbench" -i -q -s "$scale" bench >"$OUT/pgbench-init-scale$scale-$am.log" 2>&1 ||
		{ cat "$OUT/pgbench-init-scale$scale-$am.log"; die "pgbench -i failed"; }
	in_set "$am" bpsql -f "$SQL/pgb_prepare.sql" || die "pgb_prepare.sql failed"
	if [ "$am" = tid ]; then
		per_page=$(in_set "$am" bpsql -f "$SQL/pgb_tid_layout.sql") || die "pgb_tid_layout.sql failed"
		TID_VARS="-D per_page=$per_page -D accounts=$((100000 * scale))"
	else
		in_set "$am" measure pgbench "scale$scale" "$am" pgb_index.sql -v index_am="$(index_am_of "$am")"
	fi
}

# One pgbench run of data set $1 on the tables of AM $2: mode $3 (select;
# prepared, i.e. select-only with prepared statements; or tpcb), $4 clients;
# records its tps as metric <mode>_c<clients>; for select-only, the
# statement's execution time in the server (no parsing, planning or client
# round trip; on "tid", the fetch by TID with no index), reset before the
# run, in microseconds: its mean (pg_stat_statements) as
# <mode>_exec_c<clients> and its median (the histogram of
# test/bench/am/bench_exec_time.c, which counts the same executions) as
# <mode>_median_c<clients>; and for TPC-B-like the WAL bytes per
# transaction as tpcb_wal_c<clients>.  With one client, pgbench
# and its backend (forked by the postmaster, so pinned with it) run on the
# last CPU: on a virtual machine, waking an idle CPU at each of the
# client-server round trips costs more than the transaction itself (about
# 7000 tps unpinned against 20000-28000 pinned on the 2-core VM), whatever
# the index.
pgbench_one() {
	local ds=$1 am=$2 mode=$3 clients=$4 log tps opt="" pin="" postmaster cpu lsn txns wal exec median
	log=$OUT/pgbench-$ds-$am-$mode-c$clients-rep$REP.log
	case $am/$mode in
		tid/select) opt="-f $SQL/pgb_select_by_tid.sql $TID_VARS" ;;
		tid/prepared) opt="-M prepared -f $SQL/pgb_select_by_tid_prepared.sql $TID_VARS" ;;
		*/select) opt=-S ;;
		*/prepared) opt="-S -M prepared" ;;
	esac
	in_set "$am" bpsql -f "$SQL/pgb_reset.sql" || die "pgb_reset.sql failed"
	cpu=$(($(nproc) - 1))
	if [ "$clients" = 1 ] && [ "$cpu" -gt 0 ]; then
		postmaster=$(head -1 "$PGDATA_DIR/postmaster.pid")
		pin="taskset -c $cpu"
		as_root taskset -p -c "$cpu" "$postmaster" >/dev/null || die "taskset failed"
	fi
	if [ "$mode" = tpcb ]; then
		lsn=$(bpsql -c "SELECT pg_current_wal_insert_lsn()") || die "no WAL position"
	else
		bpsql -c "SELECT pg_stat_statements_reset(), pmhash_bench_exec_time_reset()" >/dev/null ||
			die "resetting the execution times failed"
	fi
	# shellcheck disable=SC2086
	in_set "$am" $pin "$PG_BIN/pgbench" -n $opt -c "$clients" -j "$clients" -T "$PGBENCH_SECONDS" \
		$PGBENCH_OPTS bench >"$log" 2>&1 || { cat "$log"; die "pgbench failed"; }
	if [ -n "$pin" ]; then
		as_root taskset -p -c "0-$cpu" "$postmaster" >/dev/null || die "taskset failed"
	fi
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$log")
	[ -n "$tps" ] || { cat "$log"; die "no tps in pgbench output"; }
	echo "pgbench,$ds,$am,${mode}_c$clients,$REP,$tps" >>"$RAW"
	printf '   pgbench %-16s %-7s rep %s: %s_c%s tps=%s' "$ds" "$am" "$REP" "$mode" "$clients" "$tps"
	if [ "$mode" = tpcb ]; then
		txns=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$log")
		wal=$(bpsql -c "SELECT round(pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$lsn') / $txns)") ||
			die "no WAL volume"
		echo "pgbench,$ds,$am,tpcb_wal_c$clients,$REP,$wal" >>"$RAW"
		printf ' WAL/transaction=%s B' "$wal"
	else
		exec=$(bpsql -c "SELECT round((sum(total_exec_time) / sum(calls) * 1000)::numeric, 3)
			FROM pg_stat_statements
			WHERE query LIKE '$SELECT_ONLY_PREFIX %'") ||
			die "no execution time from pg_stat_statements"
		[ -n "$exec" ] || die "pg_stat_statements has no select-only statement"
		median=$(bpsql -c "SELECT quantile_us[1] FROM pmhash_bench_exec_times('{0.5}')
			WHERE calls = (SELECT sum(calls) FROM pg_stat_statements
				WHERE query LIKE '$SELECT_ONLY_PREFIX %')") ||
			die "no execution-time histogram"
		[ -n "$median" ] || die "the execution-time histogram and pg_stat_statements disagree, or the median is 100 us or more"
		echo "pgbench,$ds,$am,${mode}_exec_c$clients,$REP,$exec" >>"$RAW"
		echo "pgbench,$ds,$am,${mode}_median_c$clients,$REP,$median" >>"$RAW"
		printf ' execution: mean %s us, median %s us' "$exec" "$median"
	fi
	echo
}

# Restart the cluster with shared_buffers $1.
restart_with_buffers() {
	bpsql -c "ALTER SYSTEM SET shared_buffers = '$1'" || die "ALTER SYSTEM failed"
	as_pg pg_ctl -D "$PGDATA_DIR" -l "$WORK/server.log" -m fast -w restart >/dev/null ||
		die "the cluster did not restart (see $WORK/server.log)"
	[ "$(bpsql -c "SHOW shared_buffers")" = "$1" ] || die "shared_buffers is not $1 after the restart"
}

# pgbench at scale $1.  Each AM gets its own copy of the pgbench tables, so
# that runs of the AMs can alternate without rebuilding an index; so do
# the bounds of select-only, the pseudo-AM "tid": no index on aid, each row
# fetched by its TID, with either protocol (unless PGBENCH_OPTS picks one),
# and "tidcalc", the cheapest index (test/bench/am/bench_tidcalc.c: it
# computes the TID from the aid); and the control of TPC-B-like, "hash2", a
# second copy indexed by hash.
# For each shared_buffers setting the cluster restarts; then each repetition
# runs every mode (select-only with the simple protocol, then with prepared
# statements, then TPC-B-like) and client count, with the AMs in an order
# rotated each repetition, one run after another.
run_pgbench() {
	local start=$SECONDS am mode clients buffers ds scale=$1 bound="tid tidcalc" control="" sets
	case " $PGBENCH_OPTS " in
		*" -M"* | *" --protocol"*)
			echo "== no index-free bound of select-only: PGBENCH_OPTS picks the protocol, its scripts need their own"
			bound=tidcalc ;;
	esac
	case " $PGBENCH_MODES " in
		*" tpcb "*) control=hash2 ;;
	esac
	record_load "scale$scale"
	echo "== pgbench scale $scale: initializing a set of tables for each of: $bound $AMS $control"
	for am in $bound $AMS $control; do
		create_pgbench_set "$am" "$scale"
	done
	for buffers in $PGBENCH_SHARED_BUFFERS; do
		restart_with_buffers "$buffers"
		ds=scale$scale-sb$buffers
		for REP in $(seq 1 "$PGBENCH_REPS"); do
			for mode in $PGBENCH_MODES; do
				sets="$bound $AMS"
				[ "$mode" = tpcb ] && sets="$AMS $control"
				for clients in $PGBENCH_CLIENTS; do
					for am in $(rotation "$REP" "$sets"); do
						pgbench_one "$ds" "$am" "$mode" "$clients"
					done
				done
			done
		done
	done
	for am in $bound $AMS $control; do
		bpsql -c "DROP SCHEMA pgb_$am CASCADE" || die "DROP SCHEMA failed"
	done
	echo "== pgbench scale $scale done in $((SECONDS - start)) s"
}

# Build and install the pmhash_bench helper extension of test/bench/am/.
build_bench_extension() {
	echo "== building test/bench/am (pmhash_bench)"
	make -C "$BENCH/am" -s clean
	make -C "$BENCH/am" -s "${PG_MAKE_ARGS[@]}" PG_CFLAGS="-Wall -Wextra -Werror -Wno-unused-parameter" ||
		die "building test/bench/am failed"
	as_root make -C "$BENCH/am" -s "${PG_MAKE_ARGS[@]}" install >/dev/null || die "installing test/bench/am failed"
	make -C "$BENCH/am" -s clean
}

# Use PostgreSQL major version $PG_MAJOR: set PG_BIN and PATH to its
# binaries and PG_MAKE_ARGS to the make arguments that build against it
# (its pg_config; for a wheel, its CFLAGS less the options gcc 12 lacks);
# build and install pmhash there, leaving no objects of that version in the
# tree.
use_version() {
	local pg_config
	PG_MAKE_ARGS=()
	if [ -x "/usr/lib/postgresql/$PG_MAJOR/bin/pg_config" ]; then
		PG_BIN=/usr/lib/postgresql/$PG_MAJOR/bin
		pg_config=$PG_BIN/pg_config
	else
		source "$REPO/test/lib/pgversions.sh"
		pgv_pg_config "$PG_MAJOR" >/dev/null || die "no PostgreSQL $PG_MAJOR"
		pg_config=$PG_CONFIG
		PG_BIN=$PG_BINDIR
		PG_MAKE_ARGS=(CFLAGS="$(pgv_cflags "$pg_config")")
	fi
	PG_MAKE_ARGS+=(PG_CONFIG="$pg_config")
	export PATH="$PG_BIN:$PATH"
	meta postgresql "$("$pg_config" --version)"
	echo "== PostgreSQL: $("$pg_config" --version)"
	build_install "" "${PG_MAKE_ARGS[@]}" || die "building pmhash failed"
	make -C "$REPO" -s clean
}

# Start the benchmark cluster and create the benchmark database.
start_bench_cluster() {
	local -a extra
	WORK=$(mktemp -d /tmp/pmhash-bench-XXXXXX)
	IFS=';' read -r -a extra <<<"$EXTRA_SETTINGS"
	start_cluster "$WORK" "$BENCH_PATH" "${extra[@]}" \
		"shared_buffers = $SHARED_BUFFERS" \
		"max_wal_size = 4GB" \
		"min_wal_size = 1GB" \
		"checkpoint_timeout = 30min" \
		"maintenance_work_mem = 1GB" \
		"jit = off" \
		"log_checkpoints = on" \
		"shared_preload_libraries = 'pmhash, pg_stat_statements, pmhash_bench'" \
		"pmhash_bench.exec_time_prefix = '$SELECT_ONLY_PREFIX'" ||
		die "the cluster did not start (see $WORK/server.log)"
	psql -XAtq -v ON_ERROR_STOP=1 -c "CREATE DATABASE bench" || die "CREATE DATABASE failed"
	bpsql -c "CREATE EXTENSION pg_stat_statements" || die "CREATE EXTENSION pg_stat_statements failed"
	bpsql -f "$SQL/setup.sql" || die "setup.sql failed"
	meta settings "$(psql -XAt -d bench -c "SELECT string_agg(name || '=' || current_setting(name), ' ')
		FROM pg_settings WHERE name IN ('shared_buffers', 'max_wal_size', 'checkpoint_timeout',
		'maintenance_work_mem', 'max_parallel_maintenance_workers', 'jit', 'fsync',
		'synchronous_commit', 'wal_level', 'full_page_writes', 'pmhash.directory', 'pmhash.sync_interval')")"
	meta is_pmem "$(bpsql -c "CREATE TEMP TABLE x (k int); CREATE INDEX ON x USING pmhash (k);
		SELECT is_pmem FROM pmhash_stats('x_k_idx')")"
}

# Run the core benchmark of test/bench/core/, if it exists and SKIP_CORE is unset.
run_core() {
	if [ -n "${SKIP_CORE:-}" ] || [ ! -f "$BENCH/core/run.sh" ]; then
		return 0
	fi
	echo "== core benchmark: bash test/bench/core/run.sh test/bench/out/core.csv"
	bash "$BENCH/core/run.sh" "$OUT/core.csv" || die "test/bench/core/run.sh failed"
}

# The whole benchmark.
main() {
	local start=$SECONDS ds scale
	mkdir -p "$OUT"
	rm -f "$OUT"/pgbench-*.log "$OUT/results.md" "$OUT/results.csv" "$OUT/bench.png" "$OUT/scale.png" "$OUT/core.csv"
	exec > >(tee "$OUT/run.log") 2>&1
	echo "section,dataset,am,metric,rep,value" >"$RAW"
	: >"$META"
	meta started "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	meta commit "$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$REPO" diff --quiet HEAD -- src 2>/dev/null || echo ' (src modified)')"
	meta machine "$(nproc) cores, $(free -g | awk '/^Mem:/ { print $2 }') GB RAM, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
	meta parameters "DATASETS='$DATASETS' REPS=$REPS PROBES=$PROBES ANY_KEYS='$ANY_KEYS' INSERT_ROWS=$INSERT_ROWS GROW_DATASETS='$GROW_DATASETS' AM_LOOPS=$AM_LOOPS PGBENCH_SCALES='$PGBENCH_SCALES' PGBENCH_CLIENTS='$PGBENCH_CLIENTS' PGBENCH_SHARED_BUFFERS='$PGBENCH_SHARED_BUFFERS' PGBENCH_SECONDS=$PGBENCH_SECONDS PGBENCH_REPS=$PGBENCH_REPS PGBENCH_MODES='$PGBENCH_MODES' PGBENCH_OPTS='$PGBENCH_OPTS' BENCH_PATH=$BENCH_PATH EXTRA_SETTINGS='$EXTRA_SETTINGS'"
	if [ "$PG_MAJOR" = 15 ]; then
		PACKAGES="$PACKAGES python3-matplotlib"
	else
		# what building pmhash and the report need, not Debian 12's PostgreSQL 15
		PACKAGES="libpmem-dev make gcc python3 python3-matplotlib"
	fi
	install_packages
	use_version
	build_bench_extension
	trap cleanup EXIT
	record_load start
	start_bench_cluster
	for ds in $DATASETS; do
		run_dataset "$ds"
	done
	for scale in $PGBENCH_SCALES; do
		run_pgbench "$scale"
	done
	record_load end
	cleanup
	run_core
	meta runtime_s $((SECONDS - start))
	"$PYTHON" "$BENCH/report.py" "$OUT" || die "report.py failed"
	"$PYTHON" "$BENCH/plot.py" "$OUT/results.csv" "$OUT/bench.png" "$OUT/scale.png" || die "plot.py failed"
	echo "== total runtime $((SECONDS - start)) s; results in test/bench/out/ (results.md, results.csv, bench.png, scale.png with two or more int8 data sets)"
}

main "$@"
