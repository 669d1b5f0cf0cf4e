#!/usr/bin/env bash
# Real SFTP clients against `quilt up` (10 nodes, the gateway and its SFTP
# server, on 127.0.0.1): OpenSSH's sftp in batch mode, scp up and down, and
# rsync -e ssh of a tree with --checksum (down again, diff -r, a second run
# that sends nothing, one changed file, --delete, a refused command), and
# an sshfs mount with the Tahoe-LAFS paper's options (cp -r, diff -r, mv of
# a directory and of a file over another, rm -r, unmount).
# Installs openssh-client, rsync, bubblewrap (the server runs rsync in its
# sandbox), sshfs and fuse3 with apt when missing; fails if a client cannot
# be installed or /dev/fuse is missing: nothing is skipped.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pid=
watchdog=
mnt="$work/mnt"
cleanup() {
	[ -n "$watchdog" ] && kill "$watchdog" 2>/dev/null || true
	mountpoint -q "$mnt" 2>/dev/null && { fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -u -z "$mnt"; } || true
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
say() { printf '\n== %s\n' "$*"; }

need=()
command -v sftp >/dev/null && command -v scp >/dev/null || need+=(openssh-client)
command -v rsync >/dev/null || need+=(rsync)
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v sshfs >/dev/null || need+=(sshfs)
command -v fusermount3 >/dev/null || need+=(fuse3)
if [ ${#need[@]} -gt 0 ]; then
	say "installing ${need[*]}"
	if [ "$(id -u)" = 0 ]; then apt-get install -y -qq "${need[@]}" >/dev/null || { apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null; }
	else sudo apt-get install -y -qq "${need[@]}" >/dev/null; fi
fi
[ -e /dev/fuse ] || { echo "no /dev/fuse: sshfs cannot mount here"; exit 1; }

say "starting quilt up"
# QUILT_BIN: a quilt binary built before (make test passes its own).
if [ -n "${QUILT_BIN:-}" ]; then cp "$QUILT_BIN" "$work/quilt"; else
	(cd "$root" && go build -o "$work/quilt" ./cmd/quilt)
fi
QUILT_HOME="$work/home" "$work/quilt" up --port 0 --no-fsync >"$work/up.log" 2>&1 &
pid=$!
env="$work/home/grid/gateway/sftp.env"
for _ in $(seq 1 120); do [ -s "$env" ] && break; sleep 0.5; done
[ -s "$env" ] || { cat "$work/up.log"; echo "quilt up did not start"; exit 1; }
# shellcheck disable=SC1090
. "$env"
ssh_opts=(-o BatchMode=yes -o IdentitiesOnly=yes -o StrictHostKeyChecking=yes
	-o "UserKnownHostsFile=$QUILT_SFTP_KNOWN_HOSTS" -i "$QUILT_SFTP_KEY")
dest="$QUILT_SFTP_USER@$QUILT_SFTP_HOST"

say "sftp -b"
head -c 3000000 /dev/urandom >"$work/big"
echo "small file" >"$work/small"
cat >"$work/batch" <<EOF
mkdir docs
put $work/big docs/big
put $work/small docs/small
ls -l docs
rename docs/small docs/small2
get docs/big $work/big.back
chmod 600 docs/small2
rm docs/small2
EOF
out=$(sftp "${ssh_opts[@]}" -P "$QUILT_SFTP_PORT" -b "$work/batch" "$dest")
echo "$out"
grep -q 'big' <<<"$out"
cmp "$work/big" "$work/big.back"
# A wrong key is refused.
ssh-keygen -q -t ed25519 -N '' -f "$work/stranger"
if sftp -o BatchMode=yes -o IdentitiesOnly=yes -o StrictHostKeyChecking=yes -o "UserKnownHostsFile=$QUILT_SFTP_KNOWN_HOSTS" \
	-i "$work/stranger" -P "$QUILT_SFTP_PORT" -b /dev/null "$dest" 2>/dev/null; then
	echo "an unknown key was let in"; exit 1
fi
# Links are refused.
if echo "symlink docs/big docs/link" | sftp "${ssh_opts[@]}" -P "$QUILT_SFTP_PORT" -b - "$dest" 2>"$work/err"; then
	echo "symlink was accepted"; exit 1
fi
cat "$work/err"

say "scp up and down"
scp -q "${ssh_opts[@]}" -P "$QUILT_SFTP_PORT" "$work/big" "$dest:/docs/scp-big"
scp -q -p "${ssh_opts[@]}" -P "$QUILT_SFTP_PORT" "$work/small" "$dest:/docs/scp-small"
scp -q "${ssh_opts[@]}" -P "$QUILT_SFTP_PORT" "$dest:/docs/scp-big" "$work/scp-big.back"
cmp "$work/big" "$work/scp-big.back"

say "rsync -e ssh"
rsh="ssh -o BatchMode=yes -o IdentitiesOnly=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile=$QUILT_SFTP_KNOWN_HOSTS -i $QUILT_SFTP_KEY -p $QUILT_SFTP_PORT"
r="$work/rtree"
mkdir -p "$r/a/b/c" "$r/empty-dir"
head -c 3145728 /dev/urandom >"$r/a/b/c/big"
for i in $(seq 1 10); do head -c $((i * 1009)) /dev/urandom >"$r/a/f$i"; done
echo hello >"$r/a/b/hello"
: >"$r/a/empty"
chmod 755 "$r/a/f1"
rsync -a --checksum -e "$rsh" "$r/" "$dest:/rsync/"
rsync -a --checksum -e "$rsh" "$dest:/rsync/" "$work/rtree.back/"
diff -r "$r" "$work/rtree.back"
[ "$(stat -c %a "$work/rtree.back/a/f1")" = 755 ]
# The same with the paths sent on the channel (-s, --secluded-args).
rsync -a -s --checksum -e "$rsh" "$dest:/rsync/" "$work/rtree.s/"
diff -r "$r" "$work/rtree.s"
# Through another door: the same bytes over sftp.
echo "get /rsync/a/b/c/big $work/rsync-big.sftp" | sftp "${ssh_opts[@]}" -P "$QUILT_SFTP_PORT" -b - "$dest" >/dev/null
cmp "$r/a/b/c/big" "$work/rsync-big.sftp"
# A second run sends nothing.
out=$(rsync -a --checksum -i -e "$rsh" "$r/" "$dest:/rsync/")
if grep -E '^[<>c*]' <<<"$out"; then echo "a second rsync sent the lines above"; exit 1; fi
# A change of the same size and time: only --checksum sees it, and only it is sent.
t=$(stat -c %y "$r/a/b/hello")
echo HELLO >"$r/a/b/hello"
touch -d "$t" "$r/a/b/hello"
out=$(rsync -a --checksum -i -e "$rsh" "$r/" "$dest:/rsync/")
echo "$out"
[ "$(grep -cE '^[<>c*]' <<<"$out")" = 1 ] || { echo "want one file sent"; exit 1; }
grep -q '^<f.* a/b/hello$' <<<"$out"
rm "$r/a/f3" && rmdir "$r/empty-dir"
out=$(rsync -a --checksum --delete -i -e "$rsh" "$r/" "$dest:/rsync/")
echo "$out"
grep -q '^\*deleting *a/f3$' <<<"$out"
grep -q '^\*deleting *empty-dir/$' <<<"$out"
rm -rf "$work/rtree.back"
rsync -a --checksum -e "$rsh" "$dest:/rsync/" "$work/rtree.back/"
diff -r "$r" "$work/rtree.back"
# Nothing but rsync's server runs.
if $rsh "$dest" cat /etc/passwd >"$work/out" 2>"$work/err"; then echo "a command ran"; exit 1; fi
cat "$work/err"
grep -q 'only the sftp subsystem and rsync' "$work/err"
[ ! -s "$work/out" ]

say "sshfs"
mkdir -p "$mnt"
# The Tahoe paper's options; this sshfs (3.x) has no big_writes (FUSE 3
# always writes big) and rejects it, so it is left out.
sshfs -p "$QUILT_SFTP_PORT" -o BatchMode=yes,IdentitiesOnly=yes,StrictHostKeyChecking=yes \
	-o "UserKnownHostsFile=$QUILT_SFTP_KNOWN_HOSTS,IdentityFile=$QUILT_SFTP_KEY" \
	-o cache=no,direct_io,sshfs_sync "$dest:/" "$mnt"
# A watchdog: a mount still there after 5 minutes (the script hangs on
# it) is unmounted lazily, so every operation on it fails.
(
	sleep 300 &
	s=$!
	trap 'kill $s 2>/dev/null; exit 0' TERM
	wait $s
	if mountpoint -q "$mnt"; then
		echo "sshfs mount still there after 300 s: unmounting lazily" >&2
		fusermount3 -u -z "$mnt"
	fi
) &
watchdog=$!
mkdir -p "$work/tree/a/b" "$work/tree/c"
for i in $(seq 1 20); do head -c $((i * 7919)) /dev/urandom >"$work/tree/a/f$i"; done
head -c 2000000 /dev/urandom >"$work/tree/a/b/large"
echo hi >"$work/tree/c/small"
: >"$work/tree/c/empty"
cp -r "$work/tree" "$mnt/tree"
diff -r "$work/tree" "$mnt/tree"
mv "$mnt/tree/a" "$mnt/tree/moved"
[ ! -e "$mnt/tree/a" ]
diff -r "$work/tree/a" "$mnt/tree/moved"
# An in-place overwrite in the middle of a file.
printf 'XYZ' | dd of="$mnt/tree/moved/f3" bs=1 seek=100 conv=notrunc status=none
printf 'XYZ' | dd of="$work/tree/a/f3" bs=1 seek=100 conv=notrunc status=none
cmp "$work/tree/a/f3" "$mnt/tree/moved/f3"
# A file moved over another (sshfs sends posix-rename@openssh.com).
mv "$mnt/tree/moved/f5" "$mnt/tree/moved/f4"
[ ! -e "$mnt/tree/moved/f5" ]
cmp "$work/tree/a/f5" "$mnt/tree/moved/f4"
df "$mnt" >/dev/null
rm -r "$mnt/tree"
[ ! -e "$mnt/tree" ]
fusermount3 -u "$mnt"
# What the mount did is what the bucket has: listed over sftp again.
out=$(echo "ls" | sftp "${ssh_opts[@]}" -P "$QUILT_SFTP_PORT" -b - "$dest")
grep -q docs <<<"$out"
if grep -q tree <<<"$out"; then echo "tree still listed after rm -r"; exit 1; fi

say "all SFTP clients passed"
