#!/usr/bin/env bash
# Plain programs on a FUSE mount of a bucket (quilt mount, a separate
# process) over `quilt up` (10 nodes and the gateway on 127.0.0.1): cp -r and
# diff -r, mv of a directory, rm -r, git (init, commit, clone into the mount,
# fsck), tar in and out byte-identical, then fusermount3 -u and the mount
# process exits 0. Then a mount of a configuration filesystem namespace
# (quilt mount cfs:NAME) by a second user granted one directory: cp -r,
# diff -r, a symbolic link, chmod +x and a script run from the mount,
# writes elsewhere refused with EACCES while reads work, quilt cfs cat of
# what the mount wrote (by the namespace's owner, through the grid, and by
# the same user beside the mount), the owner's writes showing in the
# mount, fusermount3 -u and SIGINT. Installs fuse3 and git with apt when missing; fails if
# they cannot be installed or /dev/fuse is missing: nothing is skipped.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pid=
mpid=
mnt="$work/mnt"
cmnt="$work/cmnt"
cpid=
cleanup() {
	mountpoint -q "$mnt" 2>/dev/null && { fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -u -z "$mnt" 2>/dev/null; } || true
	mountpoint -q "$cmnt" 2>/dev/null && { fusermount3 -u "$cmnt" 2>/dev/null || fusermount3 -u -z "$cmnt" 2>/dev/null; } || true
	[ -n "$mpid" ] && kill "$mpid" 2>/dev/null && wait "$mpid" 2>/dev/null || true
	[ -n "$cpid" ] && kill "$cpid" 2>/dev/null && wait "$cpid" 2>/dev/null || true
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
say() { printf '\n== %s\n' "$*"; }
t() { timeout 30 "$@"; } # every step on the mount is bounded

need=()
command -v fusermount3 >/dev/null || need+=(fuse3)
command -v git >/dev/null || need+=(git)
if [ ${#need[@]} -gt 0 ]; then
	say "installing ${need[*]}"
	if [ "$(id -u)" = 0 ]; then apt-get install -y -qq "${need[@]}" >/dev/null || { apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null; }
	else sudo apt-get install -y -qq "${need[@]}" >/dev/null; fi
fi
[ -e /dev/fuse ] || { echo "no /dev/fuse: cannot mount here"; exit 1; }

say "starting quilt up"
# QUILT_BIN: a quilt binary built before (make test passes its own).
if [ -n "${QUILT_BIN:-}" ]; then cp "$QUILT_BIN" "$work/quilt"; else
	(cd "$root" && go build -o "$work/quilt" ./cmd/quilt)
fi
export QUILT_HOME="$work/home"
"$work/quilt" up --port 0 --no-fsync >"$work/up.log" 2>&1 &
pid=$!
env="$work/home/grid/gateway/s3.env"
for _ in $(seq 1 120); do [ -s "$env" ] && break; sleep 0.5; done
[ -s "$env" ] || { cat "$work/up.log"; echo "quilt up did not start"; exit 1; }

say "quilt mount"
mkdir -p "$mnt"
# A bucket that does not exist is an error, and nothing is mounted.
if timeout 30 "$work/quilt" mount --dir "$work/nogw" nosuch "$mnt" 2>"$work/err"; then echo "a missing bucket was mounted"; exit 1; fi
grep -q 'no bucket "nosuch"' "$work/err"
if mountpoint -q "$mnt"; then echo "mounted anyway"; exit 1; fi
# A gateway directory serves one process: the mount gets its own, with a
# copy of up's registry, so it sees the same buckets.
mkdir -p "$work/mgw" "$mnt"
cp "$work/home/grid/gateway/registry" "$work/mgw/registry"
"$work/quilt" mount --dir "$work/mgw" --create --inline 1024 files "$mnt" >"$work/mount.log" 2>&1 &
mpid=$!
for _ in $(seq 1 60); do mountpoint -q "$mnt" && break; sleep 0.5; done
mountpoint -q "$mnt" || { cat "$work/mount.log"; echo "quilt mount did not mount"; exit 1; }
t df "$mnt" >/dev/null

say "cp -r, diff -r, mv, rm -r"
mkdir -p "$work/tree/a/b" "$work/tree/c"
for i in $(seq 1 20); do head -c $((i * 7919)) /dev/urandom >"$work/tree/a/f$i"; done
head -c 2000000 /dev/urandom >"$work/tree/a/b/large"
echo hi >"$work/tree/c/small"
: >"$work/tree/c/empty"
t cp -r "$work/tree" "$mnt/tree"
t diff -r "$work/tree" "$mnt/tree"
t mv "$mnt/tree/a" "$mnt/tree/moved"
[ ! -e "$mnt/tree/a" ]
t diff -r "$work/tree/a" "$mnt/tree/moved"
printf 'XYZ' | t dd of="$mnt/tree/moved/f3" bs=1 seek=100 conv=notrunc status=none
printf 'XYZ' | t dd of="$work/tree/a/f3" bs=1 seek=100 conv=notrunc status=none
t cmp "$work/tree/a/f3" "$mnt/tree/moved/f3"
# Links are refused with a clear error.
if t ln -s f3 "$mnt/tree/moved/link" 2>"$work/err"; then echo "a symbolic link was made"; exit 1; fi
grep -q 'not permitted' "$work/err"
if t ln "$mnt/tree/moved/f3" "$mnt/tree/moved/hard" 2>"$work/err"; then echo "a hard link was made"; exit 1; fi
grep -q 'not permitted' "$work/err"
t rm -r "$mnt/tree"
[ ! -e "$mnt/tree" ]

say "git on the mount"
export GIT_AUTHOR_NAME=q GIT_AUTHOR_EMAIL=q@example.org GIT_COMMITTER_NAME=q GIT_COMMITTER_EMAIL=q@example.org
export GIT_CONFIG_NOSYSTEM=1 HOME="$work"
git config --global init.defaultBranch main
git config --global safe.directory '*'
t git init -q "$mnt/repo"
for i in 1 2 3; do echo "file $i" >"$mnt/repo/f$i.txt"; done
t git -C "$mnt/repo" add .
t git -C "$mnt/repo" commit -q -m first
echo changed >>"$mnt/repo/f1.txt"
t git -C "$mnt/repo" commit -q -am second
[ "$(t git -C "$mnt/repo" rev-list --count HEAD)" = 2 ]
[ -z "$(t git -C "$mnt/repo" status --porcelain)" ]
t git -C "$mnt/repo" fsck --no-progress
# A local bare repository cloned into the mount.
git init -q "$work/src"
for i in $(seq 1 10); do head -c $((i * 1000)) /dev/urandom | base64 >"$work/src/g$i"; git -C "$work/src" add "g$i"; git -C "$work/src" commit -q -m "g$i"; done
git clone -q --bare "$work/src" "$work/bare.git"
t git clone -q "$work/bare.git" "$mnt/clone"
t git -C "$mnt/clone" fsck --no-progress
[ "$(t git -C "$mnt/clone" rev-parse HEAD)" = "$(git -C "$work/src" rev-parse HEAD)" ]
t diff -r --exclude=.git "$work/src" "$mnt/clone"

say "tar in and out"
taropts=(--sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner)
mkdir -p "$work/tsrc/d/e"
for i in $(seq 1 15); do head -c $((i * 3331)) /dev/urandom >"$work/tsrc/d/t$i"; done
echo leaf >"$work/tsrc/d/e/leaf"
chmod 600 "$work/tsrc/d/t1"
tar -C "$work/tsrc" -cf "$work/src.tar" "${taropts[@]}" .
mkdir "$mnt/untar"
t tar -C "$mnt/untar" -xf "$work/src.tar"
t tar -C "$mnt/untar" -cf "$work/back.tar" "${taropts[@]}" .
cmp "$work/src.tar" "$work/back.tar"

say "fusermount3 -u"
t fusermount3 -u "$mnt"
rc=0
timeout 20 tail --pid="$mpid" -f /dev/null || { echo "quilt mount still runs after fusermount3 -u"; exit 1; }
wait "$mpid" || rc=$?
mpid=
[ "$rc" = 0 ] || { cat "$work/mount.log"; echo "quilt mount exited $rc"; exit 1; }
# Mounted again, what was written is there.
"$work/quilt" mount --dir "$work/mgw" files "$mnt" >"$work/mount2.log" 2>&1 &
mpid=$!
for _ in $(seq 1 60); do mountpoint -q "$mnt" && break; sleep 0.5; done
t git -C "$mnt/clone" fsck --no-progress
kill -TERM "$mpid"
rc=0
wait "$mpid" || rc=$?
mpid=
[ "$rc" = 0 ] || { cat "$work/mount2.log"; echo "quilt mount exited $rc on SIGTERM"; exit 1; }
if mountpoint -q "$mnt"; then echo "still mounted after SIGTERM"; exit 1; fi

say "quilt mount cfs:NAME"
q() { t "$work/quilt" "$@"; }
grid=$(sed -n 's/.*"grid": *"\([^"]*\)".*/\1/p' "$QUILT_HOME/config.json")
[ -n "$grid" ] || { cat "$QUILT_HOME/config.json"; echo "no grid in config.json"; exit 1; }
# Alice (this Home) owns namespace conf; bob (another Home, another
# machine) gets his own key, granted /apps only.
cap=$(q cfs bootstrap conf)
echo "127.0.0.1 localhost" | q cfs write /etc/hosts
q cfs mkdir /apps
bob="$work/home-bob"
qb() { QUILT_HOME="$bob" QUILT_GRID="$grid" t "$work/quilt" "$@"; }
qb cfs import "$cap" --name conf 2>/dev/null
pub=$(qb cfs genkey 2>/dev/null)
q cfs grant "$pub" /apps
mkdir -p "$cmnt"
# A namespace that does not exist is an error, and nothing is mounted.
if QUILT_HOME="$bob" QUILT_GRID="$grid" timeout 30 "$work/quilt" mount cfs:nosuch "$cmnt" 2>"$work/err"; then echo "a missing namespace was mounted"; exit 1; fi
grep -q 'no namespace "nosuch"' "$work/err"
QUILT_HOME="$bob" QUILT_GRID="$grid" "$work/quilt" mount cfs:conf "$cmnt" >"$work/cmount.log" 2>&1 &
cpid=$!
for _ in $(seq 1 60); do mountpoint -q "$cmnt" && break; sleep 0.5; done
mountpoint -q "$cmnt" || { cat "$work/cmount.log"; echo "quilt mount cfs:conf did not mount"; exit 1; }
# Alice's grant reaches bob's node by gossip: until then his writes are refused.
for _ in $(seq 1 60); do : 2>/dev/null >"$cmnt/apps/probe" && break; sleep 0.5; done
t rm "$cmnt/apps/probe"
# Alice's entries arrive in any order: wait for /etc/hosts too.
for _ in $(seq 1 60); do [ -e "$cmnt/etc/hosts" ] && break; sleep 0.5; done
[ "$(t cat "$cmnt/etc/hosts")" = "127.0.0.1 localhost" ]

say "cfs mount: cp -r, diff -r, ln -s, chmod +x, mv, rm -r"
t cp -r "$work/tree" "$cmnt/apps/tree"
t diff -r "$work/tree" "$cmnt/apps/tree"
t ln -s tree/c/small "$cmnt/apps/current"
[ "$(readlink "$cmnt/apps/current")" = tree/c/small ]
[ "$(t cat "$cmnt/apps/current")" = hi ]
printf '#!/bin/sh\necho ran from the mount\n' >"$cmnt/apps/run.sh"
t chmod +x "$cmnt/apps/run.sh"
[ -x "$cmnt/apps/run.sh" ]
# The mount is another process here, so running a program stored on it is fine.
[ "$(t "$cmnt/apps/run.sh")" = "ran from the mount" ]
t mv "$cmnt/apps/tree/a/b" "$cmnt/apps/b2"
t diff -r "$work/tree/a/b" "$cmnt/apps/b2"

say "cfs mount: no grant outside /apps"
if t sh -c "echo x >'$cmnt/etc/new'" 2>"$work/err"; then echo "a file was made without a grant"; exit 1; fi
grep -q 'Permission denied' "$work/err"
if t sh -c "echo x >'$cmnt/etc/hosts'" 2>"$work/err"; then echo "a file was overwritten without a grant"; exit 1; fi
grep -q 'Permission denied' "$work/err"
if t mkdir "$cmnt/etc/d" 2>"$work/err"; then echo "a directory was made without a grant"; exit 1; fi
grep -q 'Permission denied' "$work/err"
if t rm "$cmnt/etc/hosts" 2>"$work/err"; then echo "a file was removed without a grant"; exit 1; fi
grep -q 'Permission denied' "$work/err"
if t cp -r "$work/tree" "$cmnt/tree" 2>"$work/err"; then echo "cp -r to the root without a grant"; exit 1; fi
grep -q 'Permission denied' "$work/err"
[ "$(t cat "$cmnt/etc/hosts")" = "127.0.0.1 localhost" ]
[ ! -e "$cmnt/etc/new" ] && [ ! -e "$cmnt/tree" ]

say "cfs mount: quilt cfs sees what the mount wrote, and the mount what cfs wrote"
# Alice, through the grid (gossip brings bob's entries to her node, in
# any order).
alice_has() {
	[ "$(q cfs cat /apps/current 2>/dev/null)" = hi ] &&
		q cfs cat /apps/b2/large 2>/dev/null | cmp -s - "$work/tree/a/b/large" &&
		q cfs cat /apps/tree/a/f7 2>/dev/null | cmp -s - "$work/tree/a/f7" &&
		q cfs ls -l /apps 2>/dev/null | grep -q '^-rwx.*run\.sh'
}
for _ in $(seq 1 60); do alice_has && break; sleep 0.5; done
[ "$(q cfs cat /apps/current)" = hi ]
q cfs cat /apps/b2/large | cmp - "$work/tree/a/b/large"
q cfs cat /apps/tree/a/f7 | cmp - "$work/tree/a/f7"
q cfs ls -l /apps | grep -q '^-rwx.*run\.sh'
q cfs ls /apps | grep -q 'current -> tree/c/small'
# Bob's own cfs commands run beside his mount (it keeps a replica of its own).
for _ in $(seq 1 60); do qb cfs cat /apps/tree/c/small 2>/dev/null | grep -qx hi && break; sleep 0.5; done
qb cfs cat /apps/tree/c/small | grep -qx hi
# Alice's new entries show in bob's mount.
echo "from alice" | q cfs write /apps/from-alice
for _ in $(seq 1 60); do [ "$(cat "$cmnt/apps/from-alice" 2>/dev/null)" = "from alice" ] && break; sleep 0.5; done
[ "$(t cat "$cmnt/apps/from-alice")" = "from alice" ]
t rm -r "$cmnt/apps/tree"
[ ! -e "$cmnt/apps/tree" ]

say "cfs mount: fusermount3 -u, then SIGINT"
t fusermount3 -u "$cmnt"
timeout 20 tail --pid="$cpid" -f /dev/null || { echo "quilt mount cfs: still runs after fusermount3 -u"; exit 1; }
rc=0
wait "$cpid" || rc=$?
cpid=
[ "$rc" = 0 ] || { cat "$work/cmount.log"; echo "quilt mount cfs: exited $rc"; exit 1; }
QUILT_HOME="$bob" QUILT_GRID="$grid" "$work/quilt" mount --ns conf cfs: "$cmnt" >"$work/cmount2.log" 2>&1 &
cpid=$!
for _ in $(seq 1 60); do mountpoint -q "$cmnt" && break; sleep 0.5; done
t cmp "$cmnt/apps/b2/large" "$work/tree/a/b/large"
[ ! -e "$cmnt/apps/tree" ]
kill -INT "$cpid"
rc=0
wait "$cpid" || rc=$?
cpid=
[ "$rc" = 0 ] || { cat "$work/cmount2.log"; echo "quilt mount cfs: exited $rc on SIGINT"; exit 1; }
if mountpoint -q "$cmnt"; then echo "still mounted after SIGINT"; exit 1; fi

say "all mount clients passed"
