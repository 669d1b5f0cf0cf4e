#!/usr/bin/env bash
# The same file through every door: against `quilt up --port 0
# --no-fsync` on 127.0.0.1, an account bob made with `quilt user add`
# uploads a file in the web app (headless Chromium driven by Playwright:
# test/webapp-browser/upload.mjs), and the file is then listed over
# WebDAV (PROPFIND with bob's password) and read over WebDAV (GET), with
# awscli (bob's S3 key, as `quilt user add` printed it, on his home
# bucket home-bob) and with `quilt cp`; every copy must be byte for byte
# the file (SHA-256). The other way round, a file awscli writes with
# bob's key is downloaded in the browser, identical. The file is 9 MiB and a little: two of the web
# app's 8 MiB upload chunks, and past awscli's 8 MiB multipart threshold,
# so awscli reads it in ranges. bob's key must not reach the admin's
# bucket. Installs what it needs (test/webapp-browser/deps.sh; awscli at
# test/s3-clients.sh's pins in that script's venv) and fails, never
# skips, if it cannot.
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
fail() { echo "every door: $*" >&2; exit 1; }

# shellcheck source=webapp-browser/deps.sh
. "$root/test/webapp-browser/deps.sh"
# awscli as test/s3-clients.sh pins and installs it, in the same venv.
awscli_version=1.46.3 boto3_version=1.44.8 botocore_version=1.44.8 s3cmd_version=2.4.0
venv=${QUILT_CLIENTS_VENV:-$HOME/.cache/quilt-test/s3-clients-awscli$awscli_version-boto3$boto3_version-s3cmd$s3cmd_version}
if ! [ -x "$venv/bin/aws" ] || ! [ -x "$venv/bin/s3cmd" ] || ! "$venv/bin/python" -c 'import boto3' 2>/dev/null; then
	say "installing awscli $awscli_version, boto3 $boto3_version and s3cmd $s3cmd_version in $venv"
	python3 -m venv "$venv"
	"$venv/bin/pip" install -q "awscli==$awscli_version" "boto3==$boto3_version" "botocore==$botocore_version" "s3cmd==$s3cmd_version"
fi
aws="$venv/bin/aws"

say "starting quilt up"
# QUILT_BIN: a quilt binary built before (make test passes its own).
if [ -n "${QUILT_BIN:-}" ]; then cp "$QUILT_BIN" "$work/quilt"; else
	(cd "$root" && go build -o "$work/quilt" ./cmd/quilt)
fi
QUILT_HOME="$work/home" "$work/quilt" up --port 0 --no-fsync >"$work/up.log" 2>&1 &
pid=$!
gwdir="$work/home/grid/gateway"
for _ in $(seq 1 120); do [ -s "$gwdir/webdav.env" ] && [ -s "$gwdir/s3.env" ] && grep -q 'Web app: ' "$work/up.log" && break; sleep 0.5; done
[ -s "$gwdir/webdav.env" ] && [ -s "$gwdir/s3.env" ] || { cat "$work/up.log"; fail "quilt up did not start"; }
# shellcheck disable=SC1091
. "$gwdir/webdav.env"
# shellcheck disable=SC1091
. "$gwdir/s3.env"
: "${QUILT_WEB_URL:?webdav.env names no web app}" "${AWS_ENDPOINT_URL:?s3.env names no endpoint}"

say "quilt user add bob"
bobpw=bob-$RANDOM-$RANDOM-password
QUILT_HOME="$work/home" QUILT_GRID= "$work/quilt" user add bob --password "$bobpw" >"$work/bob.key" 2>"$work/bob.err" ||
	{ cat "$work/bob.err"; fail "quilt user add bob failed"; }
read -r bob_key bob_secret <"$work/bob.key"
[ -n "$bob_key" ] && [ -n "${bob_secret:-}" ] || { cat "$work/bob.key" "$work/bob.err"; fail "quilt user add printed no S3 key"; }
# The running gateway has the account once its registry has synced.
for _ in $(seq 1 60); do
	code=$(curl -s -o /dev/null -w '%{http_code}' -u "bob:$bobpw" -X PROPFIND -H 'Depth: 0' "${QUILT_WEBDAV_URL}bob/")
	[ "$code" = 207 ] && break
	sleep 0.5
done
[ "$code" = 207 ] || fail "bob's WebDAV login: HTTP $code"

name="every door.bin"
size=$((9 * 1024 * 1024 + 3))
head -c "$size" /dev/urandom >"$work/$name"
want=$(sha256sum <"$work/$name" | cut -d' ' -f1)

# bob's key, not the admin's of s3.env.
export AWS_ENDPOINT_URL AWS_DEFAULT_REGION AWS_ACCESS_KEY_ID=$bob_key AWS_SECRET_ACCESS_KEY=$bob_secret AWS_PAGER=
unset AWS_CA_BUNDLE REQUESTS_CA_BUNDLE

say "awscli with bob's key writes from awscli.bin"
head -c 100003 /dev/urandom >"$work/from awscli.bin"
back_want=$(sha256sum <"$work/from awscli.bin" | cut -d' ' -f1)
"$aws" s3 cp "$work/from awscli.bin" "s3://home-bob/from awscli.bin" --only-show-errors

say "the browser: bob reads from awscli.bin, uploads door/$name"
(cd "$root/test/webapp-browser" && QUILT_WEB_URL=$QUILT_WEB_URL QUILT_USER=bob QUILT_PASSWORD=$bobpw \
	QUILT_FOLDER=door QUILT_FILE="$work/$name" QUILT_READ="from awscli.bin" timeout 180 node upload.mjs) | tee "$work/browser.log"
grep -qx "read from awscli.bin $back_want" "$work/browser.log" || fail "the browser's download of from awscli.bin is not the file awscli wrote ($back_want)"

say "WebDAV: PROPFIND lists it, GET reads it"
code=$(curl -s -o "$work/propfind.xml" -w '%{http_code}' -u "bob:$bobpw" -X PROPFIND -H 'Depth: 1' "${QUILT_WEBDAV_URL}bob/door/")
[ "$code" = 207 ] || { cat "$work/propfind.xml"; fail "PROPFIND door/: HTTP $code"; }
listed=$(python3 - "$work/propfind.xml" <<'PY'
import sys, urllib.parse, xml.etree.ElementTree as ET
ns = {"d": "DAV:"}
for r in ET.parse(sys.argv[1]).getroot().findall("d:response", ns):
    href = urllib.parse.unquote(r.findtext("d:href", namespaces=ns))
    length = r.findtext(".//d:getcontentlength", namespaces=ns)
    if not href.endswith("/"):
        print(href.rsplit("/", 1)[1] + "\t" + (length or "-"))
PY
)
[ "$listed" = "$name	$size" ] || { cat "$work/propfind.xml"; fail "PROPFIND door/ lists [$listed], not [$name	$size]"; }
echo "listed: $listed"
curl -fsS -u "bob:$bobpw" -o "$work/webdav.copy" "${QUILT_WEBDAV_URL}bob/door/every%20door.bin" || fail "WebDAV GET"
# Another user's password does not list bob's folder.
code=$(curl -s -o /dev/null -w '%{http_code}' -u "$QUILT_WEBDAV_USER:$QUILT_WEBDAV_PASSWORD" -X PROPFIND -H 'Depth: 1' "${QUILT_WEBDAV_URL}bob/door/")
[ "$code" = 403 ] || fail "the admin's login listed bob's WebDAV folder: HTTP $code"

say "awscli with bob's key reads it"
out=$("$aws" s3 ls s3://home-bob/door/)
grep -q " $size $name\$" <<<"$out" || { echo "$out"; fail "aws s3 ls does not list $name with $size bytes"; }
"$aws" s3 cp "s3://home-bob/door/$name" "$work/s3.copy" --only-show-errors
if out=$("$aws" s3 ls s3://files/ 2>&1); then
	echo "$out"
	fail "bob's key listed the admin's bucket"
fi
grep -q AccessDenied <<<"$out" || { echo "$out"; fail "bob's key on the admin's bucket: not AccessDenied"; }

say "quilt cp with bob's key reads it from his drive"
# The endpoint and bob's key from the environment (not s3.env's admin
# key); drive: is the one bucket his key reaches, home-bob.
QUILT_HOME="$work/home" "$work/quilt" cp -v "drive:door/$name" "$work/cp.copy"
copies=(webdav.copy s3.copy cp.copy)

say "every copy is the file"
for c in "${copies[@]}"; do
	got=$(sha256sum <"$work/$c" | cut -d' ' -f1)
	[ "$got" = "$want" ] || fail "$c: SHA-256 $got, not the uploaded file's $want"
	echo "$c: $got"
done
echo "every door: the same file ($size bytes, SHA-256 $want) through the browser, WebDAV, awscli and quilt cp; and awscli's file read in the browser"
