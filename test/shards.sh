#!/usr/bin/env bash
# test/shards.sh: a throwaway scale-out setup with postgres_fdw.  Starts N
# shard servers and a coordinator, PostgreSQL 15 clusters with pmhash
# preloaded, under /tmp/pmhash-shards, on Unix sockets.  Each shard has a
# table demo (k int8, v text) with a unique pmhash index demo_k; the
# coordinator's table demo is PARTITION BY HASH (k) over foreign tables on
# the shards, and 10,000 rows are inserted through it.  Prints how to
# connect and the plan of a lookup through the coordinator.
#
# It uses the installed pmhash and does not build it: install it first
# (make && sudo make install, or bash test/demo.sh, which builds and
# installs it).
#
#   bash test/shards.sh start [N]   start N shard servers (default 3) and the coordinator
#   bash test/shards.sh stop        stop them and remove their files
set -u
cd "$(dirname "$0")/.."
source test/lib/common.sh

SHARDS_DIR=/tmp/pmhash-shards
ROWS=10000

# Stop and remove the servers of a previous start, if any.
stop_shards() {
	local env
	for env in "$SHARDS_DIR"/*/env; do
		[ -f "$env" ] || continue
		source "$env"
		stop_cluster
	done
	as_root rm -rf "$SHARDS_DIR"
}

case "${1:-}" in
	start) ;;
	stop)
		stop_shards
		echo "shard servers and coordinator stopped and removed"
		exit 0
		;;
	*)
		echo "usage: bash test/shards.sh start [N] | stop" >&2
		exit 2
		;;
esac
N=${2:-3}
case "$N" in
	'' | *[!0-9]* | 0)
		echo "N must be a number of shard servers, 1 or more" >&2
		exit 2
		;;
esac

set -e
install_packages
if [ ! -f "$("$PG_BIN/pg_config" --pkglibdir)/pmhash.so" ]; then
	echo "pmhash is not installed: run make && sudo make install, or bash test/demo.sh" >&2
	exit 1
fi
stop_shards
mkdir -p "$SHARDS_DIR"

# the shards, and the coordinator's SQL that reaches them
coordinator_sql="CREATE EXTENSION postgres_fdw;
CREATE TABLE demo (k int8 NOT NULL, v text NOT NULL) PARTITION BY HASH (k);"
for ((i = 0; i < N; i++)); do
	start_cluster "$SHARDS_DIR/shard$i" msync
	save_cluster_env "$SHARDS_DIR/shard$i/env"
	psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION pmhash;
CREATE TABLE demo (k int8 NOT NULL, v text NOT NULL);
CREATE UNIQUE INDEX demo_k ON demo USING pmhash (k);
SQL
	coordinator_sql="$coordinator_sql
CREATE SERVER shard$i FOREIGN DATA WRAPPER postgres_fdw
	OPTIONS (host '$PGHOST', port '$PGPORT', dbname 'postgres', batch_size '1000');
CREATE USER MAPPING FOR CURRENT_USER SERVER shard$i;
CREATE FOREIGN TABLE demo_$i PARTITION OF demo FOR VALUES WITH (MODULUS $N, REMAINDER $i)
	SERVER shard$i OPTIONS (table_name 'demo');"
done

start_cluster "$SHARDS_DIR/coordinator" msync
save_cluster_env "$SHARDS_DIR/coordinator/env"
echo "== $N shard servers; inserting $ROWS rows through the coordinator"
psql -X -q -v ON_ERROR_STOP=1 <<SQL
$coordinator_sql
INSERT INTO demo SELECT g, 'row ' || g FROM generate_series(1, $ROWS) g;
SQL
for ((i = 0; i < N; i++)); do
	(source "$SHARDS_DIR/shard$i/env" && psql -X -q -c "ANALYZE demo")
done
psql -X -v ON_ERROR_STOP=1 <<'SQL'
SELECT tableoid::regclass AS partition, count(*) AS rows FROM demo GROUP BY 1 ORDER BY 1;
\echo == a lookup through the coordinator goes to one shard, with its WHERE
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM demo WHERE k = 42;
\echo == and the keys of an array to the shards that own them
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM demo WHERE k = ANY(ARRAY[1, 2]::int8[]);
SQL
owner=$(psql -X -A -t -c "SELECT tableoid::regclass FROM demo WHERE k = 42")
echo "== on shard${owner#demo_}, which owns k = 42, that lookup probes its pmhash index"
(source "$SHARDS_DIR/shard${owner#demo_}/env" && psql -X -c "EXPLAIN SELECT k, v FROM demo WHERE k = 42")

echo
echo "The servers keep running.  Connect to the coordinator with:"
echo "    psql -h $PGHOST -p $PGPORT -U $PGUSER postgres"
echo "and to the shards (each answers for its keys with its pmhash index demo_k) with:"
for ((i = 0; i < N; i++)); do
	(source "$SHARDS_DIR/shard$i/env" && echo "    psql -h $PGHOST -p $PGPORT -U $PGUSER postgres    # shard$i")
done
echo "Stop and remove them with:"
echo "    bash test/shards.sh stop"
