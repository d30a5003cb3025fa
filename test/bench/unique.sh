#!/usr/bin/env bash
# test/bench/unique.sh: unique pmhash indexes against unique btree indexes,
# side by side, in one cluster and one run.
#
# Installs what it needs (common.sh's packages), builds and installs pmhash
# (unless SKIP_BUILD is set), starts a throwaway cluster with its pmhash files
# on /dev/shm (PMEM_IS_PMEM_FORCE=1) and the settings of run.sh, and measures:
#   1. inserts: for each key type of INSERT_KEYS (int8: the first 64 bits of
#      an md5; text: an md5), a table of ROWS rows gets ROWS new rows with
#      distinct keys in one INSERT ... SELECT, timed from the client's side
#      (commit included), with a unique pmhash index, a unique btree index, a
#      non-unique pmhash index and no index (the table's own cost); the table
#      is rebuilt, vacuumed and checkpointed before each insert.  Microseconds
#      and WAL bytes per inserted row.
#   2. upserts: pgbench runs of
#        INSERT INTO u (id, k, v) VALUES (:r, key(:r), :v)
#          ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v, n = u.n + 1
#      (test/bench/sql/unique_upsert_<key type>.sql) with :r drawn uniformly
#      from 1..2 * ROWS against a table of the keys of 1..ROWS, so that about
#      half of the upserts update and half insert, for each key type of
#      UPSERT_KEYS (text: md5 of :r; uuid: that md5 as a uuid), each
#      synchronous_commit setting of SYNC_COMMITS and each client count of
#      CLIENTS, with a unique pmhash index and with a unique btree index, each
#      on its own table (up_pmhash.u, up_btree.u), rebuilt, vacuumed and
#      checkpointed before each run.  Transactions per second and WAL bytes
#      per transaction (pg_current_wal_insert_lsn() difference / transactions).
#      As in run.sh, a 1-client run has pgbench and its backend share one CPU.
#      The bound (index "none"): the heap work of the same upserts with no
#      index and no ON CONFLICT (test/bench/sql/unique_bound_<key type>.sql):
#      a key of the table's rows updates its row through the TID its id gives,
#      a key above them inserts a row.  That is the tps an arbiter index
#      costing nothing could at most reach; none / btree is the highest ratio
#      any index can show against btree on this machine.
# Every measurement is repeated REPS times, the order of the indexes
# alternating from one repetition to the next; the medians are reported.
# Each insert and each upsert run is checked (test/bench/sql/unique_insert.sql
# and unique_upsert_check.sql): no duplicate key by a sequential scan, row
# and update counts that add up to pgbench's transactions, the index finding
# a sample of keys as a sequential scan does, a plain INSERT of a key already
# there rejected, and pmhash_verify (amcheck for btree).  A wrong result stops
# the run with a non-zero exit status; floors that fail are only reported.
# The issue's floors: insert, unique pmhash <= 0.7 x unique btree per row;
# upsert with text keys, unique pmhash >= 1.1 x unique btree in tps.
# Writes test/bench/out/: unique.md (the summary: tables, floors, settings),
# unique.csv (every measurement), unique-meta.txt (the run's settings),
# unique.log (this output), unique-server.log and unique-pgbench-*.log.
#
#   bash test/bench/unique.sh     full run: about 30 minutes on 2 cores
#   ROWS=50000 UPSERT_SECONDS=5 REPS=1 bash test/bench/unique.sh
#                                 smoke run: about 1.5 minutes
#
# Settings (environment):
#   ROWS            rows of each table before a measurement (1000000)
#   REPS            repetitions of each measurement (3)
#   UPSERT_SECONDS  duration of each pgbench run (30)
#   CLIENTS         pgbench client counts ("1 2")
#   SYNC_COMMITS    synchronous_commit of the upsert runs ("on off"): on, the
#                   cluster's setting, makes each transaction wait for its WAL
#                   flush; off shows what the index itself costs
#   INSERT_KEYS     key types of the insert test ("int8 text")
#   UPSERT_KEYS     key types of the upsert test ("text uuid")
#   SAMPLE          sample keys probed by the checks (10000)
#   SHARED_BUFFERS  shared_buffers (2GB)
#   PGBENCH_OPTS    extra pgbench options for every run (none)
#   SKIP_BUILD      set to use the installed pmhash instead of building and
#                   installing the working tree's
set -u
source "$(dirname "$0")/../lib/common.sh"
cd "$REPO"

BENCH=$REPO/test/bench
SQL=$BENCH/sql
OUT=$BENCH/out
RAW=$OUT/unique.csv
MD=$OUT/unique.md
META=$OUT/unique-meta.txt
ROWS=${ROWS:-1000000}
REPS=${REPS:-3}
UPSERT_SECONDS=${UPSERT_SECONDS:-30}
CLIENTS=${CLIENTS:-"1 2"}
SYNC_COMMITS=${SYNC_COMMITS:-"on off"}
INSERT_KEYS=${INSERT_KEYS:-"int8 text"}
UPSERT_KEYS=${UPSERT_KEYS:-"text uuid"}
SAMPLE=${SAMPLE:-10000}
SHARED_BUFFERS=${SHARED_BUFFERS:-2GB}
PGBENCH_OPTS=${PGBENCH_OPTS:-}
INSERT_CFGS="pmhash_unique btree_unique pmhash none"
WORK=""
REP=0

SERVER_LOG=$OUT/unique-server.log
source "$BENCH/lib.sh"

# Run SQL file $1 with psql arguments $2...; print its output's INFO lines
# and set RESULT_<metric> for each of its "RESULT metric value" lines.
run_sql() {
	local file=$1 out tag metric value
	shift
	out=$(bpsql "$@" -f "$SQL/$file") || die "$file failed ($*)"
	while read -r tag metric value; do
		case $tag in
			RESULT) printf -v "RESULT_$metric" '%s' "$value" ;;
			INFO) echo "   $metric $value" ;;
		esac
	done <<<"$out"
}

# Record measurement part $1, key type $2, index $3, clients $4,
# synchronous_commit $5, metric $6, value $7 of repetition $REP.
record() {
	echo "$1,$2,$3,$4,$5,$6,$REP,$7" >>"$RAW"
}

# The words of $2 rotated left by ($1 - 1): the order of repetition $1.
rotation() {
	local -a words
	read -r -a words <<<"$2"
	local r=$((($1 - 1) % ${#words[@]}))
	echo "${words[*]:r} ${words[*]:0:r}"
}

# The SQL type and the key of integer i of key type $1 (KEYTYPE, KEYEXPR).
key_params() {
	case $1 in
		int8) KEYTYPE=int8 KEYEXPR="('x' || substr(md5(i::text), 1, 16))::bit(64)::int8" ;;
		text) KEYTYPE=text KEYEXPR="md5(i::text)" ;;
		uuid) KEYTYPE=uuid KEYEXPR="md5(i::text)::uuid" ;;
		*) die "unknown key type $1 (int8, text or uuid)" ;;
	esac
}

# One insert measurement: key type $1, index $2 (see INSERT_CFGS).
insert_one() {
	local kt=$1 cfg=$2 am uniq=""
	key_params "$kt"
	case $cfg in
		*_unique) am=${cfg%_unique} uniq=UNIQUE ;;
		*) am=$cfg ;;
	esac
	RESULT_us_per_row="" RESULT_wal_per_row=""
	run_sql unique_insert.sql -v kt="$kt" -v keytype="$KEYTYPE" -v cfg="$cfg" -v am="$am" \
		-v uniq="$uniq" -v n="$ROWS"
	[ -n "$RESULT_us_per_row" ] && [ -n "$RESULT_wal_per_row" ] || die "no result from unique_insert.sql"
	record insert "$kt" "$cfg" - - us_per_row "$RESULT_us_per_row"
	record insert "$kt" "$cfg" - - wal_per_row "$RESULT_wal_per_row"
	printf '   insert %-5s %-14s rep %s: %7.3f us/row %7.1f B WAL/row\n' "$kt" "$cfg" "$REP" \
		"$RESULT_us_per_row" "$RESULT_wal_per_row"
}

# One upsert run: key type $1, index AM $2 (pmhash, btree, or none for the
# bound), synchronous_commit $3, $4 clients.  Rebuilds the AM's table, runs
# pgbench, checks the table.
upsert_one() {
	local kt=$1 am=$2 sync=$3 clients=$4 log lsn txns failed tps wal pin="" postmaster cpu
	local script=$SQL/unique_upsert_$kt.sql added updated tpp=0
	key_params "$kt"
	[ "$am" = none ] && script=$SQL/unique_bound_$kt.sql
	log=$OUT/unique-pgbench-$kt-$am-sync$sync-c$clients-rep$REP.log
	RESULT_tuples_per_page=""
	run_sql unique_upsert_prepare.sql -v am="$am" -v kt="$kt" -v keytype="$KEYTYPE"
	if [ "$am" = none ]; then
		tpp=$RESULT_tuples_per_page
		[ -n "$tpp" ] || die "no tuples per page from unique_upsert_prepare.sql"
	fi
	cpu=$(($(nproc) - 1))
	if [ "$clients" = 1 ] && [ "$cpu" -gt 0 ]; then
		postmaster=$(head -1 "$PGDATA_DIR/postmaster.pid")
		pin="taskset -c $cpu"
		as_root taskset -p -c "$cpu" "$postmaster" >/dev/null || die "taskset failed"
	fi
	lsn=$(bpsql -c "SELECT pg_current_wal_insert_lsn()") || die "no WAL position"
	# shellcheck disable=SC2086
	PGOPTIONS="-c search_path=up_$am,public -c synchronous_commit=$sync" $pin "$PG_BIN/pgbench" -n \
		-f "$script" -D size="$ROWS" -D tpp="$tpp" -c "$clients" -j "$clients" \
		-T "$UPSERT_SECONDS" $PGBENCH_OPTS bench >"$log" 2>&1 || { cat "$log"; die "pgbench failed"; }
	if [ -n "$pin" ]; then
		as_root taskset -p -c "0-$cpu" "$postmaster" >/dev/null || die "taskset failed"
	fi
	wal=$(bpsql -c "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$lsn')") || die "no WAL position"
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$log")
	txns=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$log")
	failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$log")
	[ -n "$tps" ] && [ -n "${txns:-}" ] && [ "$txns" -gt 0 ] || { cat "$log"; die "no tps in pgbench output"; }
	[ "${failed:-0}" = 0 ] || { cat "$log"; die "pgbench reports failed transactions"; }
	wal=$(python3 -c "print(round($wal / $txns, 1))")
	RESULT_inserted_share=""
	if [ "$am" = none ]; then
		read -r added updated < <(bpsql -F ' ' -c "SELECT count(*) - $ROWS, sum(n) FROM up_none.u") ||
			die "no row count"
		# a second update of a row in one run finds nothing; the rest all count
		[ "$added" -gt 0 ] && [ "$updated" -gt 0 ] && [ $((added + updated)) -le "$txns" ] ||
			die "up_none.u: $added rows added and $updated updates, but pgbench processed $txns transactions"
		RESULT_inserted_share=$(python3 -c "print($added / $txns)")
	else
		run_sql unique_upsert_check.sql -v am="$am" -v kt="$kt" -v keyexpr="$KEYEXPR" -v n="$ROWS" \
			-v txns="$txns"
	fi
	[ -n "$RESULT_inserted_share" ] || die "no result from unique_upsert_check.sql"
	record upsert "$kt" "$am" "$clients" "$sync" tps "$tps"
	record upsert "$kt" "$am" "$clients" "$sync" wal_per_txn "$wal"
	record upsert "$kt" "$am" "$clients" "$sync" inserted_share "$RESULT_inserted_share"
	printf '   upsert %-4s %-6s sync=%-3s c%s rep %s: %9.1f tps %8.1f B WAL/txn, %.2f inserted\n' \
		"$kt" "$am" "$sync" "$clients" "$REP" "$tps" "$wal" "$RESULT_inserted_share"
}

# Start the benchmark cluster and create the benchmark database.
start_bench_cluster() {
	WORK=$(mktemp -d /tmp/pmhash-unique-XXXXXX)
	start_cluster "$WORK" pmem \
		"shared_buffers = $SHARED_BUFFERS" \
		"max_wal_size = 4GB" \
		"min_wal_size = 1GB" \
		"checkpoint_timeout = 30min" \
		"maintenance_work_mem = 1GB" \
		"jit = off" \
		"log_checkpoints = on" || die "the cluster did not start (see $WORK/server.log)"
	psql -XAtq -v ON_ERROR_STOP=1 -c "CREATE DATABASE bench" || die "CREATE DATABASE failed"
	bpsql -f "$SQL/unique_setup.sql" || die "unique_setup.sql failed"
	meta settings "$(bpsql -c "SELECT string_agg(name || '=' || current_setting(name), ' ')
		FROM pg_settings WHERE name IN ('shared_buffers', 'max_wal_size', 'checkpoint_timeout',
		'maintenance_work_mem', 'jit', 'fsync', 'synchronous_commit', 'wal_level',
		'full_page_writes', 'pmhash.directory')")"
	meta is_pmem "$(bpsql -c "CREATE TEMP TABLE x (k int); CREATE INDEX ON x USING pmhash (k);
		SELECT is_pmem FROM pmhash_stats('x_k_idx')")"
}

# Write the summary (unique.md) from unique.csv and the metadata, and print it.
report() {
	python3 - "$RAW" "$META" "$MD" <<'EOF'
import csv, statistics, sys

raw, meta_path, md_path = sys.argv[1:4]
data = {}
with open(raw, newline="") as f:
    for r in csv.DictReader(f):
        key = (r["part"], r["keytype"], r["index"], r["clients"], r["sync"], r["metric"])
        data.setdefault(key, []).append(float(r["value"]))
meta = {}
with open(meta_path) as f:
    for line in f:
        if "=" in line:
            k, v = line.rstrip("\n").split("=", 1)
            meta[k] = v

def med(*key):
    v = data.get(key)
    return statistics.median(v) if v else None

def spread(*key):
    v = data.get(key)
    if not v or len(v) < 2:
        return None
    m = statistics.median(v)
    return (max(v) - min(v)) / m if m else None

def fmt(x, digits=3):
    return "-" if x is None else ("%.*f" % (digits, x))

def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b

lines, floors, spreads = [], [], []
ins_keys = sorted({k[1] for k in data if k[0] == "insert"}, key=["int8", "text", "uuid"].index)
if ins_keys:
    lines += ["## Inserts", "",
              "%s new rows with distinct keys in one INSERT ... SELECT into a table of %s rows; "
              "microseconds per inserted row (median), commit included." % (meta.get("rows"), meta.get("rows")), "",
              "| keys | pmhash unique | btree unique | pmhash non-unique | no index | "
              "pmhash-u / btree-u | pmhash-u / pmhash | floor: pmhash-u <= 0.7 x btree-u |",
              "|---|---:|---:|---:|---:|---:|---:|---|"]
    wal = ["", "WAL bytes per inserted row (median):", "",
           "| keys | pmhash unique | btree unique | pmhash non-unique | no index | pmhash-u / btree-u |",
           "|---|---:|---:|---:|---:|---:|"]
    for kt in ins_keys:
        u = {c: med("insert", kt, c, "-", "-", "us_per_row") for c in ["pmhash_unique", "btree_unique", "pmhash", "none"]}
        w = {c: med("insert", kt, c, "-", "-", "wal_per_row") for c in u}
        r_b = ratio(u["pmhash_unique"], u["btree_unique"])
        r_n = ratio(u["pmhash_unique"], u["pmhash"])
        met = r_b is not None and r_b <= 0.7
        verdict = "met" if met else "**not met**"
        floors.append("insert, %s keys: pmhash unique / btree unique = %s (<= 0.7): %s" % (kt, fmt(r_b), verdict))
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            kt, fmt(u["pmhash_unique"]), fmt(u["btree_unique"]), fmt(u["pmhash"]), fmt(u["none"]),
            fmt(r_b), fmt(r_n), verdict))
        wal.append("| %s | %s | %s | %s | %s | %s |" % (
            kt, fmt(w["pmhash_unique"], 1), fmt(w["btree_unique"], 1), fmt(w["pmhash"], 1), fmt(w["none"], 1),
            fmt(ratio(w["pmhash_unique"], w["btree_unique"]))))
        for c in u:
            s = spread("insert", kt, c, "-", "-", "us_per_row")
            if s is not None:
                spreads.append(s)
    lines += wal
up = sorted({(k[1], k[4], k[3]) for k in data if k[0] == "upsert"},
            key=lambda t: (["int8", "text", "uuid"].index(t[0]), t[1] != "on", int(t[2])))
if up:
    lines += ["", "## Upserts", "",
              "pgbench, INSERT ... ON CONFLICT (k) DO UPDATE with keys drawn uniformly from twice the "
              "table's %s rows, %s s per run; medians." % (meta.get("rows"), meta.get("upsert_seconds")), "",
              "| keys | synchronous_commit | clients | pmhash tps | btree tps | pmhash / btree | "
              "bound: heap work, no index, tps | bound / btree | "
              "pmhash WAL B/txn | btree WAL B/txn | WAL pmhash / btree | inserted share | floor (text): >= 1.1 x btree |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for kt, sync, c in up:
        tp = med("upsert", kt, "pmhash", c, sync, "tps")
        tb = med("upsert", kt, "btree", c, sync, "tps")
        wp = med("upsert", kt, "pmhash", c, sync, "wal_per_txn")
        wb = med("upsert", kt, "btree", c, sync, "wal_per_txn")
        sh = med("upsert", kt, "pmhash", c, sync, "inserted_share")
        tn = med("upsert", kt, "none", c, sync, "tps")
        r = ratio(tp, tb)
        rn = ratio(tn, tb)
        verdict = ""
        if kt == "text":
            verdict = "met" if r is not None and r >= 1.1 else "**not met**"
            if r is not None and r < 1.1 and rn is not None and rn < 1.1:
                verdict += " (no index reaches it: bound %s)" % fmt(rn)
            floors.append("upsert, text keys, synchronous_commit=%s, %s client%s: pmhash / btree = %s (>= 1.1): %s;"
                          " bound (the heap work, no index) / btree = %s"
                          % (sync, c, "" if c == "1" else "s", fmt(r), verdict, fmt(rn)))
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            kt, sync, c, fmt(tp, 0), fmt(tb, 0), fmt(r), fmt(tn, 0), fmt(rn), fmt(wp, 0), fmt(wb, 0),
            fmt(ratio(wp, wb)), fmt(sh, 2), verdict))
        for am in ["pmhash", "btree"]:
            s = spread("upsert", kt, am, c, sync, "tps")
            if s is not None:
                spreads.append(s)
head = ["# Unique pmhash indexes against unique btree indexes (test/bench/unique.sh)", ""]
for k in ["started", "commit", "installed", "machine", "parameters", "settings", "is_pmem",
          "load_start", "load_end", "runtime_s"]:
    if k in meta:
        head.append("- %s: %s" % (k, meta[k]))
if spreads:
    head.append("- largest spread of repetitions, (max - min) / median: %.0f%%" % (100 * max(spreads)))
head.append("- correctness: every insert and upsert run checked (duplicates by seqscan, counts, "
            "sample probes index = seqscan, duplicate rejected, pmhash_verify / amcheck): passed")
lines = head + [""] + lines + ["", "## Floors", ""] + ["- " + f for f in floors]
with open(md_path, "w") as f:
    f.write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
}

# The whole benchmark.
main() {
	local start=$SECONDS kt cfg am sync clients installed
	mkdir -p "$OUT"
	rm -f "$OUT"/unique-pgbench-*.log "$MD"
	exec > >(tee "$OUT/unique.log") 2>&1
	echo "part,keytype,index,clients,sync,metric,rep,value" >"$RAW"
	: >"$META"
	meta started "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	meta commit "$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$REPO" diff --quiet HEAD -- src 2>/dev/null || echo ' (src modified)')"
	meta machine "$(nproc) cores, $(free -g | awk '/^Mem:/ { print $2 }') GB RAM, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
	meta parameters "ROWS=$ROWS REPS=$REPS UPSERT_SECONDS=$UPSERT_SECONDS CLIENTS='$CLIENTS' SYNC_COMMITS='$SYNC_COMMITS' INSERT_KEYS='$INSERT_KEYS' UPSERT_KEYS='$UPSERT_KEYS' SAMPLE=$SAMPLE SHARED_BUFFERS=$SHARED_BUFFERS PGBENCH_OPTS='$PGBENCH_OPTS'"
	meta rows "$ROWS"
	meta upsert_seconds "$UPSERT_SECONDS"
	install_packages
	if [ -z "${SKIP_BUILD:-}" ]; then
		build_install "" || die "building pmhash failed"
		meta installed "built and installed from the working tree"
	else
		installed="the installed pmhash.so (SKIP_BUILD)"
		if cmp -s "$REPO/pmhash.so" "$("$PG_BIN/pg_config" --pkglibdir 2>/dev/null || echo /usr/lib/postgresql/15/lib)/pmhash.so"; then
			installed="$installed, identical to the working tree's pmhash.so"
		else
			installed="$installed, NOT the working tree's pmhash.so"
		fi
		meta installed "$installed"
		echo "== $installed"
	fi
	trap cleanup EXIT
	record_load start
	start_bench_cluster
	for kt in $(echo "$INSERT_KEYS $UPSERT_KEYS" | tr ' ' '\n' | awk 'NF && !seen[$0]++'); do
		key_params "$kt"
		run_sql unique_data.sql -v kt="$kt" -v keytype="$KEYTYPE" -v keyexpr="$KEYEXPR" -v n="$ROWS" \
			-v sample="$SAMPLE"
	done
	for REP in $(seq 1 "$REPS"); do
		echo "== inserts, repetition $REP of $REPS"
		for kt in $INSERT_KEYS; do
			for cfg in $(rotation "$REP" "$INSERT_CFGS"); do
				insert_one "$kt" "$cfg"
			done
		done
	done
	for REP in $(seq 1 "$REPS"); do
		echo "== upserts, repetition $REP of $REPS"
		for kt in $UPSERT_KEYS; do
			for sync in $SYNC_COMMITS; do
				for clients in $CLIENTS; do
					for am in $(rotation "$REP" "pmhash btree none"); do
						upsert_one "$kt" "$am" "$sync" "$clients"
					done
				done
			done
		done
	done
	record_load end
	cleanup
	meta runtime_s $((SECONDS - start))
	echo "== summary"
	report || die "the report failed"
	echo "== total runtime $((SECONDS - start)) s; results in test/bench/out/ (unique.md, unique.csv, unique.log)"
}

main "$@"
