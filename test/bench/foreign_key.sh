#!/usr/bin/env bash
# test/bench/foreign_key.sh: the referential check of a foreign key whose
# referenced index is a unique pmhash index, against a unique btree index,
# per referencing row, on PostgreSQL 18 (PG_MAJOR; 15-17 refuse such a
# foreign key).
#
# Installs PostgreSQL 18 if missing (test/lib/pgversions.sh), builds and
# installs pmhash there, starts a throwaway cluster with its pmhash files on
# /dev/shm (PMEM_IS_PMEM_FORCE=1), and makes three referenced tables of
# PARENT_ROWS rows with random int8 keys: p_pmhash (unique pmhash index),
# p_btree and p_btree2 (unique btree index; the second a same-run control,
# a copy of the baseline).  Each has a referencing table whose foreign key
# checks every inserted row through that index.  In each of ROUNDS rounds,
# in rotated order, each referencing table is truncated and gets CHILD_ROWS
# rows with random existing keys in one INSERT ... SELECT under EXPLAIN
# (ANALYZE): the time of the foreign key's trigger ("Trigger for constraint
# ...: time=... calls=...") divided by its calls is the check's time per
# row in the server; the insert's own time is reported beside it.  Before
# the timed rounds every table is read into shared buffers and one untimed
# round runs.  Reports the medians per index and the ratios to btree
# (btree2 / btree shows the noise), with the commit, machine and date.
# A wrong result stops the run: every insert must check exactly CHILD_ROWS
# rows, and an insert of a key the parent lacks must fail with 23503.
set -u
cd "$(dirname "$0")/../.."
source test/lib/common.sh
source test/lib/pgversions.sh

PG_MAJOR=${PG_MAJOR:-18}
PARENT_ROWS=${PARENT_ROWS:-1000000}
CHILD_ROWS=${CHILD_ROWS:-200000}
ROUNDS=${ROUNDS:-7}
OUT=test/bench/out/foreign_key-$PG_MAJOR.txt
WORK=$(mktemp -d /tmp/pmhash-bench-fk-XXXXXX)
chmod 755 "$WORK"
INDEXES="pmhash btree btree2"

# Stop with a message.
die() {
	echo "foreign_key.sh: $*" >&2
	stop_cluster
	exit 1
}

[ "$PG_MAJOR" -ge 18 ] || { echo "foreign keys need a unique pmhash index on PostgreSQL 18 or later" >&2; exit 1; }
pgv_copy_tree "$PWD" "$WORK/src" || exit 1
{ pgv_make "$PG_MAJOR" "$WORK/src" && pgv_make "$PG_MAJOR" "$WORK/src" install; } >"$WORK/build.log" 2>&1 ||
	{ tail -20 "$WORK/build.log"; exit 1; }
PG_BIN=$PG_BINDIR
start_cluster "$WORK/cluster" pmem "max_wal_size = 4GB" "checkpoint_timeout = 1h"
trap stop_cluster EXIT

# psql against the cluster, quiet, stopping at the first error.
bpsql() {
	as_pg psql -X -q -v ON_ERROR_STOP=1 -d postgres "$@"
}

bpsql -c "CREATE EXTENSION pmhash" || die "CREATE EXTENSION failed"
for ix in $INDEXES; do
	method=${ix%2}
	bpsql <<EOF || die "setup of $ix failed"
CREATE TABLE p_$ix (id int8 NOT NULL, v int);
INSERT INTO p_$ix SELECT (hashint8(g)::int8 << 20) | g, 0 FROM generate_series(1, $PARENT_ROWS) g;
CREATE UNIQUE INDEX p_${ix}_id ON p_$ix USING $method (id);
CREATE TABLE c_$ix (a int8 REFERENCES p_$ix (id));
VACUUM ANALYZE p_$ix;
EOF
done
bpsql -c "CREATE EXTENSION IF NOT EXISTS pg_prewarm" 2>/dev/null
for ix in $INDEXES; do
	bpsql -c "SELECT pg_prewarm('p_$ix'), pg_prewarm('c_$ix')" >/dev/null 2>&1
	used=$(bpsql -At -c "SELECT conindid::regclass FROM pg_constraint WHERE conrelid = 'c_$ix'::regclass AND contype = 'f'")
	[ "$used" = "p_${ix}_id" ] || die "the foreign key of c_$ix uses $used"
	if bpsql -c "INSERT INTO c_$ix VALUES (-1)" 2>"$WORK/err"; then
		die "c_$ix accepted a key its parent lacks"
	fi
	grep -q 'violates foreign key constraint' "$WORK/err" || die "c_$ix: $(cat "$WORK/err")"
done

# One timed insert into c_$1: prints "check_us_per_row insert_ms".
measure() {
	local ix=$1 plan trig calls total
	bpsql -c "TRUNCATE c_$ix" || die "TRUNCATE c_$ix failed"
	plan=$(bpsql -At -c "EXPLAIN (ANALYZE, COSTS OFF) INSERT INTO c_$ix
		SELECT (hashint8(g)::int8 << 20) | g FROM (SELECT 1 + (random() * ($PARENT_ROWS - 1))::int8 AS g
		FROM generate_series(1, $CHILD_ROWS)) s") || die "insert into c_$ix failed"
	trig=$(echo "$plan" | sed -nE 's/^Trigger for constraint .*: time=([0-9.]+) calls=([0-9]+)$/\1 \2/p')
	total=$(echo "$plan" | sed -nE 's/^Execution Time: ([0-9.]+) ms$/\1/p')
	read -r ms calls <<<"$trig"
	[ "${calls:-0}" = "$CHILD_ROWS" ] || die "c_$ix: the trigger checked ${calls:-no} rows: $plan"
	awk -v ms="$ms" -v n="$calls" -v t="$total" 'BEGIN { printf "%.3f %.1f\n", ms * 1000 / n, t }'
}

for ix in $INDEXES; do measure "$ix" >/dev/null; done
: >"$WORK/results"
set -- $INDEXES
for round in $(seq 1 "$ROUNDS"); do
	for ix in "$@"; do
		echo "$round $ix $(measure "$ix")" >>"$WORK/results"
	done
	set -- "${@:2}" "$1"
done

median() {
	sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
{
	echo "foreign_key.sh: PostgreSQL $("$PG_CONFIG" --version 2>/dev/null | awk '{print $2}'), commit $(git rev-parse --short HEAD), $(nproc) CPUs, $(date -u +%F)"
	echo "$PARENT_ROWS referenced rows, $CHILD_ROWS referencing rows per insert, $ROUNDS rounds (medians)"
	echo "| referenced index | check per row (us) | insert (ms) | check / btree's |"
	echo "|---|---|---|---|"
	base=$(awk '$2 == "btree" {print $3}' "$WORK/results" | median)
	for ix in $INDEXES; do
		check=$(awk -v i="$ix" '$2 == i {print $3}' "$WORK/results" | median)
		insert=$(awk -v i="$ix" '$2 == i {print $4}' "$WORK/results" | median)
		echo "| $ix | $check | $insert | $(awk -v a="$check" -v b="$base" 'BEGIN { printf "%.3f", a / b }') |"
	done
} | tee "$WORK/report"
mkdir -p test/bench/out
cp "$WORK/report" "$OUT"
cp "$WORK/results" "${OUT%.txt}-rounds.txt"
