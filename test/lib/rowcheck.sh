#!/usr/bin/env bash
# test/lib/rowcheck.sh: checks of the rows of test table conc_rows (see
# test/concurrency/setup.sql) through its pmhash indexes, shared by the
# concurrency suite and the soak test: for every value of a column, index
# scan, bitmap scan and seqscan must give the same rows, and pmhash_verify
# and pmhash_stats must count the non-null values; and, for any table (the
# unique suite's too), that no value of a column occurs twice.  Needs common.sh (for
# tap_result) and the cluster environment.

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

# No value of column $2 occurs twice among the rows of table $1 (by a
# seqscan); $3 names the check.
check_no_repeats() {
	local out
	out=$(sql "$(force_scan seq)
		SELECT count(*) || ' values twice or more, ' ||
			coalesce(string_agg($2 || ' x' || c, ', '), 'none') FROM
			(SELECT $2, count(*) AS c FROM $1 WHERE $2 IS NOT NULL GROUP BY $2 HAVING count(*) > 1 LIMIT 5) d" 2>&1)
	echo "# $3: $out"
	[[ "$out" == "0 values twice or more, none" ]]
	tap_result $? "$3"
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
# when under 2% of the pages have dead items, leaving their entries) and
# aggressive (else a page another process has pinned keeps its dead rows
# and their entries), until
# it reports no dead row version it could not remove yet (another session's
# snapshot, such as an autovacuum ANALYZE's, holds them back), at most 30
# times.
final_vacuum() {
	local out dead="" try
	for try in $(seq 1 30); do
		out=$(sql "VACUUM (VERBOSE, FREEZE, INDEX_CLEANUP ON) conc_rows" 2>&1) || { echo "$out" | sed 's/^/# /'; return 1; }
		dead=$(echo "$out" | sed -n 's/.* \([0-9]*\) are dead but not yet removable.*/\1/p' | head -1)
		echo "# final VACUUM, try $try: ${dead:-?} dead row versions not yet removable"
		[ "$dead" = 0 ] && return 0
		sleep 1
	done
	return 1
}

