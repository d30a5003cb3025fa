#!/usr/bin/env bash
# test/fullfs.sh: a full file system under pmhash.directory, on both paths.
#
# For each persistence path (pmem: PMEM_IS_PMEM_FORCE=1; msync: 0), mounts a
# small tmpfs (needs root, directly or through sudo), starts a throwaway
# cluster whose pmhash.directory is on it, fills the file system with a
# ballast file until little room is left, and inserts into a pmhash-indexed
# table until the index cannot grow.  The failing INSERT must be an ERROR
# with SQLSTATE 53100 naming the index (not a crash: growth reserves space
# with posix_fallocate before the mapping may touch it), the failed rows
# must be absent, and the index must still agree with a seqscan and pass
# pmhash_verify.  CREATE INDEX on the full file system must fail cleanly
# too.  Then the ballast is removed: the same inserts must succeed and the
# index must again agree with a seqscan.  Prints "ok N - ..." lines; exits
# non-zero on failure.  Usage: fullfs.sh WORKDIR.
set -u
WORK=${1:?usage: fullfs.sh WORKDIR}/fullfs
source "$(dirname "$0")/lib/common.sh"
mkdir -p "$WORK"
chmod 755 "$WORK"
TAP_N=0
TAP_FAILED=0

# Run SQL; print its output and errors (verbose, so SQLSTATEs show).
sql() {
	psql -XAtq -v VERBOSITY=verbose -c "\\set VERBOSITY verbose" -c "$1" 2>&1
}

# Free bytes of the file system at $1.
free_bytes() {
	df -B1 --output=avail "$1" | tail -1 | tr -d ' '
}

# Vacuum away the rows of failed inserts, then check that the index agrees
# with a seqscan and passes pmhash_verify; $1 names the step.
check_index() {
	local idx seq ver n
	sql "VACUUM (FREEZE, INDEX_CLEANUP ON) t" >/dev/null
	idx=$(sql "SET enable_seqscan = off; SET enable_bitmapscan = off;
		SELECT count(*), coalesce(sum(id), 0) FROM probe p JOIN t ON t.k = p.k")
	seq=$(sql "SET enable_indexscan = off; SET enable_bitmapscan = off;
		SELECT count(*), coalesce(sum(id), 0) FROM probe p JOIN t ON t.k = p.k")
	tap_result "$([ -n "$idx" ] && [ "$idx" = "$seq" ] && echo 0 || echo 1)" \
		"$MODE: $1: index scans of 2000 keys agree with a seqscan ($idx)"
	ver=$(sql "SELECT pmhash_verify('t_k')")
	n=$(sql "SELECT count(k) FROM t")
	tap_result "$([ "$ver" = "$n" ] && echo 0 || echo 1)" "$MODE: $1: pmhash_verify counts $n entries ($ver)"
}

for MODE in pmem msync; do
	MNT=$WORK/mnt-$MODE
	mkdir -p "$MNT"
	as_root mount -t tmpfs -o size=48m,mode=0700 pmhash-fullfs "$MNT" || {
		tap_result 1 "$MODE: mount a 48 MB tmpfs"
		continue
	}
	as_root chown "$(pg_user)" "$MNT"
	start_cluster "$WORK/$MODE" "$MODE" "pmhash.directory = '$MNT'" "autovacuum = off"
	sql "CREATE EXTENSION pmhash; CREATE TABLE t (id bigint, k bigint);
		CREATE INDEX t_k ON t USING pmhash (k) WITH (shards = 16);
		INSERT INTO t SELECT i, i FROM generate_series(1, 100000) i;
		CREATE TABLE probe AS SELECT (random() * 400000)::bigint AS k FROM generate_series(1, 2000);" >/dev/null
	started=$(sql "SELECT pg_postmaster_start_time()")
	# leave about 2 MB: less than the index needs to grow by the next inserts
	as_pg fallocate -l $(($(free_bytes "$MNT") - 2 * 1024 * 1024)) "$MNT/ballast"
	out=""
	for batch in 1 2 3 4 5 6 7 8 9 10; do
		from=$((100000 * batch + 1))
		out=$(sql "INSERT INTO t SELECT i, i FROM generate_series($from, $((from + 99999))) i")
		[ -n "$out" ] && break
	done
	echo "# $out" | head -3
	tap_result "$(echo "$out" | grep -q 'ERROR:  53100: could not extend the file ".*" of pmhash index "t_k"' && echo 0 || echo 1)" \
		"$MODE: the insert that cannot grow the index fails with 53100 naming t_k"
	tap_result "$([ "$(sql "SELECT count(*) FROM t WHERE id >= $from")" = 0 ] && echo 0 || echo 1)" \
		"$MODE: the failed insert left no row"
	check_index "full file system"
	out=$(sql "CREATE INDEX t_k2 ON t USING pmhash (k)")
	echo "# $out" | head -2
	tap_result "$(echo "$out" | grep -q 'ERROR:  53100' && echo 0 || echo 1)" \
		"$MODE: CREATE INDEX on the full file system fails with 53100"
	as_pg rm -f "$MNT/ballast"
	out=$(sql "INSERT INTO t SELECT i, i FROM generate_series($from, $((from + 99999))) i")
	tap_result "$([ -z "$out" ] && echo 0 || echo 1)" "$MODE: with room again, the same insert succeeds ${out:+($out)}"
	check_index "after freeing space"
	tap_result "$([ "$(sql "SELECT pg_postmaster_start_time()")" = "$started" ] &&
		! grep -qE 'terminated by signal|PANIC|TRAP:' "$WORK/$MODE/server.log" && echo 0 || echo 1)" \
		"$MODE: no crash, no restart"
	stop_cluster
	as_root umount "$MNT"
done
[ "$TAP_FAILED" = 0 ]
