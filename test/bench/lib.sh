# test/bench/lib.sh: helpers of the benchmark scripts that start their own
# cluster (run.sh, unique.sh), sourced after test/lib/common.sh.  They use
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
