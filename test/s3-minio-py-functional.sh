#!/usr/bin/env bash
# minio-py's functional test program (tests/functional/tests.py, as
# MinIO's "mint" runs it, in its full mode) against `quilt up`: one line
# per test run by result, a count, and a check of every result against
# test/s3-minio-py-functional.expected (the runs expected not to pass, and
# why). Fails if a result or the number of runs differs from the list.
# Part of `make test`.
#
# The program is taken from the released source distribution on PyPI
# (the version below) and run unmodified with that release of the library,
# both kept in a venv under ~/.cache/quilt-test (installed when missing).
# A small driver imports the program and counts a failed test instead of
# letting it stop the run (its main() exits at the first failure). Needs
# python3 with venv, and PyPI the first time. QUILT_BIN names a quilt
# binary to run instead of building one (make test passes bin/quilt).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
minio_py_version=7.2.20
venv=${QUILT_MINIO_PY_VENV:-$HOME/.cache/quilt-test/minio-py-$minio_py_version}
work=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

quilt=${QUILT_BIN:+$(realpath "$QUILT_BIN")}
if [ -z "$quilt" ]; then
	(cd "$root" && go build -o "$work/quilt" ./cmd/quilt)
	quilt=$work/quilt
fi

program=$venv/functional/tests.py
if ! [ -f "$program" ] || ! "$venv/bin/python" -c 'import minio' 2>/dev/null; then
	echo "installing minio $minio_py_version and its functional tests in $venv"
	python3 -m venv "$venv"
	"$venv/bin/pip" install -q "minio==$minio_py_version"
	"$venv/bin/pip" download -q "minio==$minio_py_version" --no-binary :all: --no-deps -d "$work/sdist"
	tar xzf "$work/sdist/minio-$minio_py_version.tar.gz" -C "$work/sdist"
	src="$work/sdist/minio-$minio_py_version/tests/functional/tests.py"
	[ -f "$src" ] || { echo "no tests/functional/tests.py in minio $minio_py_version's sdist"; exit 1; }
	mkdir -p "$venv/functional"
	cp "$src" "$program.tmp" && mv "$program.tmp" "$program"
fi

# Over HTTPS, as SSE-C needs: the program and the library trust the
# gateway's own CA through SSL_CERT_FILE.
QUILT_HOME="$work/home" "$quilt" up --port 0 --no-fsync --s3-tls on --swift off --sftp off --webdav off --nbd off >"$work/up.log" 2>&1 &
pid=$!
env="$work/home/grid/gateway/s3.env"
for _ in $(seq 1 120); do [ -s "$env" ] && break; sleep 0.5; done
[ -s "$env" ] || { cat "$work/up.log"; echo "quilt up did not start"; exit 1; }
# shellcheck disable=SC1090
. "$env"
mkdir "$work/run"
start=$SECONDS
(cd "$work/run" && SERVER_ENDPOINT=${AWS_ENDPOINT_URL#https://} ACCESS_KEY=$AWS_ACCESS_KEY_ID SECRET_KEY=$AWS_SECRET_ACCESS_KEY \
	SSL_CERT_FILE=$AWS_CA_BUNDLE ENABLE_HTTPS=1 MINT_MODE=full \
	timeout 1800 "$venv/bin/python" - "$program" >"$work/results.json" 2>"$work/stderr" <<'PY'
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
) || echo "(the program exited with status $?)"
echo "minio-py $minio_py_version's functional tests ran in $((SECONDS - start)) s"
# Each test (or each of its runs with a customer key) prints one line;
# a run counts as FAIL if it failed, NA if it was answered 501, else PASS.
python3 "$root/test/minio-results.py" --prefix "minio-py:" --rank PASS,NA,FAIL --why message,alert,error \
	--expected "$root/test/s3-minio-py-functional.expected" "$work/results.json" || {
	echo "--- the program's stderr (last lines)"
	tail -20 "$work/stderr"
	exit 1
}
