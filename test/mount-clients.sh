#!/usr/bin/env bash
# Plain programs on a FUSE mount of a bucket (quilt mount, a separate
# process) over `quilt up` (10 nodes and the gateway on 127.0.0.1): cp -r and
# diff -r, mv of a directory, rm -r, git (init, commit, clone into the mount,
# fsck), tar in and out byte-identical, then fusermount3 -u and the mount
# process exits 0. Installs fuse3 and git with apt when missing; fails if
# they cannot be installed or /dev/fuse is missing: nothing is skipped.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pid=
mpid=
mnt="$work/mnt"
cleanup() {
	mountpoint -q "$mnt" 2>/dev/null && { fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -u -z "$mnt" 2>/dev/null; } || true
	[ -n "$mpid" ] && kill "$mpid" 2>/dev/null && wait "$mpid" 2>/dev/null || true
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
(cd "$root" && go build -o "$work/quilt" ./cmd/quilt)
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

say "all mount clients passed"
