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
#   NODE_CPUS=0 ./bench/s3-vs-minio.sh      # nodes may use every core (default 1: see below)
#   REPEAT=3 ./bench/s3-vs-minio.sh         # three rounds, the systems alternating,
#                                           # each on fresh data, 120 s apart (SETTLE);
#                                           # then the median of each cell and MinIO ÷ Quilt
#
# Each node runs with --cpus 1 (NODE_CPUS): ten nodes share this machine's
# cores as ten small machines would, and spend less CPU handing work
# between threads than with every core each (docs/benchmarks.md).
#
# MinIO is built with `go install github.com/minio/minio@latest` unless
# MINIO names a binary (the build takes several minutes on two cores).
# Everything listens on 127.0.0.1; every case is bounded in count and time.
#
# On ext4 without a journal, start it five minutes or more after deleting
# many files on the same disk (an earlier run's clean-up included): new
# files skip over inodes freed that recently, at a cost per file (see
# chattr below, and docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/quilt}
TIME=${TIME:-15s}
NODE_CPUS=${NODE_CPUS:-1}
if [ -n "${QUILT_BIN:-}" ]; then
	BIN=$QUILT_BIN # a binary built before, for an A/B of two commits
else
	go build -o "$BIN" ./cmd/quilt
fi
work=$(mktemp -d /var/tmp/s3-vs-minio.XXXXXX)
# On ext4 without a journal (this project's test machine), a new file
# skips over the inodes of its block group freed in the last one to five
# minutes, looking each one up: after the rm -rf of a round, or of an
# earlier run, creating a file cost 110-190 µs instead of 18 for minutes
# (docs/benchmarks.md), and Quilt, which runs first in a round, paid it.
# The "top directory" flag makes ext4 spread the rounds' directories
# over the disk like top-level ones, into block groups with no freed
# inodes. Elsewhere the flag does nothing, or cannot be set.
chattr +T "$work" 2>/dev/null || true
go build -o "$work/s3load" ./bench/s3load
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
only=()
[ -n "${ONLY:-}" ] && only=(-only "$ONLY")

# quilt_round N: a fresh Quilt grid, s3load against it (its table in
# $work/quilt-N.md and on stdout), the grid stopped.
quilt_round() {
	local r=$1 envf d="$work/quilt-$1"
	export QUILT_HOME="$d/home"
	if [ "${GRID:-procs}" = up ]; then
		"$BIN" up --nodes 10 --port 0 --dir "$d/grid" >"$d.up.log" 2>&1 &
		pids+=($!)
		envf="$d/grid/gateway/s3.env"
	else
		# Ten node processes, as a grid of ten machines would run them, and
		# the gateway in a process of its own.
		mkdir -p "$d"
		local nodeargs=(--listen 127.0.0.1:0 --cpus "$NODE_CPUS")
		"$BIN" node --data "$d/n1" "${nodeargs[@]}" >"$d/n1.log" 2>&1 &
		pids+=($!)
		for _ in $(seq 300); do [ -s "$d/n1/invite" ] && break; sleep 0.1; done
		[ -s "$d/n1/invite" ] || { cat "$d/n1.log"; echo "the first node did not start" >&2; exit 1; }
		local invite alive=0
		invite=$(cat "$d/n1/invite")
		for i in $(seq 2 10); do
			"$BIN" node --data "$d/n$i" "${nodeargs[@]}" --join "$invite" >"$d/n$i.log" 2>&1 &
			pids+=($!)
		done
		for _ in $(seq 300); do
			alive=$("$BIN" nodes --grid "$invite" 2>/dev/null | grep -c ' alive ' || true)
			[ "$alive" = 10 ] && break
			sleep 0.2
		done
		[ "$alive" = 10 ] || { echo "only $alive of 10 nodes alive" >&2; exit 1; }
		"$BIN" gateway --grid "$invite" --s3 127.0.0.1:0 --dir "$d/gateway" >"$d/gateway.log" 2>&1 &
		pids+=($!)
		envf="$d/gateway/s3.env"
	fi
	for _ in $(seq 300); do [ -s "$envf" ] && break; sleep 0.1; done
	[ -s "$envf" ] || { cat "$d"/*.log; echo "grid did not start" >&2; exit 1; }
	(
		. "$envf"
		"$work/s3load" -label Quilt -time "$TIME" -pid "$(IFS=,; echo "${pids[*]}")" "${only[@]}"
	) | tee "$work/quilt-$r.md"
	stop
}

# minio_round N: MinIO on four fresh folders, s3load against it (its
# table in $work/minio-N.md and on stdout), MinIO stopped.
minio_round() {
	local r=$1 d="$work/minio-$1"
	mkdir -p "$d"/m{1,2,3,4}
	MINIO_CI_CD=1 MINIO_ROOT_USER=s3load MINIO_ROOT_PASSWORD=s3load-secret-key \
		"$minio" server "$d"/m{1...4} --address 127.0.0.1:9123 --console-address 127.0.0.1:9124 >"$d.log" 2>&1 &
	local mp=$!
	pids+=("$mp")
	for _ in $(seq 300); do curl -sf http://127.0.0.1:9123/minio/health/ready >/dev/null && break; sleep 0.1; done
	"$work/s3load" -endpoint http://127.0.0.1:9123 -key s3load -secret s3load-secret-key -label MinIO -time "$TIME" -pid "$mp" "${only[@]}" |
		tee "$work/minio-$r.md"
	stop
}

# stop ends the servers of a round (SIGINT: they shut down cleanly).
stop() {
	for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" || true; done
	pids=()
}

minio=${MINIO:-}
if [ "${SKIP_MINIO:-0}" != 1 ] && [ -z "$minio" ]; then
	GOBIN="$work" go install github.com/minio/minio@latest
	minio="$work/minio"
fi
REPEAT=${REPEAT:-1}
[[ "$REPEAT" =~ ^[1-9][0-9]*$ ]] || { echo "REPEAT must be a positive integer" >&2; exit 2; }
for r in $(seq "$REPEAT"); do
	if [ "$r" -gt 1 ]; then
		# The last round's data goes (Quilt keeps the shares of deleted
		# objects, several GB a round), then a pause for the disk to
		# settle (see chattr above for the inodes it frees).
		rm -rf "$work/quilt-$((r - 1))" "$work/minio-$((r - 1))"
		sync
		sleep "${SETTLE:-120}"
	fi
	quilt_round "$r"
	[ "${SKIP_MINIO:-0}" = 1 ] || minio_round "$r"
done
[ "${SKIP_MINIO:-0}" = 1 ] && exit 0
echo
if [ "${GRID:-procs}" = up ]; then
	echo "Quilt's grid ran as one \`quilt up\` process; MinIO as one process. Both on every core."
else
	echo "Quilt's ten nodes ran with --cpus $NODE_CPUS (0: every core), the gateway on every core; MinIO as one process on every core."
fi

# The median of each cell over the rounds, and MinIO ÷ Quilt (over 1:
# MinIO faster; under 1: Quilt faster).
python3 - "$work" "$REPEAT" <<'PY'
import re, statistics, sys
work, n = sys.argv[1], int(sys.argv[2])
def cells(path):
    out = {}
    for line in open(path):
        f = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(f) >= 5 and f[0] in ("Quilt", "MinIO"):
            num = lambda x: float(re.match(r"[0-9.]+", x).group())
            out[(f[1], f[2])] = (num(f[3]), num(f[4]), f[3].split()[-1])
    return out
q = [cells(f"{work}/quilt-{r}.md") for r in range(1, n + 1)]
m = [cells(f"{work}/minio-{r}.md") for r in range(1, n + 1)]
print(f"\nMedian of {n} round(s), the systems alternating; ratio = MinIO / Quilt\n")
print("| case | concurrency | Quilt PUT | MinIO PUT | PUT ratio | Quilt GET | MinIO GET | GET ratio |")
print("|---|---|---|---|---|---|---|---|")
for key in q[0]:
    med = lambda rs, i: statistics.median(r[key][i] for r in rs)
    unit = q[0][key][2]
    qp, mp, qg, mg = med(q, 0), med(m, 0), med(q, 1), med(m, 1)
    print(f"| {key[0]} | {key[1]} | {qp:.1f} {unit} | {mp:.1f} {unit} | {mp/qp:.2f} | {qg:.1f} {unit} | {mg:.1f} {unit} | {mg/qg:.2f} |")
PY
