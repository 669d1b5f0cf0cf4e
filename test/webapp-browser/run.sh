#!/usr/bin/env bash
# Browser test of the web app (browser.mjs): headless Chromium, driven by
# Playwright (playwright-core, pinned in package.json), against `quilt up
# --port 0 --no-fsync` on 127.0.0.1. Adds a second user, bob, to the
# gateway's webdav-users file (a bcrypt line by htpasswd, and his bucket
# made through S3) so that the script can check that one user cannot
# reach another's files by changing a URL. Installs what it needs
# (Debian's chromium, apache2-utils for htpasswd; nodejs and npm if
# missing; playwright-core with npm ci in this directory) and fails,
# never skips, if it cannot.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
say() { printf '\n== %s\n' "$*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_install() {
	as_root apt-get install -y -qq "$@" >/dev/null ||
		{ as_root apt-get update -qq && as_root apt-get install -y -qq "$@" >/dev/null; }
}
[ -x /usr/bin/chromium ] || { echo "installing chromium"; apt_install chromium; }
command -v htpasswd >/dev/null || { echo "installing apache2-utils"; apt_install apache2-utils; }
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	echo "installing nodejs and npm"
	apt_install nodejs npm
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
	echo "playwright-core needs Node.js 20 or later; node is $(node --version)" >&2
	exit 1
fi
cd "$here"
want=$(node -p 'require("./package.json").dependencies["playwright-core"]')
have=$(node -p 'require("./node_modules/playwright-core/package.json").version' 2>/dev/null || true)
if [ "$have" != "$want" ]; then
	echo "installing playwright-core $want"
	npm ci --no-audit --no-fund --silent
fi

say "starting quilt up"
(cd "$root" && go build -o "$work/quilt" ./cmd/quilt)
QUILT_HOME="$work/home" "$work/quilt" up --port 0 --no-fsync >"$work/up.log" 2>&1 &
pid=$!
gwdir="$work/home/grid/gateway"
for _ in $(seq 1 120); do [ -s "$gwdir/webdav.env" ] && [ -s "$gwdir/s3.env" ] && break; sleep 0.5; done
[ -s "$gwdir/webdav.env" ] || { cat "$work/up.log"; echo "quilt up did not start"; exit 1; }
# shellcheck disable=SC1091
. "$gwdir/webdav.env"
# shellcheck disable=SC1091
. "$gwdir/s3.env"
: "${QUILT_WEB_URL:?webdav.env names no web app}"
# quilt up prints its addresses after it has written the env files.
for _ in $(seq 1 60); do grep -q "Web app: $QUILT_WEB_URL" "$work/up.log" && break; sleep 0.5; done
grep -q "Web app: $QUILT_WEB_URL" "$work/up.log" || { cat "$work/up.log"; echo "quilt up did not print the web app's URL"; exit 1; }

say "adding user bob"
code=$(curl -s -o "$work/mb.out" -w '%{http_code}' -X PUT -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" --aws-sigv4 "aws:amz:${AWS_DEFAULT_REGION}:s3" \
	--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "$AWS_ENDPOINT_URL/bob-files")
[ "$code" = 200 ] || { cat "$work/mb.out"; echo "making bob's bucket: HTTP $code"; exit 1; }
bobpw=bob-$RANDOM-$RANDOM
echo "bob bob-files password $(htpasswd -nbB "" "$bobpw" | tr -d ':\n')" >>"$gwdir/webdav-users"

say "browser"
QUILT_WEB_URL=$QUILT_WEB_URL QUILT_USER=$QUILT_WEBDAV_USER QUILT_PASSWORD=$QUILT_WEBDAV_PASSWORD \
	QUILT_BOB_PASSWORD=$bobpw QUILT_WORK=$work timeout 240 node browser.mjs
