#!/usr/bin/env bash
# minio-go's functional test program (functional_tests.go, as MinIO's
# "mint" runs it) against `quilt up`, and a count of its tests by result.
# The program is taken from the released module (the version below), run
# in a scratch module; it is not part of `make test` (docs/s3.md says what
# passes and why the rest does not). Needs Go and the module proxy.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
minio_go_version=v7.4.1
work=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

(cd "$root" && go build -o "$work/quilt" ./cmd/quilt)
mkdir "$work/mod"
cd "$work/mod"
go mod init minio-functional >/dev/null 2>&1
go get "github.com/minio/minio-go/v7@$minio_go_version" github.com/dustin/go-humanize github.com/google/uuid >/dev/null 2>&1
src=$(go list -m -f '{{.Dir}}' "github.com/minio/minio-go/v7")/functional_tests.go
# The program is package main under the build tag "mint" in the module's
# root; in a module of its own it builds without the tag.
sed '/^\/\/go:build mint$/d' "$src" >main.go
go mod tidy >/dev/null 2>&1

# Over HTTPS, as SSE-C needs: the program trusts the gateway's own CA
# (Go reads SSL_CERT_FILE).
QUILT_HOME="$work/home" "$work/quilt" up --port 0 --no-fsync --s3-tls on --swift off --sftp off --webdav off --nbd off >"$work/up.log" 2>&1 &
pid=$!
env="$work/home/grid/gateway/s3.env"
for _ in $(seq 1 120); do [ -s "$env" ] && break; sleep 0.5; done
[ -s "$env" ] || { cat "$work/up.log"; echo "quilt up did not start"; exit 1; }
# shellcheck disable=SC1090
. "$env"
SERVER_ENDPOINT=${AWS_ENDPOINT_URL#https://} ACCESS_KEY=$AWS_ACCESS_KEY_ID SECRET_KEY=$AWS_SECRET_ACCESS_KEY \
	SSL_CERT_FILE=$AWS_CA_BUNDLE ENABLE_HTTPS=1 ENABLE_KMS=0 MINT_MODE=full RUN_ON_FAIL=1 timeout 1200 go run . >"$work/results.json" 2>"$work/stderr" || true
# Each test logs lines with a status; a test counts as FAIL if any line
# says so, else PASS if one does, else NA (the server answered 501).
python3 - "$work/results.json" <<'PY'
import collections, json, sys
rank = {"NA": 1, "PASS": 2, "FAIL": 3}
tests = {}
for line in open(sys.argv[1]):
    try:
        j = json.loads(line)
    except ValueError:
        continue
    name, st = j.get("name", "").removeprefix("minio-go: "), j.get("status")
    if st in rank and rank[st] > rank[tests.get(name, ("NA", ""))[0]] or name not in tests:
        tests[name] = (st, (j.get("error") or j.get("message") or j.get("alert") or "")[:100])
for name, (st, why) in tests.items():
    print(f"{st:4} {name}" + (f": {why}" if st != "PASS" else ""))
c = collections.Counter(st for st, _ in tests.values())
print(f"\n{len(tests)} tests: {c['PASS']} pass, {c['FAIL']} fail, {c['NA']} not applicable (501)")
PY
