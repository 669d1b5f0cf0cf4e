#!/usr/bin/env bash
# minio-py's functional test program (tests/functional/tests.py, as
# MinIO's "mint" runs it) against `quilt up`, and a count of its tests by
# result. The program is taken from the released source distribution on
# PyPI (the version below) and run unmodified with that release of the
# library in a venv; a small driver imports it and counts a failed test
# instead of letting it stop the run (its main() exits at the first
# failure). Not part of `make test` (docs/s3.md says what passes and why
# the rest does not). Needs python3 with venv, and PyPI.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
minio_py_version=7.2.20
work=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

(cd "$root" && go build -o "$work/quilt" ./cmd/quilt)
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q "minio==$minio_py_version"
"$work/venv/bin/pip" download -q "minio==$minio_py_version" --no-binary :all: --no-deps -d "$work/sdist"
tar xzf "$work/sdist/minio-$minio_py_version.tar.gz" -C "$work/sdist"
program="$work/sdist/minio-$minio_py_version/tests/functional/tests.py"
[ -f "$program" ] || { echo "no tests/functional/tests.py in minio $minio_py_version's sdist"; exit 1; }

# Over HTTPS, as SSE-C needs: the program and the library trust the
# gateway's own CA through SSL_CERT_FILE.
QUILT_HOME="$work/home" "$work/quilt" up --port 0 --no-fsync --s3-tls on --swift off --sftp off --webdav off --nbd off >"$work/up.log" 2>&1 &
pid=$!
env="$work/home/grid/gateway/s3.env"
for _ in $(seq 1 120); do [ -s "$env" ] && break; sleep 0.5; done
[ -s "$env" ] || { cat "$work/up.log"; echo "quilt up did not start"; exit 1; }
# shellcheck disable=SC1090
. "$env"
mkdir "$work/run"
cd "$work/run"
SERVER_ENDPOINT=${AWS_ENDPOINT_URL#https://} ACCESS_KEY=$AWS_ACCESS_KEY_ID SECRET_KEY=$AWS_SECRET_ACCESS_KEY \
	SSL_CERT_FILE=$AWS_CA_BUNDLE ENABLE_HTTPS=1 MINT_MODE=full timeout 1800 "$work/venv/bin/python" - "$program" >"$work/results.json" 2>"$work/stderr" <<'PY' || true
import importlib.util, sys
spec = importlib.util.spec_from_file_location("minio_functional", sys.argv[1])
tests = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tests)
call = tests._call_test
def keep_going(*args, **kwargs):
    try:
        call(*args, **kwargs)
    except tests.TestFailed:
        pass
tests._call_test = keep_going
tests.main()
PY
# Each test (or each of its runs with a customer key) prints one line;
# a test counts as FAIL if any run failed, else NA if any run was
# answered 501, else PASS.
python3 - "$work/results.json" <<'PY'
import collections, json, sys
rank = {"PASS": 1, "NA": 2, "FAIL": 3}
tests = {}
for line in open(sys.argv[1]):
    try:
        j = json.loads(line)
    except ValueError:
        continue
    name, st = j.get("name", "").removeprefix("minio-py:"), j.get("status")
    if st in rank and (name not in tests or rank[st] > rank[tests[name][0]]):
        tests[name] = (st, (j.get("message") or j.get("alert") or "")[:160])
for name, (st, why) in tests.items():
    print(f"{st:4} {name}" + (f": {why}" if st != "PASS" else ""))
c = collections.Counter(st for st, _ in tests.values())
print(f"\n{len(tests)} tests: {c['PASS']} pass, {c['FAIL']} fail, {c['NA']} not applicable (501)")
PY
[ -s "$work/stderr" ] && { echo "--- stderr (last lines)"; tail -5 "$work/stderr"; }
true
