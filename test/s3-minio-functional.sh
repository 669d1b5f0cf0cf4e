#!/usr/bin/env bash
# minio-go's functional test program (functional_tests.go, as MinIO's
# "mint" runs it, in its full mode) against `quilt up`: one line per test
# by result, a count, and a check of every result against
# test/s3-minio-functional.expected (the tests expected not to pass, and
# why). Fails if a result or the number of tests differs from the list.
# Part of `make test`.
#
# The program is taken from the released module (the version below) and
# built once, in a scratch module under ~/.cache/quilt-test (the built
# program is kept there: a later run starts at once). Needs Go and the
# module proxy the first time. QUILT_BIN names a quilt binary to run
# instead of building one (make test passes bin/quilt).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
minio_go_version=v7.4.1
cache=${QUILT_MINIO_GO_DIR:-$HOME/.cache/quilt-test/minio-go-$minio_go_version}
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

program=$cache/minio-functional
if ! [ -x "$program" ]; then
	echo "building minio-go $minio_go_version's functional tests in $cache"
	mkdir -p "$cache"
	mod=$(mktemp -d "$cache/build.XXXXXX")
	(
		cd "$mod"
		go mod init minio-functional >/dev/null 2>&1
		go get "github.com/minio/minio-go/v7@$minio_go_version" github.com/dustin/go-humanize github.com/google/uuid >/dev/null 2>&1
		src=$(go list -m -f '{{.Dir}}' "github.com/minio/minio-go/v7")/functional_tests.go
		# The program is package main under the build tag "mint" in the
		# module's root; in a module of its own it builds without the tag.
		sed '/^\/\/go:build mint$/d' "$src" >main.go
		go mod tidy >/dev/null 2>&1
		go build -o minio-functional .
	)
	mv "$mod/minio-functional" "$program"
	rm -rf "$mod"
fi

# Over HTTPS, as SSE-C needs: the program trusts the gateway's own CA
# (Go reads SSL_CERT_FILE).
QUILT_HOME="$work/home" "$quilt" up --port 0 --no-fsync --s3-tls on --swift off --sftp off --webdav off --nbd off >"$work/up.log" 2>&1 &
pid=$!
env="$work/home/grid/gateway/s3.env"
for _ in $(seq 1 120); do [ -s "$env" ] && break; sleep 0.5; done
[ -s "$env" ] || { cat "$work/up.log"; echo "quilt up did not start"; exit 1; }
# shellcheck disable=SC1090
. "$env"
# RUN_ON_FAIL: a failed test does not stop the program. Its exit status
# says nothing the results do not: the check below decides.
start=$SECONDS
(cd "$work" && SERVER_ENDPOINT=${AWS_ENDPOINT_URL#https://} ACCESS_KEY=$AWS_ACCESS_KEY_ID SECRET_KEY=$AWS_SECRET_ACCESS_KEY \
	SSL_CERT_FILE=$AWS_CA_BUNDLE ENABLE_HTTPS=1 ENABLE_KMS=0 MINT_MODE=full RUN_ON_FAIL=1 \
	timeout 1200 "$program" >"$work/results.json" 2>"$work/stderr") || echo "(the program exited with status $?)"
echo "minio-go $minio_go_version's functional tests ran in $((SECONDS - start)) s"
# Each test logs lines with a status; a test counts as FAIL if any line
# says so, else PASS if one does, else NA (the server answered 501).
python3 "$root/test/minio-results.py" --prefix "minio-go: " --rank NA,PASS,FAIL \
	--expected "$root/test/s3-minio-functional.expected" "$work/results.json" || {
	echo "--- the program's stderr (last lines)"
	tail -20 "$work/stderr"
	exit 1
}
