#!/usr/bin/env bash
# Two Swift regions of real processes on 127.0.0.1: a grid (`quilt up
# --s3 off`, five nodes) and three `quilt gateway` processes sharing a
# copy of one registry, two in region-a behind HAProxy (the
# distribution's package) and one in region-b. The Keystone catalog lists
# both regions; the swift CLI in each region writes through its own
# endpoint and reads the other's objects. Then clients of region-a write
# and read through HAProxy while one of its gateways is killed: once
# HAProxy's health check (GET /healthcheck) has marked it down, no request
# fails, and region-b reads every object region-a was told was stored.
# Installs haproxy with apt and the Swift clients in a venv when missing;
# fails if either cannot be installed: nothing is skipped.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pids=()
cleanup() {
	local rc=$?
	if [ "$rc" != 0 ]; then
		# What HAProxy saw (its servers going up and down) and the
		# gateways' warnings, to tell why.
		for f in haproxy a1 a2 b1; do
			[ -s "$work/$f.log" ] && { echo "== the end of $f's log"; tail -n 30 "$work/$f.log"; }
		done
	fi
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
say() { printf '\n== %s\n' "$*"; }
fails() { if "$@" >/dev/null 2>&1; then echo "should have failed: $*"; exit 1; fi; }
# waitlog waits until a process's log matches a regular expression and
# prints the first match's group 1.
waitlog() {
	local log=$1 re=$2 m
	for _ in $(seq 1 120); do
		m=$(sed -nE "s#.*$re.*#\\1#p" "$log" | head -1)
		[ -n "$m" ] && { echo "$m"; return; }
		sleep 0.5
	done
	cat "$log" >&2
	echo "no match of $re in $log" >&2
	return 1
}

if ! command -v haproxy >/dev/null 2>&1; then
	say "installing haproxy"
	if [ "$(id -u)" = 0 ]; then timeout 300 apt-get install -y -qq haproxy >/dev/null || { timeout 120 apt-get update -qq && timeout 300 apt-get install -y -qq haproxy >/dev/null; }
	else timeout 300 sudo apt-get install -y -qq haproxy >/dev/null; fi
fi
haproxy=$(command -v haproxy || true)
[ -x "$haproxy" ] || { echo "haproxy is needed and could not be installed"; exit 1; }
# shellcheck source=test/swift-venv.sh
. "$root/test/swift-venv.sh"

say "starting a grid of five nodes (quilt up --s3 off)"
# QUILT_BIN: a quilt binary built before (make test passes its own).
if [ -n "${QUILT_BIN:-}" ]; then cp "$QUILT_BIN" "$work/quilt"; else
	(cd "$root" && go build -o "$work/quilt" ./cmd/quilt)
fi
quilt="$work/quilt"
export QUILT_HOME="$work/home"
"$quilt" up --nodes 5 --port 0 --no-fsync --s3 off --dir "$work/grid" >"$work/up.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 120); do [ -s "$work/grid/invite" ] && break; sleep 0.5; done
[ -s "$work/grid/invite" ] || { cat "$work/up.log"; echo "quilt up did not start"; exit 1; }
invite=$(cat "$work/grid/invite")

# HAProxy's port, chosen before region-a's gateways start: they register
# it as their public URL.
haport=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
haurl=http://127.0.0.1:$haport

# gateway NAME REGION [--public-url URL]: starts a gateway in $work/NAME
# and sets gwpid and gwurl (where its Swift API listens).
gateway() {
	local name=$1 region=$2
	shift 2
	"$quilt" gateway --grid "$invite" --dir "$work/$name" --s3 127.0.0.1:0 --swift 127.0.0.1:0 \
		--region "$region" --log warn "$@" >"$work/$name.log" 2>&1 &
	gwpid=$!
	pids+=("$gwpid")
	gwurl=$(waitlog "$work/$name.log" 'Swift at (http://[^ ]+)')
}

say "three gateways: a1 and a2 in region-a (public URL: HAProxy's), b1 in region-b"
gateway a1 region-a --public-url "$haurl"
a1pid=$gwpid a1url=$gwurl
# The others share a copy of a1's registry (and its first user's
# password, swift.json, and admin key).
for d in a2 b1; do
	mkdir -p "$work/$d"
	cp "$work/a1/registry" "$work/a1/admin.json" "$work/a1/swift.json" "$work/$d/"
done
gateway a2 region-a --public-url "$haurl"
a2url=$gwurl
gateway b1 region-b
b1url=$gwurl
echo "a1 $a1url  a2 $a2url  b1 $b1url  HAProxy $haurl"

say "HAProxy in front of a1 and a2"
cat >"$work/haproxy.cfg" <<EOF
global
    stats socket $work/haproxy.sock mode 600 level admin
defaults
    mode http
    timeout connect 2s
    # A health check may take this long (without it, the check's
    # interval, 250 ms, which a loaded machine's gateway can miss twice
    # in a row, and HAProxy would mark a live gateway down). A killed
    # gateway's port refuses at once, so it is still marked down fast.
    timeout check 2s
    timeout client 60s
    timeout server 60s
    retries 2
    option redispatch
frontend swift_region_a
    bind 127.0.0.1:$haport
    default_backend gateways_region_a
backend gateways_region_a
    balance roundrobin
    option httpchk GET /healthcheck
    http-check expect string OK
    server a1 ${a1url#http://} check inter 250ms fall 2 rise 1
    server a2 ${a2url#http://} check inter 250ms fall 2 rise 1
EOF
"$haproxy" -c -q -f "$work/haproxy.cfg"
"$haproxy" -db -f "$work/haproxy.cfg" >"$work/haproxy.log" 2>&1 &
pids+=($!)
# servers prints each server of the backend and its status.
servers() {
	"$py" - "$work/haproxy.sock" <<'PY'
import csv, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"show stat\n")
data = b""
while chunk := s.recv(65536):
    data += chunk
rows = list(csv.reader(data.decode().lstrip("# ").splitlines()))
head = rows[0]
for r in rows[1:]:
    if r and r[0] == "gateways_region_a" and r[1] in ("a1", "a2"):
        print(r[1], r[head.index("status")])
PY
}
for _ in $(seq 1 60); do
	[ "$(servers 2>/dev/null | grep -c ' UP$')" = 2 ] && break
	sleep 0.5
done
out=$(servers)
[ "$(grep -c ' UP$' <<<"$out")" = 2 ] || { echo "$out"; cat "$work/haproxy.log"; echo "HAProxy does not see both gateways up"; exit 1; }

# Region-a's clients log in through HAProxy, region-b's at b1; the same
# user (quilt's admin:admin) in both.
# shellcheck disable=SC1091
. "$work/a1/swift.env"
unset ST_AUTH ST_USER ST_KEY
test "$OS_AUTH_URL" = "$haurl/v3"
export OS_PASSWORD
client() { # client REGION AUTH_BASE swift-args...: the swift CLI with Keystone v3 in a region
	local region=$1 base=$2
	shift 2
	OS_AUTH_URL=$base/v3 OS_REGION_NAME=$region "$swift" "$@"
}

say "the catalog lists both regions"
"$py" - "$haurl" "$b1url" <<'PY'
import os, sys
from keystoneauth1.identity import v3
from keystoneauth1 import session
ha, b1 = sys.argv[1], sys.argv[2]
for auth_url in (ha, b1):
    auth = v3.Password(auth_url=auth_url + "/v3", username=os.environ["OS_USERNAME"], password=os.environ["OS_PASSWORD"],
                       project_name=os.environ["OS_PROJECT_NAME"], user_domain_name="Default", project_domain_name="Default")
    sess = session.Session(auth=auth)
    cat = auth.get_access(sess).service_catalog
    got = {(e["region"], e["url"]) for e in cat.get_endpoints(service_type="object-store", interface="public")["object-store"]}
    regions = {r for r, _ in got}
    assert regions == {"region-a", "region-b"}, got
    for r, url in got:
        want = ha if r == "region-a" else b1
        assert url.startswith(want + "/v1/AUTH_"), (r, url, want)
print("catalog: region-a at HAProxy, region-b at b1, from either identity endpoint")
PY
out=$(client region-a "$haurl" auth)
grep -q "OS_STORAGE_URL=$haurl/v1/AUTH_" <<<"$out" || { echo "$out"; exit 1; }
out=$(client region-b "$b1url" auth)
grep -q "OS_STORAGE_URL=$b1url/v1/AUTH_" <<<"$out" || { echo "$out"; exit 1; }
fails client nowhere "$b1url" list

say "each region writes through its own endpoint and reads the other's objects"
cd "$work"
head -c 200000 /dev/urandom >from-a
head -c 300000 /dev/urandom >from-b
client region-a "$haurl" upload --object-name obj region-a-box from-a >/dev/null
client region-b "$b1url" upload --object-name obj region-b-box from-b >/dev/null
# The other region's gateway sees a new container once the registry's
# entries reach it (gossip, or its next sync within a second).
for _ in $(seq 1 60); do
	client region-b "$b1url" download region-a-box obj -o a-at-b >/dev/null 2>&1 &&
		client region-a "$haurl" download region-b-box obj -o b-at-a >/dev/null 2>&1 && break
	sleep 0.5
done
cmp from-a a-at-b
cmp from-b b-at-a
out=$(client region-b "$b1url" list)
grep -qx region-a-box <<<"$out"
grep -qx region-b-box <<<"$out"

say "region-a's clients through HAProxy while a1 is killed"
disown "$a1pid" # killed below, on purpose: no job report
"$py" - "$haurl" "$b1url" "$work/haproxy.sock" "$a1pid" <<'PY'
import csv, hashlib, os, signal, socket, sys, threading, time
from swiftclient.client import Connection

ha, b1, sock, a1pid = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
WORKERS, BEFORE, AFTER, LIMIT = 4, 40, 400, 180  # requests before the kill and after a1 is down; seconds at most

def conn(auth_url, region):
    return Connection(authurl=auth_url + "/v3", user=os.environ["OS_USERNAME"], key=os.environ["OS_PASSWORD"],
                      auth_version="3", retries=0, timeout=30,
                      os_options={"project_name": os.environ["OS_PROJECT_NAME"], "user_domain_name": "Default",
                                  "project_domain_name": "Default", "region_name": region})

def stat():
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.sendall(b"show stat\n")
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    rows = list(csv.reader(data.decode().lstrip("# ").splitlines()))
    head = rows[0]
    return {r[1]: (r[head.index("status")], int(r[head.index("stot")]))
            for r in rows[1:] if r and r[0] == "gateways_region_a" and r[1] in ("a1", "a2")}

def payload(name):
    # 1-40 KB, so some objects live in the bucket's log and most on the grid.
    seed = hashlib.sha256(name.encode()).digest()
    n = 1000 + int.from_bytes(seed[:2], "big") % 39000
    return (seed * (n // 32 + 1))[:n]

c = conn(ha, "region-a")
c.put_container("killrun")
lock = threading.Lock()
log = []      # (start, end, op, name, error or None)
stored = set()
stop = threading.Event()
down_at = [None]

def worker(w):
    cw = conn(ha, "region-a")
    i = 0
    while not stop.is_set():
        name = f"w{w}/{i:05d}"
        body = payload(name)
        for op in ("PUT", "GET", "HEAD", "DELETE") if i % 5 == 4 else ("PUT", "GET"):
            t0 = time.monotonic()
            err = None
            try:
                if op == "PUT":
                    cw.put_object("killrun", name, body)
                elif op == "GET":
                    _, got = cw.get_object("killrun", name)
                    if got != body:
                        err = f"GET {name}: {len(got)} bytes differ from the {len(body)} put"
                elif op == "HEAD":
                    h = cw.head_object("killrun", name)
                    if int(h["content-length"]) != len(body):
                        err = f"HEAD {name}: length {h['content-length']}"
                else:
                    cw.delete_object("killrun", name)
            except Exception as e:  # every failure is counted, none retried
                err = f"{op} {name}: {e}"
            t1 = time.monotonic()
            with lock:
                log.append((t0, t1, op, name, err))
                if err is None and op == "PUT":
                    stored.add(name)
                elif err is None and op == "DELETE":
                    stored.discard(name)
            if err is not None:
                break  # the object's next steps depend on this one
        i += 1

threads = [threading.Thread(target=worker, args=(w,)) for w in range(WORKERS)]
start = time.monotonic()
for t in threads:
    t.start()
while len(log) < BEFORE and time.monotonic() - start < LIMIT:
    time.sleep(0.05)
before = stat()
assert all(s == "UP" and n > 0 for s, n in before.values()), f"both gateways should be up and used before the kill: {before}"
kill_at = time.monotonic()
os.kill(a1pid, signal.SIGKILL)
while time.monotonic() - start < LIMIT:
    st = stat()
    if st["a1"][0].startswith("DOWN"):
        down_at[0] = time.monotonic()
        break
    time.sleep(0.05)
assert down_at[0] is not None, f"HAProxy did not mark a1 down: {stat()}"
while time.monotonic() - start < LIMIT:
    with lock:
        after = sum(1 for e in log if e[0] >= down_at[0])
    if after >= AFTER:
        break
    time.sleep(0.1)
stop.set()
for t in threads:
    t.join()
early = [e for e in log if e[1] < kill_at]
inflight = [e for e in log if e[0] < kill_at <= e[1]]
between = [e for e in log if kill_at <= e[0] < down_at[0]]
after = [e for e in log if e[0] >= down_at[0]]
for name, part in (("done before the kill", early), ("in flight at the kill", inflight),
                   ("started between the kill and HAProxy marking a1 down", between), ("started after a1 was marked down", after)):
    bad = [e for e in part if e[4]]
    print(f"{name}: {len(part)} requests, {len(bad)} failed")
    for e in bad[:5]:
        print("   ", e[4])
print(f"before the kill a1 served {before['a1'][1]} sessions, a2 {before['a2'][1]}; HAProxy marked a1 down {down_at[0] - kill_at:.2f} s after the kill")
assert not any(e[4] for e in early), "a request failed before the kill"
assert len(after) >= AFTER, f"only {len(after)} requests after a1 was marked down, within {LIMIT} s"
assert not any(e[4] for e in after), "a request failed after HAProxy marked a1 down"

# Region-b reads every object region-a was told was stored, including
# those a1 acknowledged just before it was killed.
cb = conn(b1, "region-b")
deadline = time.monotonic() + 60
while True:
    _, objs = cb.get_container("killrun", full_listing=True)
    missing = stored - {o["name"] for o in objs}
    if not missing or time.monotonic() > deadline:
        break
    time.sleep(0.5)
assert not missing, f"region-b does not list {len(missing)} stored objects: {sorted(missing)[:5]}"
for name in sorted(stored):
    _, got = cb.get_object("killrun", name)
    assert got == payload(name), f"region-b reads {name} differently"
print(f"region-b reads the {len(stored)} objects region-a stored")
PY

say "two regions passed"
