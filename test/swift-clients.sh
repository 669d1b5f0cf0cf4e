#!/usr/bin/env bash
# Real Swift clients against `quilt up` (10 nodes and the gateway, on
# 127.0.0.1): the swift CLI with TempAuth v1.0 and with Keystone v3 and a
# region, segmented uploads (DLO and SLO), bulk delete, an expiring
# object, an object crossing between Swift and S3 (boto3), temporary
# URLs, container ACLs (a second project, public read), the swiftclient
# library (and a bulk upload), and a short
# swift-bench run. Installs what it needs, pinned, in a venv under
# ~/.cache. Fails if a client cannot be installed: nothing is skipped.
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
# fails runs a command that must fail (a bare `! cmd` does not stop a
# script under set -e when cmd succeeds).
fails() { if "$@" >/dev/null 2>&1; then echo "should have failed: $*"; exit 1; fi; }

# shellcheck source=test/swift-venv.sh
. "$root/test/swift-venv.sh"

say "starting quilt up"
# QUILT_BIN: a quilt binary built before (make test passes its own).
if [ -n "${QUILT_BIN:-}" ]; then cp "$QUILT_BIN" "$work/quilt"; else
	(cd "$root" && go build -o "$work/quilt" ./cmd/quilt)
fi
QUILT_HOME="$work/home" "$work/quilt" up --port 0 --no-fsync >"$work/up.log" 2>&1 &
pid=$!
gw="$work/home/grid/gateway"
for _ in $(seq 1 120); do [ -s "$gw/swift.env" ] && [ -s "$gw/s3.env" ] && break; sleep 0.5; done
[ -s "$gw/swift.env" ] || { cat "$work/up.log"; echo "quilt up did not start"; exit 1; }
# shellcheck disable=SC1090
. "$gw/swift.env"
# shellcheck disable=SC1090
. "$gw/s3.env"
unset AWS_CA_BUNDLE REQUESTS_CA_BUNDLE
base=${OS_AUTH_URL%/v3}
out=$("$py" -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())' "$base/healthcheck")
test "$out" = OK

cd "$work"
head -c 300000 /dev/urandom >mid
echo "small object" >small
head -c 3000000 /dev/urandom >big

say "swift CLI, TempAuth v1.0"
v1() { "$swift" -V 1.0 -A "$ST_AUTH" -U "$ST_USER" -K "$ST_KEY" "$@"; }
v1 upload v1c small mid >/dev/null
out=$(v1 list v1c)
test "$out" = $'mid\nsmall'
v1 download v1c mid -o mid.back >/dev/null
cmp mid mid.back
v1 post -m colour:blue v1c small
out=$(v1 stat v1c small)
grep -q 'Meta Colour: blue' <<<"$out"
grep -q 'Content Length: 13' <<<"$out"
v1 post -m owner:alice v1c
out=$(v1 stat v1c)
grep -q 'Meta Owner: alice' <<<"$out"
grep -q 'Objects: 2' <<<"$out"
out=$(v1 list --prefix m v1c)
test "$out" = mid
v1 copy -d /v1c/small.copy v1c small >/dev/null
v1 download v1c small.copy -o small.back >/dev/null
cmp small small.back
v1 delete v1c small.copy >/dev/null
fails v1 stat v1c small.copy
fails "$swift" -V 1.0 -A "$ST_AUTH" -U "$ST_USER" -K wrong list

say "swift CLI, Keystone v3 with a region"
v3() { env -u ST_AUTH -u ST_USER -u ST_KEY "$swift" --os-region-name "$OS_REGION_NAME" "$@"; }
v3 upload v3c big >/dev/null
v3 download v3c big -o big.back >/dev/null
cmp big big.back
out=$(v3 list)
grep -qx v1c <<<"$out"
grep -qx v3c <<<"$out"
# The account holds every container of the grid's buckets (quilt up's
# other front ends make some too): stat counts what list shows.
containers=$(wc -l <<<"$out")
out=$(v3 stat)
grep -q "Containers: $containers\$" <<<"$out" || { echo "$out"; echo "stat does not count the $containers containers listed"; exit 1; }
fails env -u ST_AUTH -u ST_USER -u ST_KEY "$swift" --os-region-name nowhere list
fails env -u ST_AUTH -u ST_USER -u ST_KEY "$swift" --os-password wrong list
# The environment as swift.env leaves it (both sets) works as well.
out=$("$swift" list v1c)
test "$out" = $'mid\nsmall'

say "segmented uploads: DLO and SLO"
# The segments go to the CLI's default container, v3c_segments: a name
# S3 would not make, which Swift may.
v3 upload --use-dlo --segment-size 1000000 --object-name dlo v3c big >/dev/null
v3 upload --use-slo --segment-size 1000000 --object-name slo v3c big >/dev/null
for o in dlo slo; do
	v3 download v3c "$o" -o "$o.back" >/dev/null
	cmp big "$o.back"
done
out=$(v3 stat v3c dlo)
grep -q 'Manifest: v3c_segments/dlo/' <<<"$out"
grep -q 'Content Length: 3000000' <<<"$out"
out=$(v3 stat v3c slo)
grep -q 'X-Static-Large-Object: True' <<<"$out"
out=$(v3 list v3c_segments)
test "$(wc -l <<<"$out")" = 6
v3 delete v3c slo dlo >/dev/null
out=$(v3 list v3c_segments)
test -z "$out"

say "bulk delete: swift delete of many objects sends ?bulk-delete (/info lists bulk_delete)"
mkdir many
for i in $(seq 1 25); do echo "object $i" >"many/f$i"; done
v3 upload bulkc many >/dev/null
out=$(v3 list bulkc)
test "$(wc -l <<<"$out")" = 25
v3 --debug delete bulkc >delete.log 2>&1 || { cat delete.log; exit 1; }
grep -q 'bulk-delete' delete.log || { cat delete.log; echo "swift delete did not use bulk delete"; exit 1; }
fails v3 stat bulkc

say "expiring objects: X-Delete-After"
# Long enough for the stat to come first on a busy machine; then the
# object is 404 from its time on.
v3 upload -H "X-Delete-After: 15" --object-name shortlived v3c small >/dev/null
out=$(v3 stat v3c shortlived)
at=$(sed -n 's/.*X-Delete-At: \([0-9]*\).*/\1/p' <<<"$out")
[ -n "$at" ] || { echo "$out"; echo "no X-Delete-At"; exit 1; }
while [ "$(date +%s)" -le "$at" ]; do sleep 1; done
fails v3 stat v3c shortlived
fails v3 download v3c shortlived -o shortlived

say "Swift and S3: one object, two protocols"
v3 upload --object-name from-swift v3c mid >/dev/null
"$py" - "$work" <<'PY'
import os, sys, hashlib, boto3
work = sys.argv[1]
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
mid = open(os.path.join(work, "mid"), "rb").read()
o = s3.get_object(Bucket="v3c", Key="from-swift")
assert o["Body"].read() == mid, "swift upload read through S3 differs"
assert o["ETag"].strip('"') == hashlib.md5(mid).hexdigest(), o["ETag"]
s3.put_object(Bucket="v3c", Key="from-s3", Body=b"written by boto3", Metadata={"tool": "boto3"})
names = [c["Name"] for c in s3.list_buckets()["Buckets"]]
assert "v1c" in names and "v3c" in names, names
PY
v3 download v3c from-s3 -o from-s3 >/dev/null
test "$(cat from-s3)" = "written by boto3"
out=$(v3 stat v3c from-s3)
grep -q 'Meta Tool: boto3' <<<"$out"

say "temporary URLs: swift tempurl"
v3 post -m "Temp-URL-Key:tempsecret"
acct=$(v3 stat | sed -n 's/^ *Account: //p')
get=$(v3 tempurl GET 60 "/v1/$acct/v3c/from-s3" tempsecret)
put=$(v3 tempurl --digest sha256 PUT 60 "/v1/$acct/v3c/via-tempurl" tempsecret)
pre=$(v3 tempurl --prefix-based --digest sha512 GET 60 "/v1/$acct/v3c/from-" tempsecret)
"$py" - "$base" "$get" "$put" "$pre" <<'PY'
import sys, urllib.request, urllib.error
base, get, put, pre = sys.argv[1:]
r = urllib.request.urlopen(base + get)
assert r.read() == b"written by boto3", "tempurl GET"
assert r.headers["Content-Disposition"].startswith('attachment; filename="from-s3"'), r.headers
assert r.headers.get("X-Object-Meta-Tool") is None, "private metadata shown to a temporary URL"
req = urllib.request.Request(base + put, data=b"put through a temporary URL", method="PUT")
assert urllib.request.urlopen(req).status == 201
assert urllib.request.urlopen(base + pre.replace("/from-?", "/from-swift?", 1)).status == 200, "prefix-based tempurl"
for url, method in ((base + get, "PUT"), (base + get.replace("from-s3", "mid"), "GET"), (base + put.split("?")[0], "GET")):
    try:
        urllib.request.urlopen(urllib.request.Request(url, data=b"x" if method == "PUT" else None, method=method))
        raise SystemExit(f"{method} {url} should have been refused")
    except urllib.error.HTTPError as e:
        assert e.code == 401, (url, e.code)
print("tempurl: ok")
PY
out=$(v3 download v3c via-tempurl -o -)
test "$out" = "put through a temporary URL"

say "container ACLs: swift post -r/-w, a second project, public read"
QUILT_HOME="$work/home" "$work/quilt" swift project add team >/dev/null
QUILT_HOME="$work/home" "$work/quilt" swift user add team:bob --password bobs-password >/dev/null
bob() { env -u OS_AUTH_URL -u OS_USERNAME -u OS_PASSWORD -u OS_PROJECT_NAME -u OS_IDENTITY_API_VERSION \
	"$swift" -V 1.0 -A "$ST_AUTH" -U team:bob -K bobs-password "$@"; }
v3 upload --object-name doc aclc small >/dev/null
fails bob download aclc doc -o -
v3 post -r 'team:*' aclc
out=$(v3 stat aclc)
grep -q 'Read ACL: team:\*' <<<"$out" || { echo "$out"; exit 1; }
out=$(bob download aclc doc -o -)
test "$out" = "$(cat small)"
fails bob upload --object-name bobs aclc small
v3 post -w 'team' aclc
bob upload --object-name bobs aclc small >/dev/null
# The grant is the S3 one: bob's project's access key may now write.
QUILT_HOME="$work/home" "$work/quilt" key list | grep -q 'aclc=write' || { QUILT_HOME="$work/home" "$work/quilt" key list; exit 1; }
# A user element (PROJECT:USER) is Swift's alone: bob reads, the key of
# his project gets no grant.
v3 upload --object-name doc useracl small >/dev/null
v3 post -r 'team:bob' useracl
out=$(bob download useracl doc -o -)
test "$out" = "$(cat small)"
if QUILT_HOME="$work/home" "$work/quilt" key list | grep -q 'useracl='; then echo "a user ACL became a key grant"; exit 1; fi
v3 post -r '.r:*,.rlistings' aclc
storage=$(v3 stat -v | sed -n 's/^ *StorageURL: //p')
"$py" - "$storage/aclc" <<'PY'
import sys, urllib.request, urllib.error
base = sys.argv[1]
assert urllib.request.urlopen(base + "/doc").read() == b"small object\n", "public read"
assert set(urllib.request.urlopen(base).read().decode().split()) == {"bobs", "doc"}, "public listing"
try:
    urllib.request.urlopen(urllib.request.Request(base + "/doc", data=b"x", method="PUT"))
    raise SystemExit("anonymous PUT accepted")
except urllib.error.HTTPError as e:
    assert e.code == 401, e.code
print("public read: ok")
PY

say "swiftclient library"
"$py" - <<'PY'
import os
from swiftclient.client import Connection
from swiftclient.exceptions import ClientException
conn = Connection(authurl=os.environ["OS_AUTH_URL"], user=os.environ["OS_USERNAME"], key=os.environ["OS_PASSWORD"],
                  auth_version="3", os_options={"project_name": os.environ["OS_PROJECT_NAME"],
                  "user_domain_name": "Default", "project_domain_name": "Default", "region_name": os.environ["OS_REGION_NAME"]})
conn.put_container("lib", headers={"X-Container-Meta-Made-By": "swiftclient"})
etag = conn.put_object("lib", "a/b.txt", contents=b"library bytes", content_type="text/plain", headers={"X-Object-Meta-N": "1"})
hdrs, body = conn.get_object("lib", "a/b.txt")
assert body == b"library bytes" and hdrs["etag"] == etag and hdrs["x-object-meta-n"] == "1", hdrs
hdrs, body = conn.get_object("lib", "a/b.txt", headers={"Range": "bytes=8-"})
assert body == b"bytes", body
_, objs = conn.get_container("lib", delimiter="/")
assert objs == [{"subdir": "a/"}], objs
assert conn.head_container("lib")["x-container-meta-made-by"] == "swiftclient"
try:
    conn.get_object("lib", "missing")
    raise SystemExit("missing object read")
except ClientException as e:
    assert e.http_status == 404, e
conn.delete_object("lib", "a/b.txt")
conn.delete_container("lib")

# Bulk upload: a tar.gz expanded under a container's prefix (Swift's
# extract-archive; the answer is 200, its outcome in the body).
import io, tarfile
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz") as tar:
    for name, data in (("docs/a.txt", b"alpha"), ("docs/b.txt", b"beta")):
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
conn.put_container("unpacked")
resp = {}
conn.put_object("unpacked", "pre", buf.getvalue(), query_string="extract-archive=tar.gz",
                headers={"Accept": "application/json"}, response_dict=resp)
assert resp["status"] == 200, resp
_, objs = conn.get_container("unpacked")
assert [o["name"] for o in objs] == ["pre/docs/a.txt", "pre/docs/b.txt"], objs
assert conn.get_object("unpacked", "pre/docs/b.txt")[1] == b"beta"
for o in objs:
    conn.delete_object("unpacked", o["name"])
conn.delete_container("unpacked")
print("swiftclient library: ok")
PY

say "swift-bench"
"$venv/bin/swift-bench" -A "$ST_AUTH" -U "$ST_USER" -K "$ST_KEY" -C 1 --container-name quiltbench \
	-c 4 -n 50 -g 50 -s 4096 >bench.log 2>&1 || { cat bench.log; exit 1; }
grep -E 'PUTS|GETS|DEL' bench.log
if grep -qE '[1-9][0-9]* failures' bench.log; then cat bench.log; exit 1; fi

say "all Swift clients passed"
