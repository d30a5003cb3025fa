#!/usr/bin/env bash
# test/demo.sh: the pmhash demo.  Installs what it needs (common.sh's packages
# and python3-matplotlib), builds and installs pmhash (unless SKIP_BUILD is
# set), starts a throwaway cluster (PostgreSQL 15, or PG_MAJOR) with pmhash preloaded (its
# index files on /dev/shm, the persistent-memory code path) and loads a demo
# table of ROWS rows.  Then, for pmhash, hash and btree in turn, with only
# that index on the table: it times the build, measures the index's size,
# times up to 100000 probes of random keys (one index scan each) and times
# the insert of ROWS/10 more rows in one statement (commit included; the rows
# are deleted again and the table vacuumed before the next index).  It shows
# the planner choosing among the three indexes and pmhash_stats, and ends
# with the four measures side by side, each ratio spelled out, written also
# to /tmp/pmhash-demo/results.csv and drawn by test/demo_plot.py into a PNG,
# four panels of bars.  The demo cluster keeps running until
# `bash test/demo.sh stop`, which also removes /tmp/pmhash-demo.
#
#   bash test/demo.sh [ROWS]    run the demo (default 1000000 rows)
#   bash test/demo.sh stop      stop the demo cluster and remove it
#   PG_MAJOR=18 bash test/demo.sh   on another PostgreSQL major version
#
# Settings (environment):
#   PLOT         where to write the PNG (/tmp/pmhash-demo/demo.png)
#   SKIP_BUILD   set to use the installed pmhash instead of building and
#                installing the working tree's
#   PG_MAJOR     the PostgreSQL major version (default 15): Debian's
#                /usr/lib/postgresql/N when it is there (postgresql-17 on
#                Debian 13, say: install it and postgresql-server-dev-17
#                first), else, for 16 and 18, the PyPI wheels of
#                test/lib/pgversions.sh (installed if missing)
set -u
DEMO=/tmp/pmhash-demo
PLOT=$(realpath -m "${PLOT:-$DEMO/demo.png}")
cd "$(dirname "$0")/.."
source test/lib/common.sh

PYTHON=/usr/bin/python3  # Debian's, where python3-matplotlib installs
CSV=$DEMO/results.csv
ROWS=${1:-1000000}

# Stop and remove a previous demo cluster, if any.
stop_demo() {
	if [ -f "$DEMO/env" ]; then
		source "$DEMO/env"
		stop_cluster
	fi
	as_root rm -rf "$DEMO"
}

if [ "${1:-}" = stop ]; then
	stop_demo
	echo "demo cluster stopped and removed"
	exit 0
fi

# Use PostgreSQL major version $PG_MAJOR (not 15): Debian's packages if
# installed, else a wheel of pgversions.sh; builds and installs pmhash there
# unless SKIP_BUILD is set.
use_other_version() {
	if [ -x "/usr/lib/postgresql/$PG_MAJOR/bin/pg_config" ]; then
		PG_BIN=/usr/lib/postgresql/$PG_MAJOR/bin
		[ -n "${SKIP_BUILD:-}" ] ||
			{ make -s clean && make -s PG_CONFIG="$PG_BIN/pg_config" PG_CFLAGS="-Wall -Wextra -Werror" &&
				as_root make -s PG_CONFIG="$PG_BIN/pg_config" install >/dev/null; }
		return
	fi
	source test/lib/pgversions.sh
	pgv_pg_config "$PG_MAJOR" >/dev/null
	PG_BIN=$PG_BINDIR
	if [ -z "${SKIP_BUILD:-}" ]; then
		pgv_copy_tree "$PWD" "$DEMO-build" && pgv_make "$PG_MAJOR" "$DEMO-build" &&
			pgv_make "$PG_MAJOR" "$DEMO-build" install >/dev/null
		as_root rm -rf "$DEMO-build"
	fi
}

set -e
INSERTS=$((ROWS / 10 > 0 ? ROWS / 10 : 1))
PG_MAJOR=${PG_MAJOR:-15}
if [ "$PG_MAJOR" = 15 ]; then
	PACKAGES="$PACKAGES python3-matplotlib"
else
	# the packages of pmhash's build and of the demo, not Debian 12's PostgreSQL 15
	PACKAGES="libpmem-dev make gcc python3 python3-matplotlib"
fi
install_packages
stop_demo
if [ "$PG_MAJOR" != 15 ]; then
	echo "== PostgreSQL $PG_MAJOR"
	use_other_version
elif [ -z "${SKIP_BUILD:-}" ]; then
	build_install ""
fi
[ -z "${SKIP_BUILD:-}" ] || echo "== using the installed pmhash (SKIP_BUILD)"
export PATH="$PG_BIN:$PATH"
start_cluster "$DEMO" pmem
save_cluster_env "$DEMO/env"
echo "export PG_BIN=$PG_BIN PATH=$PG_BIN:\$PATH" >>"$DEMO/env"

psql -X -q -v ON_ERROR_STOP=1 -v rows="$ROWS" -v inserts="$INSERTS" <<'SQL'
CREATE EXTENSION pmhash;
\echo == loading :rows rows into demo(id, k int8 random, payload)
SELECT setseed(0.42) \gset
CREATE TABLE demo (id bigint, k bigint, payload text);
INSERT INTO demo SELECT i, (random() * 4e18)::bigint, 'row ' || i FROM generate_series(1, :rows) i;
CREATE TABLE probes AS SELECT k FROM demo ORDER BY random() LIMIT 100000;
CREATE TABLE extra AS SELECT :rows + i AS id, (random() * 4e18)::bigint AS k, 'row ' || :rows + i AS payload
  FROM generate_series(1, :inserts) i;
VACUUM ANALYZE demo;
VACUUM ANALYZE probes;
VACUUM ANALYZE extra;

-- With only an index of the given method on demo: time its build, the random
-- probes and the insert of the rows of extra (build and insert timed with
-- their commits), check that the probes and the inserted keys are found,
-- then drop the index and delete the inserted rows.
CREATE TABLE results ("index" text, build_ms numeric, size_bytes bigint, probe_us numeric, insert_us numeric);
CREATE PROCEDURE demo_run(method text) LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; build_ms numeric; probe_ms numeric; insert_ms numeric; n bigint; size bigint;
        nprobes bigint := (SELECT count(*) FROM probes);
        nextra bigint := (SELECT count(*) FROM extra);
BEGIN
  t0 := clock_timestamp();
  EXECUTE format('CREATE INDEX demo_k ON demo USING %s (k)', method);
  COMMIT;
  build_ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
  size := pg_relation_size('demo_k');
  IF method = 'pmhash' THEN
    size := size + (SELECT file_bytes FROM pmhash_stats('demo_k'));
  END IF;
  t0 := clock_timestamp();
  SELECT count(*) INTO n FROM probes p JOIN demo d ON d.k = p.k;
  probe_ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
  IF n <> nprobes THEN
    RAISE EXCEPTION '% found % rows of % probes', method, n, nprobes;
  END IF;
  t0 := clock_timestamp();
  INSERT INTO demo SELECT * FROM extra;
  COMMIT;
  insert_ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
  SELECT count(*) INTO n FROM extra e JOIN demo d ON d.k = e.k;
  IF n <> nextra THEN
    RAISE EXCEPTION '% found % of % inserted rows', method, n, nextra;
  END IF;
  INSERT INTO results VALUES (method, round(build_ms, 1), size, round(probe_ms * 1000 / nprobes, 3),
                              round(insert_ms * 1000 / nextra, 3));
  EXECUTE 'DROP INDEX demo_k';
  DELETE FROM demo WHERE id >= (SELECT min(id) FROM extra);
END $$;
SELECT count(*) AS nprobes FROM probes \gset
\echo == for each index: build, probe :nprobes random keys, insert :inserts rows
-- the probes and checks: a nested loop of index scans
SET enable_hashjoin = off; SET enable_mergejoin = off;
SET enable_seqscan = off; SET enable_bitmapscan = off;
CHECKPOINT;
CALL demo_run('pmhash');
VACUUM demo;
CHECKPOINT;
CALL demo_run('hash');
VACUUM demo;
CHECKPOINT;
CALL demo_run('btree');
VACUUM demo;
RESET ALL;

\echo == with all three indexes present, the planner chooses pmhash for equality
CREATE INDEX demo_pmhash ON demo USING pmhash (k);
CREATE INDEX demo_hash ON demo USING hash (k);
CREATE INDEX demo_btree ON demo USING btree (k);
ANALYZE demo;
EXPLAIN SELECT * FROM demo WHERE k = 12345;
SET enable_bitmapscan = off;
EXPLAIN SELECT * FROM demo WHERE k = 12345;
\echo == pmhash_stats of the pmhash index
\x on
SELECT * FROM pmhash_stats('demo_pmhash');
SQL

psql -X -q -v ON_ERROR_STOP=1 -c "COPY (SELECT * FROM results
	ORDER BY array_position(ARRAY['pmhash','hash','btree'], \"index\")) TO STDOUT WITH (FORMAT csv, HEADER)" >"$CSV"

cat <<MSG
The demo cluster keeps running.  Connect with:
    psql -h $PGHOST -p $PGPORT -U $PGUSER postgres
Stop and remove it with:
    bash test/demo.sh stop

MSG

psql -X -q -v ON_ERROR_STOP=1 -v rows="$ROWS" -v inserts="$INSERTS" <<'SQL'
\echo == side by side: :rows rows, each index alone on the table, :inserts rows inserted; lower is better
SELECT "index", round(build_ms) AS "build ms", round(size_bytes / 1048576.0, 1) AS "size MB",
       round(probe_us, 2) AS "probe us (per key)", round(insert_us, 2) AS "insert us (per row)"
FROM results ORDER BY array_position(ARRAY['pmhash','hash','btree'], "index");
\echo == what the ratios say (each is the larger value over the smaller)
\pset tuples_only on
\pset format unaligned
SELECT CASE WHEN m.theirs >= m.mine
         THEN format('pmhash %s %sx %s than %s (%s: %s / pmhash)', m.verb,
                     round(m.theirs / m.mine, 2), m.better, r."index", m.what, r."index")
         ELSE format('pmhash %s %sx %s than %s (%s: pmhash / %s)', m.verb,
                     round(m.mine / m.theirs, 2), m.worse, r."index", m.what, r."index")
       END
FROM results p, results r,
     LATERAL (VALUES (1, 'builds', 'faster', 'slower', 'build time', p.build_ms, r.build_ms),
                     (2, 'is', 'smaller', 'larger', 'size', p.size_bytes, r.size_bytes),
                     (3, 'probes', 'faster', 'slower', 'probe time per key', p.probe_us, r.probe_us),
                     (4, 'inserts', 'faster', 'slower', 'insert time per row', p.insert_us, r.insert_us))
       AS m(ord, verb, better, worse, what, mine, theirs)
WHERE p."index" = 'pmhash' AND r."index" <> 'pmhash'
ORDER BY m.ord, array_position(ARRAY['hash','btree'], r."index");
SQL
"$PYTHON" test/demo_plot.py "$CSV" "$PLOT" "$ROWS"
echo "== the measures as CSV: $CSV"
echo "== their plot (four panels, lower is better): $PLOT"
