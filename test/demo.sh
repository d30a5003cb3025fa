#!/usr/bin/env bash
# test/demo.sh: the pmhash demo.  Installs what it needs, builds and installs
# pmhash (unless SKIP_BUILD is set), starts a throwaway PostgreSQL 15 cluster
# with pmhash preloaded (its index files on /dev/shm, the persistent-memory
# code path), loads a demo table, builds pmhash, hash and btree indexes on
# the same column one after the other, and prints build time, size and lookup
# time side by side.
#
#   bash test/demo.sh [ROWS]    run the demo (default 1000000 rows)
#   bash test/demo.sh stop      stop the demo cluster and remove it
#
# Settings (environment):
#   SKIP_BUILD   set to use the installed pmhash instead of building and
#                installing the working tree's
set -u
cd "$(dirname "$0")/.."
source test/lib/common.sh

DEMO=/tmp/pmhash-demo
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

set -e
install_packages
if [ -z "${SKIP_BUILD:-}" ]; then
	build_install ""
else
	echo "== using the installed pmhash (SKIP_BUILD)"
fi
stop_demo
start_cluster "$DEMO" pmem
echo "export PGHOST=$PGHOST PGPORT=$PGPORT PGUSER=$PGUSER PGDATA_DIR=$PGDATA_DIR" > "$DEMO/env"

psql -X -q -v ON_ERROR_STOP=1 -v rows="$ROWS" <<'SQL'
CREATE EXTENSION pmhash;
\echo == loading :rows rows into demo(id, k int8 random, payload)
SELECT setseed(0.42);
CREATE TABLE demo (id bigint, k bigint, payload text);
INSERT INTO demo SELECT i, (random() * 4e18)::bigint, 'row ' || i FROM generate_series(1, :rows) i;
CREATE TABLE probes AS SELECT k FROM demo ORDER BY random() LIMIT 100000;
VACUUM ANALYZE demo;
VACUUM ANALYZE probes;

-- build one index, time the build and 100,000 random lookups, then drop it
CREATE TABLE results (method text, build_ms numeric, size_mb numeric, lookup_us numeric);
CREATE FUNCTION demo_run(method text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; build_ms numeric; look_ms numeric; n bigint; size bigint;
BEGIN
  t0 := clock_timestamp();
  EXECUTE format('CREATE INDEX demo_k ON demo USING %s (k)', method);
  build_ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
  size := pg_relation_size('demo_k');
  IF method = 'pmhash' THEN
    size := size + (SELECT file_bytes FROM pmhash_stats('demo_k'));
  END IF;
  SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off;
  SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off;
  t0 := clock_timestamp();
  SELECT count(*) INTO n FROM probes p JOIN demo d ON d.k = p.k;
  look_ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
  IF n <> (SELECT count(*) FROM probes) THEN
    RAISE EXCEPTION '% found % rows, expected %', method, n, (SELECT count(*) FROM probes);
  END IF;
  INSERT INTO results VALUES (method, round(build_ms), round(size / 1048576.0, 1),
                              round(look_ms * 1000 / (SELECT count(*) FROM probes), 2));
  EXECUTE 'DROP INDEX demo_k';
END $$;
\echo == building each index and probing 100000 random keys
SELECT demo_run('pmhash');
SELECT demo_run('hash');
SELECT demo_run('btree');
\echo
\echo == side by side (same cluster, same run; ratios are pmhash / other)
SELECT r.method, r.build_ms AS "build ms", r.size_mb AS "size MB", r.lookup_us AS "lookup us",
       round(p.build_ms / r.build_ms, 2) AS "build ratio",
       round(p.size_mb / r.size_mb, 2) AS "size ratio",
       round(p.lookup_us / r.lookup_us, 2) AS "lookup ratio"
FROM results r, results p WHERE p.method = 'pmhash'
ORDER BY array_position(ARRAY['pmhash','hash','btree'], r.method);

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

cat <<MSG

The demo cluster keeps running.  Connect with:
    psql -h $PGHOST -p $PGPORT -U $PGUSER postgres
Stop and remove it with:
    bash test/demo.sh stop
MSG
