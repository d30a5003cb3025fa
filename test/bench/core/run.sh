#!/usr/bin/env bash
# test/bench/core/run.sh: build and run the core-level benchmark of pmhash.
#
# Usage: test/bench/core/run.sh [CSV]   (default CSV: test/bench/out/core.csv)
#
# Installs libpmem-dev (and a compiler) if missing, builds bench_core from
# test/bench/core and src/core (no PostgreSQL), and runs it with its file on
# /dev/shm under PMEM_IS_PMEM_FORCE=1, so that libpmem flushes and fences as
# on persistent memory.  Prints a table; writes one core,<metric>,<value>
# line per metric to CSV.  Takes about two minutes on two cores.
#
# Environment: BENCH_KEYS (default 10000000), BENCH_REPS (default 3),
# BENCH_MARCH (default: native if the compiler accepts it; "portable" for
# none), BENCH_DIR (default /dev/shm), CC (default cc).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
CSV=${1:-$REPO/test/bench/out/core.csv}
KEYS=${BENCH_KEYS:-10000000}
REPS=${BENCH_REPS:-3}
DIR=${BENCH_DIR:-/dev/shm}
CC=${CC:-cc}
FILE="$DIR/pmhash-bench-core-$$"

# Run a command as root (directly, or through sudo).
as_root() {
	if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# Install what the build needs, unless it is there.
install_needs() {
	local missing=""
	for p in libpmem-dev gcc make; do
		dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
	done
	if [ -n "$missing" ]; then
		echo "== installing:$missing"
		as_root apt-get update -qq &&
			as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null ||
			{ echo "run.sh: could not install$missing" >&2; exit 2; }
	fi
}

# The -march flag to build with: native where the compiler takes it.
choose_march() {
	case "${BENCH_MARCH:-native}" in
		portable | "") echo "" ;;
		native)
			if echo 'int main(void) { return 0; }' |
				"$CC" -march=native -x c - -o /dev/null 2>/dev/null; then
				echo "-march=native"
			else
				echo ""
			fi ;;
		*) echo "-march=$BENCH_MARCH" ;;
	esac
}

# Remove the benchmark file if the run left it behind.
cleanup() {
	rm -f "$FILE"
}

# Fail early if the file system cannot hold the file (about 84 bytes a key).
check_space() {
	local need avail
	need=$(( (KEYS * 84 + 64 * 1048576) / 1024 ))
	avail=$(df -Pk "$DIR" 2>/dev/null | awk 'NR == 2 { print $4 }')
	if [ -n "$avail" ] && [ "$avail" -lt "$need" ]; then
		echo "run.sh: $DIR has $((avail / 1024)) MB free, the benchmark needs $((need / 1024)) MB" >&2
		exit 2
	fi
}

install_needs
check_space
MARCH=$(choose_march)
echo "== building bench_core (${MARCH:-portable})"
make -s -C "$HERE" CC="$CC" MARCH="$MARCH" -B >/dev/null || { echo "run.sh: build failed" >&2; exit 2; }
mkdir -p "$(dirname "$CSV")"
trap cleanup EXIT INT TERM
echo "== running (file $FILE)"
PMEM_IS_PMEM_FORCE=1 "$HERE/bench_core" -n "$KEYS" -r "$REPS" -f "$FILE" -o "$CSV"
rc=$?
if [ -f "$CSV" ]; then
	echo "core,march,${MARCH:-portable}" >>"$CSV"
	echo "== wrote $(wc -l <"$CSV") lines to $CSV"
fi
exit $rc
