#!/usr/bin/env bash
# test/suites/unique.sh: unique pmhash indexes under racing writers.
#
# Creates uq_i (int8 keys) and uq_t (text keys), each with a unique pmhash
# index, and races 4 pgbench clients over 100 keys in three runs of
# PMHASH_UNIQUE_SECONDS seconds each (default 20):
#   plain   plain INSERTs (a duplicate's 23505 caught in a function and
#           counted), DELETEs, key-changing UPDATEs and NULL keys;
#   nothing INSERT ... ON CONFLICT DO NOTHING and DELETEs, on the rows the
#           plain run left;
#   update  INSERT ... ON CONFLICT DO UPDATE SET n = n + 1 on the emptied
#           tables, and DELETEs that move the counters of the rows they
#           delete to a ledger, uq_gone: every upsert inserts or increments
#           once;
# each while a fifth client runs VACUUM and pmhash_verify every second.
# After each run, for both tables: pgbench succeeded, no key occurs twice
# among the rows (by a seqscan), an index scan and a bitmap scan find for
# every key (and some absent ones) the rows a seqscan finds, and after a
# VACUUM pmhash_verify and pmhash_stats count the non-null keys; after the
# plain run, duplicates were refused (the race happened); after the update
# run, the counters of each table (in its rows and in the ledger) sum to the
# transactions pgbench reports, each of which upserts once into each table.
# Then the server log must show no error or crash, and the isolation specs
# of test/isolation/specs/ must give their expected output with USING btree
# in place of USING pmhash (the expected outputs are btree's behaviour).
# Usage: unique.sh WORKDIR (with the cluster environment set).  Prints
# "ok N - ..." / "not ok N - ..." lines; exits non-zero on failure.  A hang
# counts as a failure: pgbench gets 5 minutes beyond its duration, every
# statement 10 minutes.
set -u

WORK=${1:?usage: unique.sh WORKDIR}/unique
TESTDIR=$(cd "$(dirname "$0")/.." && pwd)
source "$TESTDIR/lib/common.sh"
source "$TESTDIR/lib/rowcheck.sh"
SECONDS_TO_RUN=${PMHASH_UNIQUE_SECONDS:-20}
PGBENCH=$PG_BIN/pgbench
LOG=$PGHOST/server.log
GRACE=300
KEYS=100
export PGOPTIONS="${PGOPTIONS:-} -c statement_timeout=10min"

rm -rf "$WORK"
mkdir -p "$WORK"
chmod 755 "$WORK"

# Server log lines since byte $1 that report errors or crashes.
log_errors() {
	tail -c +$(($1 + 1)) "$LOG" | grep -E 'ERROR:|FATAL:|PANIC:|TRAP:|WARNING:|terminated by signal|was terminated'
}

# The pgbench scripts, in $WORK.
write_scripts() {
	cat >"$WORK/plain_ins_i.sql" <<-EOF
		\set key random(1, $KEYS)
		SELECT uq_insert_i(:key);
	EOF
	cat >"$WORK/plain_ins_t.sql" <<-EOF
		\set key random(1, $KEYS)
		SELECT uq_insert_t(:key);
	EOF
	cat >"$WORK/plain_upd.sql" <<-EOF
		\set key random(1, $KEYS)
		\set new random(1, $KEYS)
		SELECT uq_update(:key, :new);
	EOF
	cat >"$WORK/plain_null.sql" <<-EOF
		INSERT INTO uq_i (k) VALUES (NULL);
		INSERT INTO uq_t (k) VALUES (NULL);
	EOF
	cat >"$WORK/delete.sql" <<-EOF
		\set key random(1, $KEYS)
		DELETE FROM uq_i WHERE k = :key;
		DELETE FROM uq_t WHERE k = uq_tkey(:key);
	EOF
	cat >"$WORK/nothing.sql" <<-EOF
		\set key random(1, $KEYS)
		INSERT INTO uq_i (k) VALUES (:key) ON CONFLICT DO NOTHING;
		\set key random(1, $KEYS)
		INSERT INTO uq_t (k) VALUES (uq_tkey(:key)) ON CONFLICT (k) DO NOTHING;
	EOF
	# one upsert into each table in every run of the script (pgbench's
	# counts per script are not exact with several threads, its total is),
	# and in a third of them a delete from each
	cat >"$WORK/update.sql" <<-EOF
		\set key random(1, $KEYS)
		INSERT INTO uq_i (k, n) VALUES (:key, 1) ON CONFLICT (k) DO UPDATE SET n = uq_i.n + 1;
		\set key random(1, $KEYS)
		INSERT INTO uq_t (k, n) VALUES (uq_tkey(:key), 1) ON CONFLICT (k) DO UPDATE SET n = uq_t.n + 1;
		\set del random(1, 3)
		\if :del = 1
		\set key random(1, $KEYS)
		WITH d AS (DELETE FROM uq_i WHERE k = :key RETURNING n) INSERT INTO uq_gone SELECT 'uq_i', n FROM d;
		\set key random(1, $KEYS)
		WITH d AS (DELETE FROM uq_t WHERE k = uq_tkey(:key) RETURNING n) INSERT INTO uq_gone SELECT 'uq_t', n FROM d;
		\endif
	EOF
	cat >"$WORK/maintenance.sql" <<-EOF
		VACUUM uq_i;
		VACUUM uq_t;
		SELECT pmhash_verify('uq_i_k'), pmhash_verify('uq_t_k');
		\sleep 1 s
	EOF
}

# Run the workload $1 (a name) with pgbench arguments $2..., and the
# maintenance client beside it; reports both.
run_load() {
	local name=$1 rc maint_pid maint_rc rounds
	shift
	echo "# $name: 4 clients for $SECONDS_TO_RUN s"
	timeout "$((SECONDS_TO_RUN + GRACE))" "$PGBENCH" -n -c 1 -j 1 -T "$SECONDS_TO_RUN" \
		-f "$WORK/maintenance.sql" >"$WORK/$name-maintenance.log" 2>&1 &
	maint_pid=$!
	timeout "$((SECONDS_TO_RUN + GRACE))" "$PGBENCH" -n -c 4 -j 2 -T "$SECONDS_TO_RUN" "$@" \
		>"$WORK/$name.log" 2>&1
	rc=$?
	report_pgbench "$WORK/$name.log"
	[ "$rc" = 0 ] || tail -20 "$WORK/$name.log" | sed 's/^/# /'
	tap_result "$rc" "$name: pgbench (4 clients, $SECONDS_TO_RUN s) succeeded"
	wait "$maint_pid"
	maint_rc=$?
	report_pgbench "$WORK/$name-maintenance.log"
	[ "$maint_rc" = 0 ] || tail -20 "$WORK/$name-maintenance.log" | sed 's/^/# /'
	rounds=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' \
		"$WORK/$name-maintenance.log")
	[ "$maint_rc" = 0 ] && [ "${rounds:-0}" -ge 2 ]
	tap_result $? "$name: VACUUM and pmhash_verify ran concurrently (${rounds:-0} times) without failure"
	return "$rc"
}

# VACUUM table $1 (index vacuuming forced, aggressive so that it waits for
# pages another process has pinned rather than leave their dead rows) until
# it reports no dead row version it could not remove yet, at most 30 times.
vacuum_clean() {
	local out dead="" try
	for try in $(seq 1 30); do
		out=$(sql "VACUUM (VERBOSE, FREEZE, INDEX_CLEANUP ON) $1" 2>&1) || { echo "$out" | sed 's/^/# /'; return 1; }
		dead=$(echo "$out" | sed -n 's/.* \([0-9]*\) are dead but not yet removable.*/\1/p' | head -1)
		[ "$dead" = 0 ] && return 0
		echo "# VACUUM $1, try $try: ${dead:-?} dead row versions not yet removable"
		sleep 1
	done
	return 1
}

# The checks of table $1 (index $1_k) after run $2; $3 is the SQL
# expression of the key numbered g.
check_table() {
	local tab=$1 run=$2 key=$3 idx=$1_k out per_key
	per_key="SELECT g, (SELECT array_agg(id ORDER BY id) FROM $tab WHERE k = $key) AS ids
		FROM generate_series(1, $KEYS + 10) g"

	check_no_repeats "$tab" k "$run: $tab: no key occurs twice among the rows (seqscan)"

	out=$(sql <<-SQL 2>&1
		$(force_scan index)
		CREATE TEMP TABLE by_index AS $per_key;
		$(force_scan bitmap)
		CREATE TEMP TABLE by_bitmap AS $per_key;
		$(force_scan seq)
		CREATE TEMP TABLE by_seq AS $per_key;
		SELECT 'keys with rows: ' || count(ids) FROM by_seq;
		SELECT 'mismatches: ' || count(*) FROM by_seq s JOIN by_index i USING (g) JOIN by_bitmap b USING (g)
		WHERE i.ids IS DISTINCT FROM s.ids OR b.ids IS DISTINCT FROM s.ids;
		SELECT 'differs: key ' || g || ' index ' || coalesce(i.ids::text, '{}') || ' bitmap ' ||
			coalesce(b.ids::text, '{}') || ' seqscan ' || coalesce(s.ids::text, '{}')
		FROM by_seq s JOIN by_index i USING (g) JOIN by_bitmap b USING (g)
		WHERE i.ids IS DISTINCT FROM s.ids OR b.ids IS DISTINCT FROM s.ids LIMIT 5;
	SQL
	)
	echo "$out" | sed "s/^/# $run: $tab: /" | cut -c1-300
	echo "$out" | grep -qx "mismatches: 0"
	tap_result $? "$run: $tab: index scan and bitmap scan find the rows a seqscan finds for every key"

	vacuum_clean "$tab"
	tap_result $? "$run: $tab: VACUUM removed every dead row version"
	out=$(sql "SELECT pmhash_verify('$idx') || ' ' || (SELECT entries FROM pmhash_stats('$idx')) || ' ' ||
		(SELECT count(k) FROM $tab)" 2>&1)
	echo "# $run: $idx: verify, stats entries, non-null keys: $out"
	read -r verified entries rows <<<"$out"
	[ "${verified:-x}" = "${rows:-y}" ] && [ "${entries:-x}" = "${rows:-y}" ]
	tap_result $? "$run: $idx: pmhash_verify passes and it and pmhash_stats count the non-null keys"
}

# Both tables' checks after run $1.
check_tables() {
	check_table uq_i "$1" "g"
	check_table uq_t "$1" "uq_tkey(g)"
}

# Index and bitmap scans of both tables use their pmhash indexes.
check_plans() {
	local tab key scan node plan
	for tab in uq_i:g uq_t:uq_tkey\(g\); do
		key=${tab#*:}
		tab=${tab%%:*}
		for scan in "index:Index Scan using ${tab}_k" "bitmap:Bitmap Index Scan on ${tab}_k"; do
			node=${scan#*:}
			plan=$(sql "$(force_scan "${scan%%:*}")
				EXPLAIN (COSTS OFF) SELECT g, (SELECT array_agg(id) FROM $tab WHERE k = $key)
				FROM generate_series(1, 10) g" 2>&1)
			echo "$plan" | grep -q "$node" && ! echo "$plan" | grep -q "Seq Scan on $tab"
			tap_result $? "${scan%%:*} scans of $tab use \"$node\""
		done
	done
}

# The isolation specs with USING btree give the expected outputs (with
# USING btree in the statements they echo).
check_specs_btree() {
	local dir=$WORK/btree-iso spec names="" rc
	mkdir -p "$dir/specs" "$dir/expected"
	for spec in "$TESTDIR"/isolation/specs/*.spec; do
		head -1 "$spec" | grep -q "^# pmhash only" && continue
		names="$names $(basename "$spec" .spec)"
		sed 's/USING pmhash/USING btree/g' "$spec" >"$dir/specs/$(basename "$spec")"
		sed 's/USING pmhash/USING btree/g' "$TESTDIR/isolation/expected/$(basename "$spec" .spec).out" \
			>"$dir/expected/$(basename "$spec" .spec).out"
	done
	"$PGXS_DIR/src/test/isolation/pg_isolation_regress" --inputdir="$dir" --outputdir="$dir/out" \
		--bindir="$PG_BIN" --dbname=pmhash_unique_btree $names >"$dir/run.log" 2>&1
	rc=$?
	grep -E '^test ' "$dir/run.log" | sed 's/^/# btree: /'
	[ "$rc" = 0 ] || { tail -5 "$dir/run.log"; head -40 "$dir/out/regression.diffs"; } 2>/dev/null | sed 's/^/# /'
	tap_result "$rc" "the isolation specs give their expected output with USING btree:$names"
	sql "DROP DATABASE IF EXISTS pmhash_unique_btree" >/dev/null 2>&1
}

log_start=$(log_size)
[ -r "$LOG" ]
tap_result $? "server log $LOG is readable"

write_scripts
sql >"$WORK/setup.out" 2>&1 <<-'SQL'
	SET client_min_messages = warning;
	CREATE EXTENSION IF NOT EXISTS pmhash;
	DROP TABLE IF EXISTS uq_i, uq_t, uq_gone;
	DROP FUNCTION IF EXISTS uq_tkey(int8), uq_insert_i(int8), uq_insert_t(int8), uq_update(int8, int8);
	DROP SEQUENCE IF EXISTS uq_inserted, uq_duplicates, uq_moved, uq_deadlocks;
	CREATE TABLE uq_i (id int8 GENERATED ALWAYS AS IDENTITY, k int8, n int NOT NULL DEFAULT 1)
		WITH (autovacuum_enabled = false);
	CREATE TABLE uq_t (id int8 GENERATED ALWAYS AS IDENTITY, k text, n int NOT NULL DEFAULT 1)
		WITH (autovacuum_enabled = false);
	-- the counters of rows the update run deleted
	CREATE TABLE uq_gone (tab text, n int) WITH (autovacuum_enabled = false);
	CREATE UNIQUE INDEX uq_i_k ON uq_i USING pmhash (k);
	CREATE UNIQUE INDEX uq_t_k ON uq_t USING pmhash (k);
	-- the text key numbered n, of varying length
	CREATE FUNCTION uq_tkey(n int8) RETURNS text LANGUAGE sql IMMUTABLE STRICT AS $$
		SELECT 'key ' || n || repeat('.', (n % 11)::int)
	$$;
	CREATE SEQUENCE uq_inserted;
	CREATE SEQUENCE uq_duplicates;
	CREATE SEQUENCE uq_moved;
	CREATE SEQUENCE uq_deadlocks;
	-- plain inserts: a duplicate is refused with 23505, counted
	CREATE FUNCTION uq_insert_i(key int8) RETURNS void LANGUAGE plpgsql AS $$
	BEGIN
		INSERT INTO uq_i (k) VALUES (key);
		PERFORM nextval('uq_inserted');
	EXCEPTION WHEN unique_violation THEN
		PERFORM nextval('uq_duplicates');
	END $$;
	CREATE FUNCTION uq_insert_t(key int8) RETURNS void LANGUAGE plpgsql AS $$
	BEGIN
		INSERT INTO uq_t (k) VALUES (uq_tkey(key));
		PERFORM nextval('uq_inserted');
	EXCEPTION WHEN unique_violation THEN
		PERFORM nextval('uq_duplicates');
	END $$;
	-- change a key (a non-HOT update, checked like an insert); two such
	-- updates swapping keys can deadlock, as with btree: counted
	CREATE FUNCTION uq_update(key int8, new int8) RETURNS void LANGUAGE plpgsql AS $$
	BEGIN
		UPDATE uq_i SET k = new WHERE k = key;
		UPDATE uq_t SET k = uq_tkey(new) WHERE k = uq_tkey(key);
		PERFORM nextval('uq_moved');
	EXCEPTION
		WHEN unique_violation THEN PERFORM nextval('uq_duplicates');
		WHEN deadlock_detected THEN PERFORM nextval('uq_deadlocks');
	END $$;
	ANALYZE uq_i;
	ANALYZE uq_t;
SQL
setup_rc=$?
tap_result $setup_rc "setup: tables uq_i (int8) and uq_t (text) with unique pmhash indexes"
if [ "$setup_rc" != 0 ]; then
	sed 's/^/# /' "$WORK/setup.out"
	exit 1
fi
check_plans

# 1. plain inserts, deletes, key updates and NULLs
run_load plain -f "$WORK/plain_ins_i.sql@4" -f "$WORK/plain_ins_t.sql@4" -f "$WORK/delete.sql@3" \
	-f "$WORK/plain_upd.sql@1" -f "$WORK/plain_null.sql@1"
# the number of nextval calls of sequence $1
calls() {
	sql "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM $1"
}
echo "# plain: inserted $(calls uq_inserted), refused as duplicates $(calls uq_duplicates)," \
	"keys updated $(calls uq_moved), deadlocks $(calls uq_deadlocks)"
duplicates=$(calls uq_duplicates)
[ "${duplicates:-0}" -gt 0 ]
tap_result $? "plain: concurrent inserts of existing keys were refused with 23505 (${duplicates:-0} times)"
check_tables plain

# 2. ON CONFLICT DO NOTHING and deletes
run_load nothing -f "$WORK/nothing.sql@3" -f "$WORK/delete.sql@1"
check_tables nothing

# 3. ON CONFLICT DO UPDATE on empty tables, one insert or increment per
# upsert transaction, and deletes that move the counters to uq_gone
sql "TRUNCATE uq_i, uq_t, uq_gone"
tap_result $? "update: tables emptied"
if run_load update -f "$WORK/update.sql"; then
	upserts=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$WORK/update.log")
else
	upserts=""
fi
for tab in uq_i uq_t; do
	out=$(sql "SELECT (SELECT coalesce(sum(n), 0) FROM $tab) + (SELECT coalesce(sum(n), 0) FROM uq_gone
		WHERE tab = '$tab') || ' ' || (SELECT count(*) FROM uq_gone WHERE tab = '$tab')" 2>&1)
	echo "# update: $tab: counters in rows and ledger, rows deleted: $out; pgbench transactions: ${upserts:-?}"
	[ -n "$upserts" ] && [ "${out%% *}" = "$upserts" ] && [ "${out#* }" -gt 0 ] 2>/dev/null
	tap_result $? "update: $tab: the counters sum to the ${upserts:-?} transactions pgbench made"
done
check_tables update

errors=$(log_errors "$log_start")
[ -z "$errors" ]
tap_result $? "no ERROR, WARNING, FATAL, PANIC, TRAP or crash in the server log"
[ -n "$errors" ] && echo "$errors" | head -30 | sed 's/^/# /'

check_specs_btree

if [ "$TAP_FAILED" = 0 ]; then
	sql "DROP TABLE uq_i, uq_t, uq_gone; DROP FUNCTION uq_tkey(int8), uq_insert_i(int8), uq_insert_t(int8), uq_update(int8, int8);
		DROP SEQUENCE uq_inserted, uq_duplicates, uq_moved, uq_deadlocks"
fi
echo "# $TAP_N checks, $TAP_FAILED failed"
[ "$TAP_FAILED" = 0 ]
