#!/usr/bin/env bash
# test/bench/serializable.sh: serialization failures of SERIALIZABLE
# transactions that read and write through a pmhash, a hash and a btree
# index, side by side, in one cluster and one run.
#
# Installs what it needs, builds and installs pmhash (unless SKIP_BUILD is
# set), starts a throwaway cluster (pmhash files on /dev/shm with
# PMEM_IS_PMEM_FORCE=1), and measures, for each AM, a table ser_<am>.s
# (k int8, v int) of ROWS rows, keys 1..ROWS, indexed on k by the AM,
# rebuilt before each run.  pgbench runs test/bench/sql/serializable.sql on
# CLIENTS clients for RUN_SECONDS seconds: each transaction counts the rows of
# one random key through the index and inserts a row with another (keys of
# 1..2 * ROWS), so two transactions truly conflict only when one inserts a
# key the other read; the rest of the serialization failures come from
# predicate locks coarser than a key (pmhash: a shard; hash: a bucket page;
# btree: a leaf page).  Reported per AM, medians of REPS runs (order
# rotated): tps and the share of transactions that failed (pgbench's
# failed transactions: serialization failures, no retries).  After each
# run, index scans of every key of 1..2 * ROWS are checked against a
# sequential scan (a mismatch stops the run).  Writes
# test/bench/out/serializable.md, serializable.csv and serializable.log.
#
#   bash test/bench/serializable.sh          about 5 minutes on 2 cores
#
# Settings (environment): ROWS (100000), CLIENTS (2), RUN_SECONDS (20),
# REPS (3), SKIP_BUILD (use the installed pmhash).
set -u
source "$(dirname "$0")/../lib/common.sh"
cd "$REPO"

BENCH=$REPO/test/bench
OUT=$BENCH/out
RAW=$OUT/serializable.csv
MD=$OUT/serializable.md
META=$OUT/serializable-meta.txt
SERVER_LOG=$OUT/serializable-server.log
ROWS=${ROWS:-100000}
CLIENTS=${CLIENTS:-2}
RUN_SECONDS=${RUN_SECONDS:-20}
REPS=${REPS:-3}
AMS="pmhash hash btree"
WORK=""
source "$BENCH/lib.sh"

# Rebuild AM $1's table with keys 1..ROWS, vacuumed and checkpointed.
prepare() {
	bpsql <<-SQL || die "preparing ser_$1.s failed"
		SET client_min_messages = warning;
		CREATE SCHEMA IF NOT EXISTS ser_$1;
		DROP TABLE IF EXISTS ser_$1.s;
		CREATE TABLE ser_$1.s (k int8, v int) WITH (autovacuum_enabled = off);
		INSERT INTO ser_$1.s SELECT g, 0 FROM generate_series(1, $ROWS) g;
		CREATE INDEX ON ser_$1.s USING $1 (k);
		VACUUM ANALYZE ser_$1.s;
		CHECKPOINT;
	SQL
}

# Whether index scans of every key of 1..2 * ROWS find the rows a sequential
# scan finds in AM $1's table.
check() {
	local by_index by_seq
	by_index=$(bpsql -c "SET enable_seqscan = off; SET enable_bitmapscan = off;
		SELECT md5(string_agg(g || ':' || c, ',' ORDER BY g)) FROM generate_series(1, 2 * $ROWS) g,
		LATERAL (SELECT count(*) AS c FROM ser_$1.s WHERE k = g) x WHERE c > 0") || return 1
	by_seq=$(bpsql -c "SET enable_indexscan = off; SET enable_bitmapscan = off;
		SELECT md5(string_agg(k || ':' || c, ',' ORDER BY k))
		FROM (SELECT k, count(*) AS c FROM ser_$1.s GROUP BY k) x") || return 1
	[ -n "$by_index" ] && [ "$by_index" = "$by_seq" ]
}

# One run of AM $1 in repetition $2.
run_one() {
	local am=$1 rep=$2 log=$OUT/serializable-pgbench-$1-rep$2.log tps done failed share
	prepare "$am"
	PGOPTIONS="-c search_path=ser_$am" "$PG_BIN/pgbench" -n -f "$BENCH/sql/serializable.sql" \
		-D size="$ROWS" -c "$CLIENTS" -j "$CLIENTS" -T "$RUN_SECONDS" bench >"$log" 2>&1 ||
		{ cat "$log"; die "pgbench failed"; }
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$log")
	done=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$log")
	failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$log")
	[ -n "$tps" ] && [ -n "$done" ] && [ -n "$failed" ] || { cat "$log"; die "no result in pgbench output"; }
	check "$am" || die "ser_$am.s: index scans disagree with a sequential scan"
	share=$(python3 -c "print($failed / ($done + $failed))")
	echo "$am,$rep,$tps,$done,$failed,$share" >>"$RAW"
	printf '   %-6s rep %s: %8.1f tps, %6d failed of %6d (%.3f%%), index = seqscan\n' \
		"$am" "$rep" "$tps" "$failed" $((done + failed)) "$(python3 -c "print(100 * $share)")"
}

# Write serializable.md from serializable.csv and print it.
report() {
	python3 - "$RAW" "$MD" "$META" <<'PY'
import csv, statistics, sys
raw, md, meta = sys.argv[1:4]
runs = {}
with open(raw, newline="") as f:
    for r in csv.DictReader(f):
        runs.setdefault(r["am"], []).append(r)
med = lambda am, col: statistics.median(float(r[col]) for r in runs[am])
lines = ["# SERIALIZABLE transactions through pmhash, hash and btree (test/bench/serializable.sh)", ""]
with open(meta) as f:
    lines += ["- " + line.rstrip("\n").replace("=", ": ", 1) for line in f if "=" in line]
lines += ["", "| index | tps | failed transactions | failed share | runs |", "|---|---:|---:|---:|---:|"]
for am in ["pmhash", "hash", "btree"]:
    if am in runs:
        lines.append("| %s | %.0f | %.0f | %.3f%% | %d |" % (
            am, med(am, "tps"), med(am, "failed"), 100 * med(am, "failed_share"), len(runs[am])))
lines += ["", "Medians of the runs; failed share = failed / (processed + failed), serialization "
          "failures without retries. Every run: index scans of every key = a sequential scan."]
open(md, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
}

main() {
	mkdir -p "$OUT"
	rm -f "$OUT"/serializable-pgbench-*.log "$MD"
	exec > >(tee "$OUT/serializable.log") 2>&1
	echo "am,rep,tps,processed,failed,failed_share" >"$RAW"
	run_rotated "ROWS=$ROWS CLIENTS=$CLIENTS RUN_SECONDS=$RUN_SECONDS REPS=$REPS" serializable
}

main "$@"
