#!/usr/bin/env bash
# Browser test of the web app (browser.mjs): headless Chromium, driven by
# Playwright (playwright-core, pinned in package.json), against `quilt up
# --port 0 --no-fsync` on 127.0.0.1. Adds a second account, bob, with
# `quilt user add bob --password ...` against the running grid (his home
# bucket home-bob), so that the script can check that one user cannot
# reach another's files by changing a URL; the first admin, quilt, does
# the rest (uploads, share links, the grid page). Makes the group crew
# with bob in it (`quilt user group add` and `join`), for a share with a
# group. Installs what it needs
# (Debian's chromium; nodejs and npm if missing; playwright-core with npm
# ci in this directory) and fails, never skips, if it cannot.
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
# shellcheck source=deps.sh
. "$here/deps.sh"
cd "$here"

say "starting quilt up"
# QUILT_BIN: a quilt binary built before (make test passes its own).
if [ -n "${QUILT_BIN:-}" ]; then cp "$QUILT_BIN" "$work/quilt"; else
	(cd "$root" && go build -o "$work/quilt" ./cmd/quilt)
fi
QUILT_HOME="$work/home" "$work/quilt" up --port 0 --no-fsync >"$work/up.log" 2>&1 &
pid=$!
gwdir="$work/home/grid/gateway"
for _ in $(seq 1 120); do [ -s "$gwdir/webdav.env" ] && [ -s "$gwdir/s3.env" ] && break; sleep 0.5; done
[ -s "$gwdir/webdav.env" ] || { cat "$work/up.log"; echo "quilt up did not start"; exit 1; }
# shellcheck disable=SC1091
. "$gwdir/webdav.env"
: "${QUILT_WEB_URL:?webdav.env names no web app}"
# quilt up prints its addresses after it has written the env files.
for _ in $(seq 1 60); do grep -q "Web app: $QUILT_WEB_URL" "$work/up.log" && break; sleep 0.5; done
grep -q "Web app: $QUILT_WEB_URL" "$work/up.log" || { cat "$work/up.log"; echo "quilt up did not print the web app's URL"; exit 1; }

say "adding user bob"
bobpw=bob-$RANDOM-$RANDOM-password
QUILT_HOME="$work/home" QUILT_GRID= "$work/quilt" user add bob --password "$bobpw" >"$work/bob.key" 2>"$work/bob.err" ||
	{ cat "$work/bob.err"; echo "quilt user add bob failed"; exit 1; }
grep -q 'user bob made, home bucket home-bob' "$work/bob.err" || { cat "$work/bob.err"; echo "quilt user add bob: no home-bob"; exit 1; }
[ "$(wc -w <"$work/bob.key")" = 2 ] || { cat "$work/bob.key"; echo "quilt user add bob printed no S3 key"; exit 1; }
out=$(QUILT_HOME="$work/home" QUILT_GRID= "$work/quilt" user list)
grep -q '^bob .*home-bob' <<<"$out" || { echo "$out"; echo "quilt user list does not show bob"; exit 1; }
# The running gateway learns of the account through its registry sync:
# bob's WebDAV login works within a few seconds.
for _ in $(seq 1 60); do
	code=$(curl -s -o /dev/null -w '%{http_code}' -u "bob:$bobpw" -X PROPFIND -H 'Depth: 0' "${QUILT_WEBDAV_URL}bob/")
	[ "$code" = 207 ] && break
	sleep 0.5
done
[ "$code" = 207 ] || { echo "bob's WebDAV login: HTTP $code"; exit 1; }

say "adding the group crew, with bob"
QUILT_HOME="$work/home" QUILT_GRID= "$work/quilt" user group add crew
QUILT_HOME="$work/home" QUILT_GRID= "$work/quilt" user group join crew bob
out=$(QUILT_HOME="$work/home" QUILT_GRID= "$work/quilt" user group list)
grep -q '^crew  *bob$' <<<"$out" || { echo "$out"; echo "quilt user group list does not show crew with bob"; exit 1; }

say "browser"
QUILT_WEB_URL=$QUILT_WEB_URL QUILT_USER=$QUILT_WEBDAV_USER QUILT_PASSWORD=$QUILT_WEBDAV_PASSWORD \
	QUILT_BOB_PASSWORD=$bobpw QUILT_WORK=$work timeout 240 node browser.mjs
