#!/usr/bin/env bash
# test/suites/progress.sh: pmhash builds report their progress in
# pg_stat_progress_create_index.
#
# A table of PMHASH_PROGRESS_ROWS (default 4M) int8 keys.  For CREATE INDEX,
# CREATE UNIQUE INDEX, REINDEX INDEX and CREATE INDEX CONCURRENTLY of a
# pmhash index on it, a second session samples pg_stat_progress_create_index
# while the build runs (a procedure that commits between samples, so that
# each sees the current state).  Checks, for each build: it succeeded; the
# phases of the samples come in the order PostgreSQL and pmhash run them
# (building index: initializing, scanning table, loading entries, checking
# uniqueness, writing the file; and CONCURRENTLY's own phases around
# them), the scan phase among them, and every phase name is known; within
# a phase, blocks_done and tuples_done never go down and never pass their
# totals (except one thing of PostgreSQL's own: its heap scan reports
# blocks_done = blocks_total while on its first block, then 1; so a drop
# from the total before any tuple was reported passes); the scan's blocks_total is the table's size, and no phase counts
# more tuples than the table has rows.  Usage: progress.sh WORKDIR (with
# the cluster environment set).  Prints "ok N - ..." / "not ok N - ..."
# lines; exits non-zero on failure.
set -u

WORK=${1:?usage: progress.sh WORKDIR}/progress
TESTDIR=$(cd "$(dirname "$0")/.." && pwd)
source "$TESTDIR/lib/common.sh"
source "$TESTDIR/lib/rowcheck.sh"
ROWS=${PMHASH_PROGRESS_ROWS:-4000000}
mkdir -p "$WORK"

sql >"$WORK/setup.out" 2>&1 <<SQL
DROP TABLE IF EXISTS prog, prog_samples;
DROP PROCEDURE IF EXISTS prog_sample(text, float8);
CREATE TABLE prog (k int8) WITH (autovacuum_enabled = off);
INSERT INTO prog SELECT g FROM generate_series(1, $ROWS) g;
VACUUM ANALYZE prog;
CREATE TABLE prog_samples (n serial, build text, phase text, blocks_done int8,
  blocks_total int8, tuples_done int8, tuples_total int8);
-- sample the progress of builds on prog until one was seen and ended, or
-- for max_seconds
CREATE PROCEDURE prog_sample(build text, max_seconds float8) LANGUAGE plpgsql AS \$\$
DECLARE started timestamptz := clock_timestamp(); seen boolean := false; n int;
BEGIN
  LOOP
    INSERT INTO prog_samples (build, phase, blocks_done, blocks_total, tuples_done, tuples_total)
      SELECT build, phase, blocks_done, blocks_total, tuples_done, tuples_total
      FROM pg_stat_progress_create_index WHERE relid = 'prog'::regclass;
    GET DIAGNOSTICS n = ROW_COUNT;
    COMMIT;
    seen := seen OR n > 0;
    EXIT WHEN (seen AND n = 0) OR clock_timestamp() - started > make_interval(secs => max_seconds);
    PERFORM pg_sleep(0.002);
  END LOOP;
END \$\$;
SQL
setup_rc=$?
tap_result $setup_rc "setup: $ROWS rows"
if [ "$setup_rc" != 0 ]; then
	sed 's/^/# /' "$WORK/setup.out"
	exit 1
fi

# Run build $1 (SQL $2) while a second session samples its progress.
watch_build() {
	local name=$1 statement=$2 sampler rc
	sql "CALL prog_sample('$name', 120)" >"$WORK/sampler-$name.out" 2>&1 &
	sampler=$!
	sleep 0.3
	sql "$statement" >"$WORK/build-$name.out" 2>&1
	rc=$?
	tap_result $rc "$name: $statement"
	[ "$rc" = 0 ] || sed 's/^/# /' "$WORK/build-$name.out"
	wait "$sampler"
	tap_result $? "$name: the sampler ran"
}

watch_build create "CREATE INDEX prog_k ON prog USING pmhash (k)"
watch_build reindex "REINDEX INDEX prog_k"
sql "DROP INDEX prog_k" >/dev/null
watch_build unique "CREATE UNIQUE INDEX prog_k ON prog USING pmhash (k)"
sql "DROP INDEX prog_k" >/dev/null
watch_build concurrently "CREATE INDEX CONCURRENTLY prog_k ON prog USING pmhash (k)"

# The rank of each phase in the order of a build.
cat >"$WORK/phases.sql" <<'SQL'
CREATE TEMP TABLE phase_rank (phase text, rank int);
INSERT INTO phase_rank VALUES
  ('initializing', 0), ('waiting for writers before build', 1),
  ('building index: initializing', 2), ('building index: scanning table', 3),
  ('building index: loading entries', 4), ('building index: checking uniqueness', 5),
  ('building index: writing the file', 6), ('waiting for writers before validation', 7),
  ('index validation: scanning index', 8), ('index validation: sorting tuples', 9),
  ('index validation: scanning table', 10), ('waiting for old snapshots', 11),
  ('waiting for readers before marking dead', 12), ('waiting for readers before dropping', 13);
SQL

for build in create reindex unique concurrently; do
	out=$(sql <<SQL 2>&1
$(cat "$WORK/phases.sql")
WITH s AS (
  SELECT p.*, r.rank,
         lag(r.rank) OVER w AS prev_rank, lag(p.phase) OVER w AS prev_phase,
         lag(p.blocks_done) OVER w AS prev_blocks, lag(p.tuples_done) OVER w AS prev_tuples
  FROM prog_samples p LEFT JOIN phase_rank r USING (phase)
  WHERE p.build = '$build'
  WINDOW w AS (ORDER BY p.n))
SELECT count(*),
       count(*) FILTER (WHERE rank IS NULL),
       count(*) FILTER (WHERE rank < prev_rank),
       count(*) FILTER (WHERE phase = prev_phase AND (tuples_done < prev_tuples OR
                            (blocks_done < prev_blocks AND NOT (prev_blocks = blocks_total AND prev_tuples = 0)))),
       count(*) FILTER (WHERE (blocks_total > 0 AND blocks_done > blocks_total)
                           OR (tuples_total > 0 AND tuples_done > tuples_total)),
       count(*) FILTER (WHERE phase = 'building index: scanning table'),
       coalesce(max(blocks_total) FILTER (WHERE phase = 'building index: scanning table'), -1)
         = pg_relation_size('prog') / current_setting('block_size')::int,
       coalesce(max(greatest(tuples_done, tuples_total)), 0) <= $ROWS,
       string_agg(DISTINCT phase, ', ')
FROM s
SQL
)
	IFS='|' read -r samples unknown backwards decreasing overshoot scanning blocks_ok tuples_ok phases <<<"$out"
	echo "# $build: $samples samples; phases: $phases"
	[ "${samples:-0}" -gt 0 ] 2>/dev/null
	tap_result $? "$build: progress was sampled ($samples samples)"
	[ "$unknown" = 0 ] && [ "$backwards" = 0 ]
	tap_result $? "$build: every phase is known and they come in order ($unknown unknown, $backwards backwards)"
	[ "$decreasing" = 0 ] && [ "$overshoot" = 0 ]
	tap_result $? "$build: within a phase the counters never go down nor pass their totals ($decreasing, $overshoot)"
	[ "${scanning:-0}" -gt 0 ] 2>/dev/null && [ "$blocks_ok" = t ] && [ "$tuples_ok" = t ]
	tap_result $? "$build: the table scan was seen ($scanning samples), with the table's blocks as its total and no more tuples than rows"
	[ -n "$out" ] && ! echo "$out" | grep -q ERROR || echo "$out" | sed 's/^/# /'
done

if [ "$TAP_FAILED" = 0 ]; then
	sql "DROP TABLE prog, prog_samples; DROP PROCEDURE prog_sample(text, float8)" >/dev/null
fi
echo "# $TAP_N checks, $TAP_FAILED failed"
[ "$TAP_FAILED" = 0 ]
