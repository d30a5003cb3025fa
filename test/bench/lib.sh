# test/bench/lib.sh: helpers of the benchmark scripts that start their own
# cluster (run.sh, unique.sh, serializable.sh, dead_entries.sh), sourced
# after test/lib/common.sh.  They use
# the caller's WORK (the cluster's directory, empty when none runs), OUT
# (the output directory), META (the metadata file) and SERVER_LOG (where
# cleanup keeps the server log).

# Stop with an error message; the exit trap stops the cluster.
die() {
	echo "ERROR: $*" >&2
	exit 1
}

# Stop the cluster and remove its directory, if this script started one.
cleanup() {
	if [ -n "$WORK" ]; then
		stop_cluster
		cp "$WORK/server.log" "$SERVER_LOG" 2>/dev/null
		as_root rm -rf "$WORK"
		WORK=""
	fi
}

# Append "key=value" to the run's metadata.
meta() {
	echo "$1=$2" >>"$META"
}

# Record the load averages at point $1 in the metadata and on stdout.
record_load() {
	local load
	load=$(uptime | sed 's/.*load average: //')
	meta "load_$1" "$load"
	echo "== load averages ($1): $load"
}

# psql on the benchmark database: unaligned, quiet, stop at the first error.
bpsql() {
	psql -XAtq -v ON_ERROR_STOP=1 -d bench "$@"
}

# Run the repetitions of a benchmark of the access methods in $AMS: the
# metadata (the parameters in $1), the packages and, unless SKIP_BUILD is
# set, the build; a pmem cluster in a new directory /tmp/pmhash-$2-* with
# database bench and the extension; then $REPS times run_one AM REP for
# each method, their order rotated each time, the load before and after,
# and the caller's report.
run_rotated() {
	local start=$SECONDS rep am order=$AMS
	: >"$META"
	meta started "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	meta commit "$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)"
	meta parameters "$1"
	install_packages
	[ -n "${SKIP_BUILD:-}" ] || build_install "" || die "building pmhash failed"
	trap cleanup EXIT
	WORK=$(mktemp -d "/tmp/pmhash-$2-XXXXXX")
	start_cluster "$WORK" pmem ||
		die "the cluster did not start (see $WORK/server.log)"
	psql -XAtq -v ON_ERROR_STOP=1 -c "CREATE DATABASE bench" || die "CREATE DATABASE failed"
	bpsql -c "CREATE EXTENSION pmhash" || die "CREATE EXTENSION failed"
	record_load start
	for rep in $(seq 1 "$REPS"); do
		echo "== repetition $rep of $REPS"
		for am in $order; do
			run_one "$am" "$rep"
		done
		order="${order#* } ${order%% *}"
	done
	record_load end
	cleanup
	meta runtime_s $((SECONDS - start))
	report || die "the report failed"
}
