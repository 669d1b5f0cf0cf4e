#!/usr/bin/env bash
# Browser test of the S3 gateway (browser.mjs): headless Chromium, driven
# by Playwright (playwright-core, pinned in package.json), uploads with
# presigned POST policies and checks CORS. Run by test/s3-clients.sh
# against its `quilt up`, with the gateway's s3.env loaded and
# QUILT_PYTHON naming a Python that has boto3. Installs what it needs
# (Debian's chromium; nodejs and npm if missing; playwright-core with
# npm ci in this directory) and fails, never skips, if it cannot.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${AWS_ENDPOINT_URL:?set by the gateway s3.env: run test/s3-clients.sh}"
: "${QUILT_PYTHON:?a Python with boto3}"
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_install() {
	as_root apt-get install -y -qq "$@" >/dev/null ||
		{ as_root apt-get update -qq && as_root apt-get install -y -qq "$@" >/dev/null; }
}
[ -x /usr/bin/chromium ] || { echo "installing chromium"; apt_install chromium; }
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
timeout 90 node browser.mjs
