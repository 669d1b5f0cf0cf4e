#!/usr/bin/env bash
# quilt cp against `quilt up` (10 nodes, the gateway, WebDAV, on
# 127.0.0.1), beside the other doors to the same files: a tree copied up
# with `quilt cp -r` (endpoint and keys from s3.env, no flags) and read
# back with awscli and over WebDAV, identical; a file written over WebDAV
# and one awscli uploaded in parts, read with quilt cp; a second copy of
# the tree skipping every file; an upload stopped by SIGINT part way and
# resumed; an object whose sha256 metadata lies refused with nothing
# written; an account's key whose drive: is its home. Needs the pinned
# awscli of test/s3-clients.sh (installed in the same venv when missing).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
say() { printf '\n== %s\n' "$*"; }
fail() { echo "FAIL: $*"; exit 1; }

awscli_version=1.46.3 boto3_version=1.44.8 botocore_version=1.44.8 s3cmd_version=2.4.0
venv=${QUILT_CLIENTS_VENV:-$HOME/.cache/quilt-test/s3-clients-awscli$awscli_version-boto3$boto3_version-s3cmd$s3cmd_version}
if ! [ -x "$venv/bin/aws" ]; then
	say "installing awscli $awscli_version in $venv"
	python3 -m venv "$venv"
	"$venv/bin/pip" install -q "awscli==$awscli_version" "boto3==$boto3_version" "botocore==$botocore_version" "s3cmd==$s3cmd_version"
fi
aws="$venv/bin/aws"

say "starting quilt up"
# QUILT_BIN: a quilt binary built before (make test passes its own).
if [ -n "${QUILT_BIN:-}" ]; then cp "$QUILT_BIN" "$work/quilt"; else
	(cd "$root" && go build -o "$work/quilt" ./cmd/quilt)
fi
export QUILT_HOME="$work/home" XDG_CACHE_HOME="$work/cache"
unset AWS_ENDPOINT_URL AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_CA_BUNDLE QUILT_DRIVE || true
"$work/quilt" up --port 0 --no-fsync >"$work/up.log" 2>&1 &
pid=$!
for f in s3.env webdav.env; do
	for _ in $(seq 1 120); do [ -s "$QUILT_HOME/grid/gateway/$f" ] && break; sleep 0.5; done
	[ -s "$QUILT_HOME/grid/gateway/$f" ] || { cat "$work/up.log"; fail "quilt up did not start"; }
done
# shellcheck disable=SC1090
. "$QUILT_HOME/grid/gateway/webdav.env"
dav="$QUILT_WEBDAV_URL$QUILT_WEBDAV_USER"
cp="$work/quilt cp"
# awscli with s3.env, in a subshell: quilt cp must find s3.env by itself.
awsq() { (set -a; . "$QUILT_HOME/grid/gateway/s3.env"; export AWS_PAGER=; "$aws" "$@"); }

say "a tree up with quilt cp -r, down with awscli and over WebDAV"
mkdir -p "$work/tree/a/b" "$work/tree/c"
for i in $(seq 1 40); do head -c $((i * 1000)) /dev/urandom >"$work/tree/a/f$i"; done
: >"$work/tree/empty"
printf 'named with spaces\n' >"$work/tree/c/with space.txt"
head -c 40M /dev/urandom >"$work/tree/a/b/big.bin"
$cp -r --part-size 8MiB "$work/tree" drive:tree/ 2>"$work/up1.err" || { cat "$work/up1.err"; fail "quilt cp -r up"; }
grep -q "^43 copied, 0 identical skipped" "$work/up1.err" || { cat "$work/up1.err"; fail "summary of the upload"; }
awsq s3 cp --recursive --only-show-errors s3://files/tree/ "$work/aws-down"
diff -r "$work/tree" "$work/aws-down" || fail "awscli reads another tree"
curl -sf -u "$QUILT_WEBDAV_USER:$QUILT_WEBDAV_PASSWORD" "$dav/tree/a/b/big.bin" -o "$work/dav-big.bin"
cmp "$work/tree/a/b/big.bin" "$work/dav-big.bin" || fail "WebDAV reads another big.bin"
$cp -r drive:tree/ "$work/cp-down" 2>/dev/null
diff -r "$work/tree" "$work/cp-down" || fail "quilt cp -r down differs"

say "again: every file is already there"
$cp -r "$work/tree" drive:tree/ 2>"$work/up2.err"
grep -q "^0 copied, 43 identical skipped" "$work/up2.err" || { cat "$work/up2.err"; fail "second upload"; }

say "a file from WebDAV, one from awscli in parts, read with quilt cp"
printf 'written over WebDAV\n' >"$work/dav.txt"
curl -sf -o /dev/null -u "$QUILT_WEBDAV_USER:$QUILT_WEBDAV_PASSWORD" -T "$work/dav.txt" "$dav/dav.txt"
$cp drive:dav.txt "$work/dav-back.txt" 2>/dev/null
cmp "$work/dav.txt" "$work/dav-back.txt" || fail "WebDAV file through quilt cp"
head -c 20M /dev/urandom >"$work/aws.bin"
awsq s3 cp --only-show-errors "$work/aws.bin" s3://files/aws.bin
$cp -v s3://files/aws.bin "$work/aws-back.bin" 2>"$work/aws.err"
cmp "$work/aws.bin" "$work/aws-back.bin" || fail "awscli's multipart object through quilt cp"
grep -q "aws-back.bin: \(verified against\|s3://files/aws.bin has no SHA-256\)" "$work/aws.err" || { cat "$work/aws.err"; fail "-v did not say how it checked"; }

say "an upload interrupted by SIGINT, then resumed"
head -c 64M /dev/urandom >"$work/resume.bin"
$cp -v --part-size 8MiB --parallel 2 --bwlimit 8M "$work/resume.bin" drive:resume.bin 2>"$work/int.err" &
cpid=$!
for _ in $(seq 1 600); do
	grep -qs '"n": ' "$work"/cache/quilt/cp/up-*.json && break
	sleep 0.1
done
kill -INT $cpid
rc=0; wait $cpid || rc=$?
[ $rc = 1 ] || { cat "$work/int.err"; fail "interrupted cp exited $rc, want 1"; }
grep -q "interrupted: run the same command again" "$work/int.err" || { cat "$work/int.err"; fail "no interrupted message"; }
$cp -v --part-size 8MiB "$work/resume.bin" drive:resume.bin 2>"$work/res.err" || { cat "$work/res.err"; fail "resumed cp"; }
grep -q "resuming upload .*: [1-9][0-9]* of 8 parts already sent" "$work/res.err" || { cat "$work/res.err"; fail "the second run did not resume"; }
awsq s3 cp --only-show-errors s3://files/resume.bin "$work/resume-back.bin"
cmp "$work/resume.bin" "$work/resume-back.bin" || fail "resumed upload differs"
ls "$work"/cache/quilt/cp/ | grep -q . && fail "checkpoints left: $(ls "$work"/cache/quilt/cp/)"

say "an object whose sha256 metadata lies"
awsq s3 cp --only-show-errors "$work/dav.txt" s3://files/lie.txt --metadata sha256=0000000000000000000000000000000000000000000000000000000000000000
rc=0; $cp drive:lie.txt "$work/lie.txt" 2>"$work/lie.err" || rc=$?
[ $rc = 1 ] && grep -q "checksum mismatch" "$work/lie.err" || { cat "$work/lie.err"; fail "a lying object was not refused ($rc)"; }
ls "$work"/lie.txt* 2>/dev/null && fail "the refused download left files"

say "an account's key: drive: is its home"
"$work/quilt" user add alice --password 'a long password for alice' >"$work/alice.out" 2>&1
read -r id secret <"$work/alice.out"
ep=$(sed -n 's/^export AWS_ENDPOINT_URL=//p' "$QUILT_HOME/grid/gateway/s3.env")
$cp --endpoint "$ep" --access-key "$id" --secret-key "$secret" "$work/dav.txt" drive:notes/x.txt 2>/dev/null
curl -sf -u "alice:a long password for alice" "${QUILT_WEBDAV_URL}alice/notes/x.txt" -o "$work/alice-x.txt"
cmp "$work/dav.txt" "$work/alice-x.txt" || fail "alice's file over WebDAV"
awsq s3 ls s3://home-alice/notes/x.txt >/dev/null || fail "not in home-alice"

say "quilt cp: all passed"
