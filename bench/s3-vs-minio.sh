#!/usr/bin/env bash
# The S3 gateway beside MinIO, one run, one load program (bench/s3load):
# a fresh grid of 10 `quilt node` processes and a `quilt gateway` process
# (in a temporary directory), then MinIO in erasure mode on 4 folders of
# the same disk. Each system's server CPU per operation is measured too
# (s3load -pid; for Quilt the eleven processes together).
#
#   ./bench/s3-vs-minio.sh                  # every case
#   ONLY=4K ./bench/s3-vs-minio.sh          # only 4 KiB objects (also 1M, 16M, 128M)
#   GRID=up ./bench/s3-vs-minio.sh          # the grid as one `quilt up` process instead
#   MINIO=/path/to/minio ./bench/s3-vs-minio.sh
#   QUILT_BIN=/tmp/quilt-a SKIP_MINIO=1 ONLY=4K ./bench/s3-vs-minio.sh
#                                           # a given quilt binary, no MinIO
#
# MinIO is built with `go install github.com/minio/minio@latest` unless
# MINIO names a binary (the build takes several minutes on two cores).
# Everything listens on 127.0.0.1; every case is bounded in count and time.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/quilt}
TIME=${TIME:-15s}
if [ -n "${QUILT_BIN:-}" ]; then
	BIN=$QUILT_BIN # a binary built before, for an A/B of two commits
else
	go build -o "$BIN" ./cmd/quilt
fi
work=$(mktemp -d /var/tmp/s3-vs-minio.XXXXXX)
go build -o "$work/s3load" ./bench/s3load
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
only=()
[ -n "${ONLY:-}" ] && only=(-only "$ONLY")

# Quilt.
export QUILT_HOME="$work/home"
env=""
if [ "${GRID:-procs}" = up ]; then
	"$BIN" up --nodes 10 --port 0 --dir "$work/grid" >"$work/up.log" 2>&1 &
	pids+=($!)
	env="$work/grid/gateway/s3.env"
else
	# Ten node processes, as a grid of ten machines would run them, and
	# the gateway in a process of its own.
	"$BIN" node --data "$work/n1" --listen 127.0.0.1:0 >"$work/n1.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 300); do [ -s "$work/n1/invite" ] && break; sleep 0.1; done
	[ -s "$work/n1/invite" ] || { cat "$work/n1.log"; echo "the first node did not start" >&2; exit 1; }
	invite=$(cat "$work/n1/invite")
	for i in $(seq 2 10); do
		"$BIN" node --data "$work/n$i" --listen 127.0.0.1:0 --join "$invite" >"$work/n$i.log" 2>&1 &
		pids+=($!)
	done
	alive=0
	for _ in $(seq 300); do
		alive=$("$BIN" nodes --grid "$invite" 2>/dev/null | grep -c ' alive ' || true)
		[ "$alive" = 10 ] && break
		sleep 0.2
	done
	[ "$alive" = 10 ] || { echo "only $alive of 10 nodes alive" >&2; exit 1; }
	"$BIN" gateway --grid "$invite" --s3 127.0.0.1:0 --dir "$work/gateway" >"$work/gateway.log" 2>&1 &
	pids+=($!)
	env="$work/gateway/s3.env"
fi
for _ in $(seq 300); do [ -s "$env" ] && break; sleep 0.1; done
[ -s "$env" ] || { cat "$work"/*.log; echo "grid did not start" >&2; exit 1; }
(
	. "$env"
	"$work/s3load" -label Quilt -time "$TIME" -pid "$(IFS=,; echo "${pids[*]}")" "${only[@]}"
)
for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
for p in "${pids[@]}"; do wait "$p" || true; done
pids=()

# MinIO.
if [ "${SKIP_MINIO:-0}" = 1 ]; then
	exit 0
fi
minio=${MINIO:-}
if [ -z "$minio" ]; then
	GOBIN="$work" go install github.com/minio/minio@latest
	minio="$work/minio"
fi
mkdir -p "$work"/m{1,2,3,4}
MINIO_CI_CD=1 MINIO_ROOT_USER=s3load MINIO_ROOT_PASSWORD=s3load-secret-key \
	"$minio" server "$work"/m{1...4} --address 127.0.0.1:9123 --console-address 127.0.0.1:9124 >"$work/minio.log" 2>&1 &
mp=$!
pids+=("$mp")
for _ in $(seq 300); do curl -sf http://127.0.0.1:9123/minio/health/ready >/dev/null && break; sleep 0.1; done
"$work/s3load" -endpoint http://127.0.0.1:9123 -key s3load -secret s3load-secret-key -label MinIO -time "$TIME" -pid "$mp" "${only[@]}"
