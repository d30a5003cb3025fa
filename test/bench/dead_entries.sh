#!/usr/bin/env bash
# test/bench/dead_entries.sh: probes and unique inserts of a key with many
# dead versions before VACUUM, through pmhash, hash and btree, side by side
# in one cluster and one run.
#
# Installs what it needs, builds and installs pmhash (unless SKIP_BUILD is
# set), starts a throwaway cluster (pmhash files on /dev/shm with
# PMEM_IS_PMEM_FORCE=1).  For each AM, a table de_<am>.t (id int8, v int,
# pad text) of ROWS rows, with autovacuum off, an index of the AM on id
# (unique for pmhash and btree; hash cannot be) and a btree on v, so that
# updates of v are not HOT: each of DEAD updates of row KEY (in one
# transaction, since a unique check removes the entries of versions that
# earlier transactions left dead) leaves a dead version with an entry under
# id = KEY.  Then, in this
# order, each in a new session, timed by EXPLAIN ANALYZE (execution time):
#   first probe:           SELECT of id = KEY by index scan, which tells the
#                          index the dead versions' rows are dead
#   second probe:          the same again
# and, on the table prepared again:
#   unique insert, before: an update of row KEY in a transaction rolled back
#                          (its index insert walks the key's entries)
#   unique insert, after:  the same again
# Reported per AM, medians of REPS repetitions (order rotated), with the
# index's entries before and after the probes (pmhash_stats for pmhash).  Each
# repetition checks that the probes return the one live row.  Writes
# test/bench/out/dead_entries.md, dead_entries.csv and dead_entries.log.
#
#   bash test/bench/dead_entries.sh          about 2 minutes on 2 cores
#
# Settings (environment): ROWS (100000), DEAD (1000), KEY (4242), REPS (5),
# SKIP_BUILD (use the installed pmhash).
set -u
source "$(dirname "$0")/../lib/common.sh"
cd "$REPO"

BENCH=$REPO/test/bench
OUT=$BENCH/out
RAW=$OUT/dead_entries.csv
MD=$OUT/dead_entries.md
META=$OUT/dead_entries-meta.txt
SERVER_LOG=$OUT/dead_entries-server.log
ROWS=${ROWS:-100000}
DEAD=${DEAD:-1000}
KEY=${KEY:-4242}
REPS=${REPS:-5}
AMS="pmhash hash btree"
WORK=""
source "$BENCH/lib.sh"

# Rebuild AM $1's table and give row KEY DEAD dead versions.
prepare() {
	local unique=UNIQUE
	[ "$1" = hash ] && unique=""
	bpsql <<-SQL || die "preparing de_$1.t failed"
		SET client_min_messages = warning;
		CREATE SCHEMA IF NOT EXISTS de_$1;
		DROP TABLE IF EXISTS de_$1.t;
		CREATE TABLE de_$1.t (id int8, v int, pad text) WITH (autovacuum_enabled = off);
		INSERT INTO de_$1.t SELECT g, 0, repeat('x', 40) FROM generate_series(1, $ROWS) g;
		CREATE $unique INDEX t_id ON de_$1.t USING $1 (id);
		CREATE INDEX t_v ON de_$1.t (v);
		VACUUM ANALYZE de_$1.t;
		CHECKPOINT;
	SQL
	# one transaction: a unique check removes the dead versions of
	# transactions that ended, as btree's does
	bpsql -c "DO \$\$ BEGIN FOR i IN 1..$DEAD LOOP
		UPDATE de_$1.t SET v = v + 1 WHERE id = $KEY; END LOOP; END \$\$" ||
		die "updating de_$1.t failed"
}

# Execution time (ms) of statement $2 on AM $1's table, by EXPLAIN ANALYZE
# in a new session with index scans forced.
timed() {
	bpsql -c "SET search_path = de_$1; SET enable_seqscan = off; SET enable_bitmapscan = off;
		BEGIN; EXPLAIN (ANALYZE, TIMING OFF) $2; ROLLBACK;" |
		sed -n 's/^Execution Time: \([0-9.]*\) ms$/\1/p'
}

# Entries of AM $1's index: pmhash_stats for pmhash, else empty.
entries() {
	[ "$1" = pmhash ] && bpsql -c "SELECT entries FROM pmhash_stats('de_pmhash.t_id')"
}

# One repetition of AM $1 in repetition $2.
run_one() {
	local am=$1 rep=$2 before first second after e0 e1 rows
	prepare "$am"
	e0=$(entries "$am")
	first=$(timed "$am" "SELECT v FROM t WHERE id = $KEY")
	second=$(timed "$am" "SELECT v FROM t WHERE id = $KEY")
	e1=$(entries "$am")
	prepare "$am"
	before=$(timed "$am" "UPDATE t SET v = v + 1 WHERE id = $KEY")
	after=$(timed "$am" "UPDATE t SET v = v + 1 WHERE id = $KEY")
	rows=$(bpsql -c "SET enable_seqscan = off; SET enable_bitmapscan = off;
		SELECT count(*) || ':' || max(v) FROM de_$am.t WHERE id = $KEY")
	[ "$rows" = "1:$DEAD" ] || die "de_$am.t: the index scan of id = $KEY found $rows, not 1:$DEAD"
	[ -n "$before" ] && [ -n "$first" ] && [ -n "$second" ] && [ -n "$after" ] ||
		die "no execution time for $am"
	echo "$am,$rep,$before,$first,$second,$after,$e0,$e1" >>"$RAW"
	printf '   %-6s rep %s: unique insert %8.3f ms, first probe %8.3f, second %8.3f, unique insert %8.3f%s\n' \
		"$am" "$rep" "$before" "$first" "$second" "$after" "${e0:+, entries $e0 -> $e1}"
}

# Write dead_entries.md from dead_entries.csv and print it.
report() {
	python3 - "$RAW" "$MD" "$META" "$DEAD" <<'PY'
import csv, statistics, sys
raw, md, meta, dead = sys.argv[1:5]
runs = {}
with open(raw, newline="") as f:
    for r in csv.DictReader(f):
        runs.setdefault(r["am"], []).append(r)
med = lambda am, col: statistics.median(float(r[col]) for r in runs[am])
lines = ["# A key with %s dead versions before VACUUM (test/bench/dead_entries.sh)" % dead, ""]
with open(meta) as f:
    lines += ["- " + line.rstrip("\n").replace("=", ": ", 1) for line in f if "=" in line]
lines += ["", "| index | unique insert before (ms) | first probe (ms) | second probe (ms) | "
          "first / second | unique insert after (ms) | before / after | runs |",
          "|---|---:|---:|---:|---:|---:|---:|---:|"]
for am in ["pmhash", "hash", "btree"]:
    if am in runs:
        b, f1, f2, a = (med(am, c) for c in ("before_ms", "first_ms", "second_ms", "after_ms"))
        lines.append("| %s | %.3f | %.3f | %.3f | %.1f | %.3f | %.1f | %d |" % (
            am, b, f1, f2, f1 / f2, a, b / a, len(runs[am])))
pm = runs.get("pmhash")
if pm:
    lines += ["", "pmhash entries: %s before the first probe, %s after the second (medians)." % (
        statistics.median(int(r["entries_before"]) for r in pm),
        statistics.median(int(r["entries_after"]) for r in pm))]
lines += ["", "Medians; execution times from EXPLAIN ANALYZE, index scans forced. hash's index "
          "is not unique (hash cannot be): its \"unique insert\" is a plain insert. The updates "
          "run in transactions rolled back."]
open(md, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
}

main() {
	mkdir -p "$OUT"
	rm -f "$MD"
	exec > >(tee "$OUT/dead_entries.log") 2>&1
	echo "am,rep,before_ms,first_ms,second_ms,after_ms,entries_before,entries_after" >"$RAW"
	run_rotated "ROWS=$ROWS DEAD=$DEAD KEY=$KEY REPS=$REPS" dead
}

main "$@"
