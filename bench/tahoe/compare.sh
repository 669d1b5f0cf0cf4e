#!/usr/bin/env bash
# Side-by-side throughput of Tahoe-LAFS and Quilt on one machine.
#
# Both systems run a local grid of 10 storage nodes on 127.0.0.1 and store
# files with 3-of-10 erasure coding (happy=7), encrypted. For each file size
# the script times `put` and `get` REPEAT times (a fresh random file every
# time), checks each download with cmp, and reports the median MB/s
# (MB = 10^6 bytes) and the Quilt/Tahoe ratio.
#
# Environment (all optional):
#   SIZES="16 128"      file sizes in MiB
#   REPEAT=3            runs per size and operation; the median is reported
#   SKIP_TAHOE=1        do not run the Tahoe part
#   SKIP_QUILT=1        do not run the Quilt part
#   KEEP=1              keep the temp dir (node dirs, logs, data files)
#   OUT=path            results file (default: <repo>/bench/tahoe/results.md)
#   TAHOE_VENV=dir      venv for tahoe-lafs (default ~/.cache/quilt-bench/tahoe-venv)
#   TAHOE_VERSION=1.20.0  tahoe-lafs version installed into a new venv
#   PYTHON=python3      interpreter used to create the venv
#   QUILT_BIN=path      use this quilt binary instead of building one
#   TAHOE_VIA=cli       cli: time `tahoe put` / `tahoe get` (default); http: time curl
#                       PUT /uri and GET /uri/CAP on the client's web API instead
#   WARMUP=1            one untimed 1 MiB put+get per system before timing (0: off)
#   START_TIMEOUT=180   seconds to wait for a grid to come up
#   OP_TIMEOUT=900      seconds allowed for one put or one get
#   SERVER_MAX=7200     hard lifetime of every server process (safety net)
#   TMPDIR              where the temp dir is created
#
# Only 127.0.0.1 is used. Every process started here is stopped on exit.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(git -C "$SCRIPT_DIR" rev-parse --show-toplevel 2>/dev/null || (cd "$SCRIPT_DIR/../.." && pwd))

SIZES=${SIZES:-"16 128"}
REPEAT=${REPEAT:-3}
SKIP_TAHOE=${SKIP_TAHOE:-0}
SKIP_QUILT=${SKIP_QUILT:-0}
KEEP=${KEEP:-0}
OUT=${OUT:-$REPO_ROOT/bench/tahoe/results.md}
TAHOE_VENV=${TAHOE_VENV:-$HOME/.cache/quilt-bench/tahoe-venv}
TAHOE_VERSION=${TAHOE_VERSION:-1.20.0}
PYTHON=${PYTHON:-python3}
WARMUP=${WARMUP:-1}
TAHOE_VIA=${TAHOE_VIA:-cli}
START_TIMEOUT=${START_TIMEOUT:-180}
OP_TIMEOUT=${OP_TIMEOUT:-900}
SERVER_MAX=${SERVER_MAX:-7200}
NODES=10 K=3 N=10 HAPPY=7

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ "$TAHOE_VIA" == cli || "$TAHOE_VIA" == http ]] || die "TAHOE_VIA must be cli or http"
[[ "$REPEAT" =~ ^[1-9][0-9]*$ ]] || die "REPEAT must be a positive integer"
for s in $SIZES; do [[ "$s" =~ ^[1-9][0-9]*$ ]] || die "SIZES must be positive integers (MiB)"; done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/quilt-tahoe-bench.XXXXXX")
PIDS=()

# stop_pids PID...: SIGTERM, up to 20 s grace, then SIGKILL.
stop_pids() {
  local pid alive deadline
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
  deadline=$((SECONDS + 20))
  while :; do
    alive=0
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || break
    ((SECONDS < deadline)) || break
    sleep 0.2
  done
  for pid in "$@"; do
    if kill -0 "$pid" 2>/dev/null; then
      log "pid $pid did not stop on SIGTERM, sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  done
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if ((${#PIDS[@]})); then
    log "stopping ${#PIDS[@]} server process(es)"
    stop_pids "${PIDS[@]}"
  fi
  if [[ "$KEEP" == 1 ]]; then
    log "KEEP=1: temp dir kept at $WORK"
  else
    rm -rf "$WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start_bg LOGFILE CMD...: run a server in the background, bounded by
# SERVER_MAX, stdin from /dev/null; its PID is recorded for cleanup.
LAST_PID=
start_bg() {
  local logf=$1; shift
  timeout -k 10 "$SERVER_MAX" "$@" </dev/null >"$logf" 2>&1 &
  LAST_PID=$!
  PIDS+=("$LAST_PID")
}

forget_pids() { # remove the given PIDs from PIDS
  local keep=() p q drop
  for p in "${PIDS[@]}"; do
    drop=0
    for q in "$@"; do [[ "$p" == "$q" ]] && drop=1; done
    ((drop)) || keep+=("$p")
  done
  PIDS=("${keep[@]+"${keep[@]}"}")
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) printf "%.3f", a[(NR + 1) / 2]; else printf "%.3f", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
mbps() { awk -v mib="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.1f", mib * 1048576 / 1e6 / s; else print "n/a" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "n/a" && b != "n/a" && b > 0) printf "%.2fx", a / b; else print "n/a" }'; }

# free_ports COUNT: COUNT distinct free TCP ports on 127.0.0.1.
free_ports() {
  "$PYTHON" - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
EOF
}

# --- test data ---------------------------------------------------------------
# One fresh random file per (size, run). Fresh data matters: Tahoe's
# convergent encryption would find the shares of an identical file already
# in the grid and skip the upload.
DATA=$WORK/data
mkdir -p "$DATA"
datafile() { echo "$DATA/in-$1MiB-$2.bin"; }
make_data() {
  local s r
  log "generating test data (sizes: $SIZES MiB, $REPEAT run(s) each)"
  for s in $SIZES; do
    for ((r = 1; r <= REPEAT; r++)); do
      head -c $((s * 1048576)) /dev/urandom >"$(datafile "$s" "$r")"
    done
  done
  head -c 1048576 /dev/urandom >"$DATA/warmup.bin"
}

declare -A PUT_S GET_S RAW

# bench SYSTEM PUTFN GETFN: PUTFN FILE prints the cap; GETFN CAP OUT writes OUT.
bench() {
  local sys=$1 putfn=$2 getfn=$3 s r f o cap t0 t1 tp tg
  if [[ "$WARMUP" == 1 ]]; then
    log "$sys: warm-up put/get of 1 MiB (untimed)"
    cap=$("$putfn" "$DATA/warmup.bin") || die "$sys: warm-up put failed"
    "$getfn" "$cap" "$WORK/$sys-warmup.out" || die "$sys: warm-up get failed"
    cmp -s "$DATA/warmup.bin" "$WORK/$sys-warmup.out" || die "$sys: warm-up download differs"
    rm -f "$WORK/$sys-warmup.out"
  fi
  for s in $SIZES; do
    local puts=() gets=()
    for ((r = 1; r <= REPEAT; r++)); do
      f=$(datafile "$s" "$r")
      o=$WORK/$sys-out-$s-$r.bin
      sync # untimed: each put starts with no other writes pending on the disk
      t0=$(now)
      cap=$("$putfn" "$f") || die "$sys: put of $s MiB (run $r) failed"
      t1=$(now)
      tp=$(elapsed "$t0" "$t1")
      [[ -n "$cap" ]] || die "$sys: put printed no cap"
      t0=$(now)
      "$getfn" "$cap" "$o" || die "$sys: get of $s MiB (run $r) failed"
      t1=$(now)
      tg=$(elapsed "$t0" "$t1")
      cmp -s "$f" "$o" || die "$sys: downloaded $s MiB file (run $r) differs from the original"
      rm -f "$o"
      log "$sys ${s} MiB run $r: put ${tp}s ($(mbps "$s" "$tp") MB/s), get ${tg}s ($(mbps "$s" "$tg") MB/s), verified"
      puts+=("$tp")
      gets+=("$tg")
    done
    PUT_S[$sys,$s]=$(median "${puts[@]}")
    GET_S[$sys,$s]=$(median "${gets[@]}")
    RAW[$sys,$s]="put s: ${puts[*]}; get s: ${gets[*]}"
  done
}

# --- Tahoe-LAFS ----------------------------------------------------------------
TAHOE=$TAHOE_VENV/bin/tahoe
TAHOE_VER=n/a
TAHOE_INSTALL_S=
TAHOE_CLI_START=n/a

install_tahoe() {
  if [[ -x "$TAHOE" ]] && "$TAHOE" --version >/dev/null 2>&1; then
    log "tahoe already installed in $TAHOE_VENV"
    return
  fi
  log "installing tahoe-lafs==$TAHOE_VERSION into $TAHOE_VENV (PyPI)"
  local t0 t1
  t0=$(now)
  mkdir -p "$(dirname "$TAHOE_VENV")"
  timeout 300 "$PYTHON" -m venv "$TAHOE_VENV" || die "cannot create venv $TAHOE_VENV"
  timeout 900 "$TAHOE_VENV/bin/pip" install -q "tahoe-lafs==$TAHOE_VERSION" \
    || die "pip install tahoe-lafs==$TAHOE_VERSION failed"
  t1=$(now)
  TAHOE_INSTALL_S=$(elapsed "$t0" "$t1")
  log "tahoe-lafs installed in ${TAHOE_INSTALL_S}s"
}

TAHOE_CLIENT=
TAHOE_WEB_PORT=
if [[ "$TAHOE_VIA" == http ]]; then
  # Straight to the client node's web API (what `tahoe put/get` do), without
  # the ~1 s Python start-up of the tahoe CLI.
  tahoe_put() { timeout "$OP_TIMEOUT" curl -sS --fail -T "$1" "http://127.0.0.1:$TAHOE_WEB_PORT/uri" 2>>"$WORK/tahoe/cli.log" && echo; }
  tahoe_get() { timeout "$OP_TIMEOUT" curl -sS --fail -o "$2" "http://127.0.0.1:$TAHOE_WEB_PORT/uri/$1" 2>>"$WORK/tahoe/cli.log"; }
else
  tahoe_put() { timeout "$OP_TIMEOUT" "$TAHOE" -d "$TAHOE_CLIENT" put "$1" 2>>"$WORK/tahoe/cli.log" | tail -n 1; }
  tahoe_get() { timeout "$OP_TIMEOUT" "$TAHOE" -d "$TAHOE_CLIENT" get "$1" "$2" >>"$WORK/tahoe/cli.log" 2>&1; }
fi

# tahoe_connected WEBPORT: number of storage servers the client is connected to.
tahoe_connected() {
  curl -s --max-time 5 "http://127.0.0.1:$1/?t=json" 2>/dev/null | "$PYTHON" -c '
import json, sys
try:
    d = json.load(sys.stdin)
except Exception:
    print(0); sys.exit()
print(sum(1 for s in d.get("servers", []) if str(s.get("connection_status", "")).lower().startswith("connected")))
' 2>/dev/null || true
}

run_tahoe() {
  install_tahoe
  local c0 c1
  c0=$(now)
  TAHOE_VER=$("$TAHOE" --version 2>/dev/null | head -n 1)
  c1=$(now)
  TAHOE_CLI_START=$(elapsed "$c0" "$c1")
  local T=$WORK/tahoe ports intro_port web_port furl i d deadline pids=() n
  mkdir -p "$T"
  read -r -a ports <<<"$(free_ports $((NODES + 2)))"
  intro_port=${ports[0]}
  web_port=${ports[1]}
  TAHOE_WEB_PORT=$web_port

  log "tahoe: creating introducer, $NODES storage nodes and a client in $T"
  # --hostname cannot be combined with --port/--location: give the latter two.
  "$TAHOE" create-introducer --port "tcp:$intro_port:interface=127.0.0.1" \
    --location "tcp:127.0.0.1:$intro_port" "$T/introducer" >>"$T/create.log" 2>&1
  start_bg "$T/introducer.log" "$TAHOE" run --allow-stdin-close "$T/introducer"
  pids+=("$LAST_PID")
  deadline=$((SECONDS + START_TIMEOUT))
  until [[ -s "$T/introducer/private/introducer.furl" ]]; do
    ((SECONDS < deadline)) || die "tahoe introducer did not write its furl (see $T/introducer.log)"
    kill -0 "$LAST_PID" 2>/dev/null || die "tahoe introducer exited (see $T/introducer.log)"
    sleep 0.5
  done
  furl=$(cat "$T/introducer/private/introducer.furl")

  for ((i = 0; i < NODES; i++)); do
    d=$T/storage$i
    "$TAHOE" create-node --nickname "storage$i" --introducer "$furl" --webport none \
      --port "tcp:${ports[i + 2]}:interface=127.0.0.1" --location "tcp:127.0.0.1:${ports[i + 2]}" \
      "$d" >>"$T/create.log" 2>&1
  done
  TAHOE_CLIENT=$T/client
  "$TAHOE" create-client --nickname bench-client --introducer "$furl" \
    --webport "tcp:$web_port:interface=127.0.0.1" \
    --shares-needed "$K" --shares-happy "$HAPPY" --shares-total "$N" \
    "$TAHOE_CLIENT" >>"$T/create.log" 2>&1
  grep -q "shares.needed = $K" "$TAHOE_CLIENT/tahoe.cfg" &&
    grep -q "shares.happy = $HAPPY" "$TAHOE_CLIENT/tahoe.cfg" &&
    grep -q "shares.total = $N" "$TAHOE_CLIENT/tahoe.cfg" ||
    die "client tahoe.cfg lacks the 3/7/10 share settings"

  for ((i = 0; i < NODES; i++)); do
    start_bg "$T/storage$i.log" "$TAHOE" run --allow-stdin-close "$T/storage$i"
    pids+=("$LAST_PID")
  done
  start_bg "$T/client.log" "$TAHOE" run --allow-stdin-close "$TAHOE_CLIENT"
  pids+=("$LAST_PID")

  log "tahoe: waiting (up to ${START_TIMEOUT}s) for the client to connect to $NODES storage servers"
  local t0 t1
  t0=$(now)
  deadline=$((SECONDS + START_TIMEOUT))
  while :; do
    n=$(tahoe_connected "$web_port")
    [[ "$n" =~ ^[0-9]+$ ]] || n=0
    ((n >= NODES)) && break
    ((SECONDS < deadline)) || die "tahoe client sees only $n/$NODES storage servers after ${START_TIMEOUT}s (logs in $T; KEEP=1 keeps them)"
    for i in "${pids[@]}"; do kill -0 "$i" 2>/dev/null || die "a tahoe node exited early (logs in $T; KEEP=1 keeps them)"; done
    sleep 1
  done
  t1=$(now)
  log "tahoe: $n storage servers connected after $(elapsed "$t0" "$t1")s"

  bench tahoe tahoe_put tahoe_get

  log "tahoe: stopping the grid"
  stop_pids "${pids[@]}"
  forget_pids "${pids[@]}"
}

# --- Quilt -------------------------------------------------------------------------
QUILT=
QUILT_COMMIT=$(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo "none (no commit)")
if [[ -n "$(git -C "$REPO_ROOT" status --porcelain 2>/dev/null | head -n 1)" ]]; then
  QUILT_COMMIT="$QUILT_COMMIT (work tree modified)"
fi

quilt_put() {
  local cap
  cap=$(timeout "$OP_TIMEOUT" "$QUILT" put --k "$K" --n "$N" --happy "$HAPPY" "$1" 2>>"$QUILT_LOG" | tail -n 1) || return 1
  [[ "$cap" == quilt:r:* ]] || { log "quilt put printed '$cap', expected quilt:r:..."; return 1; }
  printf '%s\n' "$cap"
}
quilt_get() { timeout "$OP_TIMEOUT" "$QUILT" get "$1" -o "$2" >>"$QUILT_LOG" 2>&1; }

# run_quilt KEY [quilt up flags...]: one Quilt grid, timed as system KEY.
run_quilt() {
  local key=$1
  shift
  local Q=$WORK/$key deadline pid t0 t1
  mkdir -p "$Q/home"
  # `quilt up` makes its grid the default one in $QUILT_HOME/config.json:
  # keep that inside the temp dir, not in the user's ~/.quilt.
  export QUILT_HOME=$Q/home
  if [[ -n "${QUILT_BIN:-}" ]]; then
    QUILT=$QUILT_BIN
  else
    QUILT=$Q/quilt
    log "quilt: building ./cmd/quilt"
    (cd "$REPO_ROOT" && timeout 900 go build -o "$QUILT" ./cmd/quilt) || die "go build ./cmd/quilt failed"
  fi
  [[ -x "$QUILT" ]] || die "no quilt binary at $QUILT"

  log "quilt: starting a $NODES-node grid in $Q/grid"
  t0=$(now)
  start_bg "$Q/up.log" "$QUILT" up --nodes "$NODES" --dir "$Q/grid" --port 0 "$@"
  pid=$LAST_PID
  deadline=$((SECONDS + START_TIMEOUT))
  # Ready when DIR/invite holds a whole `quilt://...` line (newline-terminated).
  until [[ -s "$Q/grid/invite" ]] && grep -q '^quilt://' "$Q/grid/invite" &&
    [[ -z "$(tail -c 1 "$Q/grid/invite")" ]]; do
    ((SECONDS < deadline)) || die "quilt up wrote no invite within ${START_TIMEOUT}s (see $Q/up.log; KEEP=1 keeps it)"
    kill -0 "$pid" 2>/dev/null || die "quilt up exited early (see $Q/up.log; KEEP=1 keeps it)"
    sleep 0.5
  done
  t1=$(now)
  QUILT_GRID=$(head -n 1 "$Q/grid/invite")
  export QUILT_GRID
  log "quilt: grid ready after $(elapsed "$t0" "$t1")s"

  QUILT_LOG=$Q/cli.log
  bench "$key" quilt_put quilt_get

  log "quilt: stopping the grid"
  stop_pids "$pid"
  forget_pids "$pid"
}

# --- main --------------------------------------------------------------------------
[[ "$SKIP_TAHOE" == 1 && "$SKIP_QUILT" == 1 ]] && die "both SKIP_TAHOE=1 and SKIP_QUILT=1: nothing to do"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
make_data
LOAD_TAHOE=n/a LOAD_QUILT=n/a
[[ "$SKIP_TAHOE" == 1 ]] || { run_tahoe; LOAD_TAHOE=$(cut -d' ' -f1-3 /proc/loadavg); }
# Quilt twice: as it ships (every share fsynced before the node answers),
# and with --no-fsync, the durability Tahoe-LAFS's storage servers give
# (they never fsync; a share is renamed into place from the page cache).
if [[ "$SKIP_QUILT" != 1 ]]; then
  run_quilt quilt
  run_quilt quiltns --no-fsync
  LOAD_QUILT=$(cut -d' ' -f1-3 /proc/loadavg)
fi

report() {
  local s
  echo "# Quilt vs Tahoe-LAFS: put/get throughput"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "- nproc: $(nproc)"
  echo "- CPU: $(lscpu 2>/dev/null | grep 'Model name' | head -n 1 | sed 's/^Model name:[[:space:]]*//')"
  echo "- load average (1/5/15 min): before the run $LOAD_BEFORE; after Tahoe $LOAD_TAHOE; after Quilt $LOAD_QUILT"
  echo "- Tahoe-LAFS: $TAHOE_VER$([[ "$SKIP_TAHOE" == 1 ]] && echo ' (skipped)')$([[ -n "$TAHOE_INSTALL_S" ]] && echo ", installed in this run in ${TAHOE_INSTALL_S}s")"
  [[ "$SKIP_TAHOE" == 1 ]] || echo "- Tahoe timed through: $([[ "$TAHOE_VIA" == http ]] && echo 'curl on the client web API (TAHOE_VIA=http)' || echo 'the tahoe CLI (tahoe put / tahoe get)'); start-up of the tahoe CLI alone (tahoe --version): ${TAHOE_CLI_START}s"
  echo "- quilt commit: $QUILT_COMMIT$([[ "$SKIP_QUILT" == 1 ]] && echo ' (skipped)')"
  echo "- grid: $NODES storage nodes on 127.0.0.1, k=$K n=$N happy=$HAPPY, encrypted"
  echo "- repeat: $REPEAT (median reported; fresh random file per run; warm-up: $([[ "$WARMUP" == 1 ]] && echo '1 MiB untimed' || echo off))"
  echo "- MB/s = 10^6 bytes per second of wall time of the CLI command (put includes encryption, encoding and upload; get includes download, decoding, decryption, writing the file)"
  echo
  echo "| system | file size | put MB/s (median) | get MB/s (median) | put s (median) | get s (median) |"
  echo "|---|---|---|---|---|---|"
  for s in $SIZES; do
    [[ "$SKIP_TAHOE" == 1 ]] || echo "| Tahoe-LAFS | $s MiB | $(mbps "$s" "${PUT_S[tahoe,$s]}") | $(mbps "$s" "${GET_S[tahoe,$s]}") | ${PUT_S[tahoe,$s]} | ${GET_S[tahoe,$s]} |"
    [[ "$SKIP_QUILT" == 1 ]] || echo "| Quilt (fsync, default) | $s MiB | $(mbps "$s" "${PUT_S[quilt,$s]}") | $(mbps "$s" "${GET_S[quilt,$s]}") | ${PUT_S[quilt,$s]} | ${GET_S[quilt,$s]} |"
    [[ "$SKIP_QUILT" == 1 ]] || echo "| Quilt --no-fsync | $s MiB | $(mbps "$s" "${PUT_S[quiltns,$s]}") | $(mbps "$s" "${GET_S[quiltns,$s]}") | ${PUT_S[quiltns,$s]} | ${GET_S[quiltns,$s]} |"
  done
  if [[ "$SKIP_TAHOE" != 1 && "$SKIP_QUILT" != 1 ]]; then
    for s in $SIZES; do
      echo "| Quilt (fsync) / Tahoe | $s MiB | $(ratio "$(mbps "$s" "${PUT_S[quilt,$s]}")" "$(mbps "$s" "${PUT_S[tahoe,$s]}")") | $(ratio "$(mbps "$s" "${GET_S[quilt,$s]}")" "$(mbps "$s" "${GET_S[tahoe,$s]}")") | | |"
      echo "| Quilt --no-fsync / Tahoe (same durability) | $s MiB | $(ratio "$(mbps "$s" "${PUT_S[quiltns,$s]}")" "$(mbps "$s" "${PUT_S[tahoe,$s]}")") | $(ratio "$(mbps "$s" "${GET_S[quiltns,$s]}")" "$(mbps "$s" "${GET_S[tahoe,$s]}")") | | |"
    done
  fi
  echo
  echo "Raw wall times (s):"
  echo
  for s in $SIZES; do
    [[ "$SKIP_TAHOE" == 1 ]] || echo "- Tahoe-LAFS $s MiB: ${RAW[tahoe,$s]}"
    [[ "$SKIP_QUILT" == 1 ]] || echo "- Quilt (fsync) $s MiB: ${RAW[quilt,$s]}"
    [[ "$SKIP_QUILT" == 1 ]] || echo "- Quilt --no-fsync $s MiB: ${RAW[quiltns,$s]}"
  done
}

mkdir -p "$(dirname "$OUT")"
report | tee "$OUT"
log "results written to $OUT"
