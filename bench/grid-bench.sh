#!/usr/bin/env bash
# Starts a fresh 10-node grid (quilt up, in a temporary directory), runs
# `quilt bench` on it, and stops it. Used by `make bench`.
#   SIZES="16MiB 128MiB"  COUNT=3  ./bench/grid-bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/quilt}
[ -x "$BIN" ] || go build -o "$BIN" ./cmd/quilt
work=$(mktemp -d)
export QUILT_HOME="$work/home"
"$BIN" up --nodes 10 --port 0 --dir "$work/grid" >"$work/up.log" 2>&1 &
up=$!
trap 'kill $up 2>/dev/null; wait $up 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 300); do [ -s "$work/grid/invite" ] && break; sleep 0.1; done
[ -s "$work/grid/invite" ] || { cat "$work/up.log"; echo "grid did not start" >&2; exit 1; }
for size in ${SIZES:-16MiB 128MiB}; do
	"$BIN" bench --size "$size" --count "${COUNT:-3}"
done
