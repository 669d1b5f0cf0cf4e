#!/usr/bin/env bash
# ownCloud/Nextcloud clients against `quilt up` (10 nodes, the gateway and
# its WebDAV server, on 127.0.0.1): status.php and the OCS capabilities,
# davfs2 mounted (a tree written with cp -r, unmounted, mounted again and
# compared with diff -r), the ownCloud desktop sync client's command line
# (owncloudcmd) syncing a folder both ways with a conflict and a 200 MB
# file (chunked upload), the Nextcloud one's (nextcloudcmd) syncing a
# folder up (a 30 MB file in chunks) and down, and rclone's owncloud and nextcloud WebDAV
# vendors (copy, check, and the MD5 they read from oc:checksums).
# Installs davfs2, owncloud-client-cmd, nextcloud-desktop-cmd and rclone
# with apt when missing,
# and fails if a client cannot be installed: nothing is skipped. Needs
# root (mount) and /dev/fuse.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pid=
mnt="$work/mnt"
cleanup() {
	mountpoint -q "$mnt" 2>/dev/null && umount "$mnt" 2>/dev/null || true
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
say() { printf '\n== %s\n' "$*"; }
fail() { echo "FAIL: $*"; exit 1; }

need=()
command -v mount.davfs >/dev/null || need+=(davfs2)
command -v owncloudcmd >/dev/null || need+=(owncloud-client-cmd)
command -v nextcloudcmd >/dev/null || need+=(nextcloud-desktop-cmd)
command -v rclone >/dev/null || need+=(rclone)
if [ ${#need[@]} -gt 0 ]; then
	say "installing ${need[*]}"
	if [ "$(id -u)" = 0 ]; then DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null; }
	else sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null; fi
fi
say "client versions"
owncloudcmd --version 2>&1 | sed -n 1p
nextcloudcmd --version 2>&1 | sed -n 1p
mount.davfs -V 2>&1 | sed -n 1p
rclone version 2>&1 | sed -n 1p

say "starting quilt up"
# QUILT_BIN: a quilt binary built before (make test passes its own).
if [ -n "${QUILT_BIN:-}" ]; then cp "$QUILT_BIN" "$work/quilt"; else
	(cd "$root" && go build -o "$work/quilt" ./cmd/quilt)
fi
QUILT_HOME="$work/home" "$work/quilt" up --port 0 --no-fsync >"$work/up.log" 2>&1 &
pid=$!
env="$work/home/grid/gateway/webdav.env"
for _ in $(seq 1 120); do [ -s "$env" ] && break; sleep 0.5; done
[ -s "$env" ] || { cat "$work/up.log"; fail "quilt up did not start"; }
# shellcheck disable=SC1090
. "$env"
srv=$QUILT_WEBDAV_SERVER
u=$QUILT_WEBDAV_USER
pw=$QUILT_WEBDAV_PASSWORD
files="$srv/remote.php/dav/files/$u"
c=(curl -sS --fail -u "$u:$pw")

say "status.php and OCS"
curl -sS --fail "$srv/status.php" | tee "$work/status.json"
grep -q '"installed":true' "$work/status.json"
grep -q '"maintenance":false' "$work/status.json"
"${c[@]}" "$srv/ocs/v2.php/cloud/capabilities?format=json" | grep -q '"chunking":"1.0"'
"${c[@]}" "$srv/ocs/v1.php/cloud/capabilities" | grep -q '<statuscode>100</statuscode>'
"${c[@]}" "$srv/ocs/v1.php/cloud/user?format=json" | grep -q "\"id\":\"$u\""
code=$(curl -s -o /dev/null -w '%{http_code}' "$srv/ocs/v1.php/cloud/user?format=json")
[ "$code" = 401 ] || fail "OCS user without a login: $code"

# A tree of files: small text, odd sizes, a 3 MB file, a directory in a
# directory, a name with a space and non-ASCII letters.
mktree() {
	mkdir -p "$1/docs/deep/er" "$1/photos"
	for i in $(seq 1 20); do
		echo "note $i of $2" >"$1/docs/n$i.txt"
		head -c $((i * 1013)) /dev/urandom >"$1/photos/p$i.jpg"
	done
	echo "deep $2" >"$1/docs/deep/er/leaf.txt"
	head -c 3000000 /dev/urandom >"$1/photos/big raw Ünïcode.bin"
}

say "davfs2: cp -r, umount, mount, diff -r"
# mount.davfs runs as the user davfs2 once mounted: it reaches its cache
# through $work (traverse only) and writes it as its group, as it does
# /var/cache/davfs2.
chmod 0711 "$work"
davcache() { rm -rf "$work/davcache" && mkdir -m 0775 "$work/davcache" && chown root:davfs2 "$work/davcache"; }
mkdir -p "$mnt"
davcache
printf '%s %s %s\n' "$files/" "$u" "$pw" >"$work/davfs2.secrets"
chmod 600 "$work/davfs2.secrets"
cat >"$work/davfs2.conf" <<EOF
# buf_size 64: davfs2's default buffer does not work with this kernel's fuse.
buf_size 64
secrets $work/davfs2.secrets
cache_dir $work/davcache
use_locks 1
EOF
mount -t davfs "$files/" "$mnt" -o "conf=$work/davfs2.conf" </dev/null
mktree "$work/davsrc" davfs
mkdir "$mnt/davfs"
cp -r "$work/davsrc/." "$mnt/davfs/"
umount "$mnt"
# Read back through WebDAV with curl, then mounted again on an empty cache.
"${c[@]}" -o "$work/davleaf" "$files/davfs/docs/deep/er/leaf.txt"
cmp "$work/davleaf" "$work/davsrc/docs/deep/er/leaf.txt"
davcache
mount -t davfs "$files/" "$mnt" -o "conf=$work/davfs2.conf" </dev/null
diff -r "$work/davsrc" "$mnt/davfs"
df -h "$mnt" | tail -1
umount "$mnt"

say "owncloudcmd: up, down, a conflict, a 200 MB file"
oc() { # oc DIR: one sync of DIR with the server's root
	HOME="$work/ochome" timeout 600 owncloudcmd --non-interactive --exclude "$work/exclude.lst" \
		-u "$u" -p "$pw" "$1" "$srv" >"$work/oc.log" 2>&1 || { tail -30 "$work/oc.log"; fail "owncloudcmd $1"; }
	# owncloudcmd exits 0 after printing its usage when it cannot parse
	# its arguments (a password that starts with "-" is taken for an
	# option: quilt's generated passwords never do, see
	# gateway.NewPassword); that is a failure here.
	grep -q "Sync run took" "$work/oc.log" || { tail -30 "$work/oc.log"; fail "owncloudcmd $1 ended without a sync run"; }
	grep -E "Chunked upload|MOVE of|conflict|Sync run took" "$work/oc.log" | cut -c1-220 || true
}
printf '*~\n.~lock.*\n' >"$work/exclude.lst" # the system's list is not installed by owncloud-client-cmd
l1="$work/sync1"
mktree "$l1/up" owncloud
head -c 200000000 /dev/urandom >"$l1/big200.bin"
echo "first" >"$l1/conflict.txt"
oc "$l1"
# Up: every file is on the server, the 200 MB one by chunks.
grep -q "remote.php/dav/uploads/$u/" "$work/oc.log" || { tail -40 "$work/oc.log"; fail "the 200 MB file did not go up in chunks"; }
"${c[@]}" "$files/big200.bin" | sha256sum | cut -d' ' -f1 >"$work/big.server"
sha256sum <"$l1/big200.bin" | cut -d' ' -f1 >"$work/big.local"
cmp "$work/big.server" "$work/big.local" || fail "200 MB file differs on the server"
"${c[@]}" -o "$work/n7" "$files/up/docs/n7.txt" && cmp "$work/n7" "$l1/up/docs/n7.txt"
# Down: files put through WebDAV (both URLs) come to the folder.
"${c[@]}" -X MKCOL "$files/down" -o /dev/null
echo "from curl" | "${c[@]}" -T - "$files/down/curl.txt" -o /dev/null
echo "from dav" | "${c[@]}" -T - "$QUILT_WEBDAV_URL$u/down/dav.txt" -o /dev/null
# A conflict: the same file changed on both sides between two syncs.
echo "changed on the server" | "${c[@]}" -T - "$files/conflict.txt" -o /dev/null
echo "changed locally" >"$l1/conflict.txt" # another size: a change whatever the time
oc "$l1"
[ "$(cat "$l1/down/curl.txt")" = "from curl" ] || fail "down/curl.txt did not come down"
[ "$(cat "$l1/down/dav.txt")" = "from dav" ] || fail "down/dav.txt did not come down"
ls "$l1"
[ "$(cat "$l1/conflict.txt")" = "changed on the server" ] || fail "conflict.txt is not the server's version"
cc=$(find "$l1" -maxdepth 1 -name 'conflict (conflicted copy *).txt' -print -quit)
[ -n "$cc" ] || fail "no conflict copy"
[ "$(cat "$cc")" = "changed locally" ] || fail "the conflict copy is not the local change"
[ "$("${c[@]}" "$files/conflict.txt")" = "changed on the server" ] || fail "the server lost its version"
echo "conflict: the server's version in conflict.txt, the local one kept in '$(basename "$cc")'"
# A second folder syncs everything down, the 200 MB file too.
l2="$work/sync2"
mkdir -p "$l2"
oc "$l2"
diff -r -x '.sync_*' -x '._sync_*' -x '.owncloudsync.log' -x 'conflict (conflicted copy *' "$l1" "$l2"
echo "second folder: identical"

say "nextcloudcmd: up (in chunks) and down"
l3="$work/sync3"
mktree "$l3/nc" nextcloud
head -c 30000000 /dev/urandom >"$l3/nc/n30.bin"
echo "for nextcloud" | "${c[@]}" -T - "$files/down/nc.txt" -o /dev/null
HOME="$work/nchome" timeout 300 nextcloudcmd --non-interactive --exclude "$work/exclude.lst" \
	-u "$u" -p "$pw" "$l3" "$srv" >"$work/nc.log" 2>&1 || { tail -30 "$work/nc.log"; fail "nextcloudcmd"; }
grep -E "Chunked upload|MOVE of|Sync run took" "$work/nc.log" | cut -c1-220 || true
grep -q "remote.php/dav/uploads/$u/" "$work/nc.log" || fail "nextcloudcmd: the 30 MB file did not go up in chunks"
[ "$("${c[@]}" "$files/nc/n30.bin" | sha256sum)" = "$(sha256sum <"$l3/nc/n30.bin")" ] || fail "nextcloudcmd: n30.bin differs on the server"
[ "$(cat "$l3/down/nc.txt")" = "for nextcloud" ] || fail "nextcloudcmd: down/nc.txt did not come down"
cmp "$l3/big200.bin" "$l1/big200.bin" || fail "nextcloudcmd: big200.bin differs"

say "rclone: owncloud and nextcloud vendors"
mktree "$work/rc" rclone
head -c 12000000 /dev/urandom >"$work/rc/chunked.bin" # Debian's rclone 1.60 sends it whole
obs=$(rclone obscure "$pw")
for vendor in owncloud nextcloud; do
	rc=(env -u AWS_CA_BUNDLE RCLONE_CONFIG=/dev/null timeout 120 rclone --webdav-url "$files/" --webdav-vendor "$vendor"
		--webdav-user "$u" --webdav-pass "$obs")
	"${rc[@]}" -v copy "$work/rc" ":webdav:rc-$vendor" 2>&1 | grep -E "Copied|ERROR|chunk" | sed -n '1,3p;$p'
	"${rc[@]}" check "$work/rc" ":webdav:rc-$vendor"
	"${rc[@]}" check --download "$work/rc" ":webdav:rc-$vendor"
	# The hash rclone reads from oc:checksums (MD5 for owncloud, SHA-1
	# for nextcloud in rclone 1.60) is the local file's, and check used it.
	sum=md5sum
	[ "$vendor" = nextcloud ] && sum=sha1sum
	want=$($sum <"$work/rc/chunked.bin" | cut -d' ' -f1)
	got=$("${rc[@]}" $sum ":webdav:rc-$vendor/chunked.bin" | cut -d' ' -f1)
	[ "$got" = "$want" ] || fail "$vendor: $sum $got, want $want"
	if "${rc[@]}" check "$work/rc" ":webdav:rc-$vendor" 2>&1 | grep "could not be checked"; then fail "$vendor: rclone check without hashes"; fi
done

say "all ownCloud/Nextcloud clients passed"
