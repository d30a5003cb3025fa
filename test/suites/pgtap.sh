#!/usr/bin/env bash
# test/suites/pgtap.sh: run the pgTAP tests in test/pgtap/*.sql with pg_prove.
#
# Creates a fresh database with the pgtap and pmhash extensions on the cluster
# given by PGHOST/PGPORT/PGUSER, runs pg_prove over every test file in one go,
# prints one "ok N - pgtap <file>" / "not ok N - pgtap <file>" line per file
# from pg_prove's per-file results (its full output follows, commented out),
# drops the database, and exits non-zero if anything failed.
# $1: a scratch directory (default: a new temporary one).
set -u

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$REPO/test/lib/common.sh"
WORKDIR=${1:-$(mktemp -d /tmp/pmhash-pgtap-XXXXXX)}
DB=pmhash_pgtap
# the psql of the server's version (PSQL_BIN), else 15's, else PATH's
PSQL_BIN=${PSQL_BIN:-/usr/lib/postgresql/15/bin/psql}
[ -x "$PSQL_BIN" ] || PSQL_BIN=psql
OUT=$WORKDIR/pgtap-prove.out


# Run SQL on the maintenance database, quietly, stopping at the first error.
admin_sql() {
	"$PSQL_BIN" -X -q -v ON_ERROR_STOP=1 -d postgres -c "SET client_min_messages = warning" -c "$1"
}

# Whether pg_prove's per-file line for file $1 says "ok" (all planned tests passed).
file_passed() {
	awk -v f="$1" '
		index($0, f " ") == 1 && substr($0, length(f) + 1) ~ /^ \.+ ok( |$)/ { ok = 1 }
		END { exit !ok }' "$OUT"
}

mkdir -p "$WORKDIR"
cd "$REPO" || exit 1
files=(test/pgtap/*.sql)
if [ ! -e "${files[0]}" ]; then
	tap_result 1 "pgtap: no test files in test/pgtap"
	exit 1
fi

if ! admin_sql "DROP DATABASE IF EXISTS $DB WITH (FORCE)" ||
	! admin_sql "CREATE DATABASE $DB" ||
	! "$PSQL_BIN" -X -q -v ON_ERROR_STOP=1 -d "$DB" \
		-c "CREATE EXTENSION pgtap" -c "CREATE EXTENSION pmhash"; then
	tap_result 1 "pgtap: create database $DB with extensions pgtap and pmhash"
	exit 1
fi

pg_prove --psql-bin "$PSQL_BIN" -d "$DB" "${files[@]}" >"$OUT" 2>&1
prove_rc=$?

for f in "${files[@]}"; do
	file_passed "$f"
	tap_result $? "pgtap $(basename "$f")"
done
# pg_prove failing with every file reported as passing is still a failure
if [ "$prove_rc" != 0 ] && [ "$TAP_FAILED" = 0 ]; then
	tap_result 1 "pgtap: pg_prove exited with status $prove_rc"
fi

echo "# pg_prove output:"
sed 's/^/#   /' "$OUT"

admin_sql "DROP DATABASE IF EXISTS $DB WITH (FORCE)" || tap_result 1 "pgtap: drop database $DB"

[ "$TAP_FAILED" = 0 ]
