# shellcheck shell=bash
# Sourced by run.sh and ../every-door.sh: installs what driving the web
# app in headless Chromium needs, if missing — Debian's chromium, nodejs
# and npm (apt), and playwright-core at package.json's pin (npm ci in
# this directory) — and exits if it cannot: nothing is skipped.
browser_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
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
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
	echo "playwright-core needs Node.js 20 or later; node is $(node --version)" >&2
	exit 1
fi
(
	cd "$browser_dir"
	want=$(node -p 'require("./package.json").dependencies["playwright-core"]')
	have=$(node -p 'require("./node_modules/playwright-core/package.json").version' 2>/dev/null || true)
	if [ "$have" != "$want" ]; then
		echo "installing playwright-core $want"
		npm ci --no-audit --no-fund --silent
	fi
)
