#!/usr/bin/env bash
# test/suites/packaging.sh: the release metadata and archive a PGXN user gets.
#
# Checks that META.json is valid against meta-spec 1.0.0
# (test/packaging/meta-spec-1.0.0.json, with python3-jsonschema) and that
# the schema rejects a broken copy; that its versions are the control
# file's default_version (the one place the version is set); that the files
# it names exist; that the update scripts in sql/ lead from the oldest
# install script to default_version; and that `make dist` makes an archive
# of exactly the committed build files, sources, SQL scripts and tests,
# which builds on its own.  Needs no server.  Usage: packaging.sh WORKDIR.
# Prints "ok N - ..." / "not ok N - ..." lines; exits non-zero on failure.
set -u

WORK=${1:?usage: packaging.sh WORKDIR}/packaging
REPO=$(cd "$(dirname "$0")/../.." && pwd)
source "$REPO/test/lib/common.sh"
SCHEMA=$REPO/test/packaging/meta-spec-1.0.0.json
PYTHON=/usr/bin/python3  # Debian's, where python3-jsonschema installs

rm -rf "$WORK"
mkdir -p "$WORK"

# Validate the JSON file $1 against the schema; print the first error.
validate() {
	"$PYTHON" - "$SCHEMA" "$1" <<'PY'
import json, sys
import jsonschema

schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(json.load(open(sys.argv[2]))),
                key=lambda e: list(e.path))
for e in errors[:1]:
    print("# %s: %s" % ("/".join(str(p) for p in e.path) or "(top)", e.message))
sys.exit(1 if errors else 0)
PY
}

# A field of META.json, by a Python expression on m.
meta() {
	python3 -c "import json, sys; m = json.load(open(sys.argv[1])); print($1)" "$REPO/META.json"
}

validate "$REPO/META.json"
tap_result $? "META.json is valid against PGXN meta-spec 1.0.0"

python3 - "$REPO/META.json" "$WORK/broken.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["resources"] = {"repository": {"type": "git"}}
del m["provides"]
json.dump(m, open(sys.argv[2], "w"))
PY
! validate "$WORK/broken.json" >/dev/null
tap_result $? "the schema check rejects a META.json without provides and a repository without url"

control_version=$(sed -n "s/^default_version = '\([0-9.]*\)'/\1/p" "$REPO/pmhash.control")
dist_version=$(make -s -C "$REPO" --no-print-directory -f Makefile -f - print-distversion <<'MK'
print-distversion:
	@echo $(DISTVERSION)
MK
)
echo "# default_version $control_version, release $dist_version"
[ -n "$control_version" ] && [ "$dist_version" = "$control_version.0" ] &&
	[ "$(meta 'm["version"]')" = "$dist_version" ] &&
	[ "$(meta 'm["provides"]["pmhash"]["version"]')" = "$dist_version" ]
tap_result $? "META.json's versions are the control file's default_version ($dist_version)"

missing=""
for f in $(meta 'm["provides"]["pmhash"]["file"]') $(meta 'm["provides"]["pmhash"]["docfile"]'); do
	[ -f "$REPO/$f" ] || missing="$missing $f"
done
[ -z "$missing" ]
tap_result $? "the files META.json names exist${missing:+ (missing:$missing)}"

# the update chain: from the oldest install script, one update script after
# another, to default_version
oldest=$(ls "$REPO"/sql/pmhash--*.sql | sed -n 's/.*pmhash--\([0-9.]*\)\.sql$/\1/p' | sort -V | head -1)
version=$oldest
chain=$oldest
while next=$(ls "$REPO"/sql/pmhash--"$version"--*.sql 2>/dev/null |
	sed -n "s/.*pmhash--$version--\([0-9.]*\)\.sql$/\1/p" | sort -V | tail -1) && [ -n "$next" ]; do
	version=$next
	chain="$chain -> $next"
done
echo "# update chain: $chain"
[ -n "$oldest" ] && [ "$version" = "$control_version" ]
tap_result $? "update scripts lead from the oldest version to default_version ($chain)"

if ! git -C "$REPO" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	# an unpacked archive: nothing to archive from
	tap_result 0 "# SKIP make dist: $REPO is not a git checkout"
	echo "# $TAP_N checks, $TAP_FAILED failed"
	[ "$TAP_FAILED" = 0 ]
	exit
fi
archive=$WORK/pmhash-$dist_version.zip
make -s -C "$REPO" --no-print-directory dist DIST_DIR="$WORK" >"$WORK/dist.log" 2>&1 && [ -f "$archive" ]
tap_result $? "make dist writes pmhash-$dist_version.zip"

python3 - "$archive" "pmhash-$dist_version/" > "$WORK/archived" <<'PY'
import sys, zipfile
for name in zipfile.ZipFile(sys.argv[1]).namelist():
    if not name.endswith("/"):
        print(name[len(sys.argv[2]):] if name.startswith(sys.argv[2]) else "OUTSIDE " + name)
PY
git -C "$REPO" ls-files Makefile META.json README.md pmhash.control src sql expected test |
	sort > "$WORK/expected"
sort -o "$WORK/archived" "$WORK/archived"
diff "$WORK/expected" "$WORK/archived" > "$WORK/archive.diff" &&
	! grep -q '^\.ci/' "$WORK/archived"
tap_result $? "the archive holds exactly the committed build files, sources, SQL and tests ($(wc -l < "$WORK/archived") files)"
[ -s "$WORK/archive.diff" ] && head -10 "$WORK/archive.diff" | sed 's/^/# /'

python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$archive" "$WORK/unpacked" &&
	make -s -C "$WORK/unpacked/pmhash-$dist_version" PG_CFLAGS="-Wall -Wextra -Werror" \
		>"$WORK/build.log" 2>&1 &&
	[ -f "$WORK/unpacked/pmhash-$dist_version/pmhash.so" ]
tap_result $? "the unpacked archive builds pmhash.so"
[ -f "$WORK/unpacked/pmhash-$dist_version/pmhash.so" ] || tail -5 "$WORK/build.log" | sed 's/^/# /'

echo "# $TAP_N checks, $TAP_FAILED failed"
[ "$TAP_FAILED" = 0 ]
