#!/usr/bin/env bash
# Real NBD clients against the NBD server of `quilt up` (10 nodes on
# 127.0.0.1; nbd.env), and a `quilt volume serve` beside it: libnbd's nbdinfo (named exports,
# --list) and nbdcopy (1 GiB round trip too), qemu-img (create, convert, compare over nbd://) and
# qemu-io (pattern writes and reads, FUA, flush, write-zeroes, trim),
# structured replies and block status (nbdinfo --map and qemu-img map
# show holes and data; nbdcopy copies a sparse volume out and in), and
# fio (its nbd engine: random 4 KiB writes, then verified reads), ext4 on
# nbdfuse and a loop device (mkfs, files, umount, fsck -n, read back), and
# the volume verbs (create, ls, clone, snapshot, rollback, resize, import,
# export, rm),
# qcow2 import and export, non-persistent attachments, and TLS with a
# client certificate per volume.
# Installs libnbd-bin, qemu-utils, fio, nbdfuse, fuse3, jq with apt when missing; fails if they
# cannot be installed: nothing is skipped. Every step is bounded.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pid=
spid=
mnt=
loop=
cleanup() {
	if [ -n "$mnt" ]; then
		mountpoint -q "$mnt/fs" 2>/dev/null && umount "$mnt/fs" || true
		[ -n "$loop" ] && losetup -d "$loop" 2>/dev/null || true
		fusermount3 -u "$mnt/fuse" 2>/dev/null || true
	fi
	[ -n "$spid" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null || true
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
say() { printf '\n== %s\n' "$*"; }
t() { timeout 60 "$@"; }

need=()
command -v nbdinfo >/dev/null && command -v nbdcopy >/dev/null || need+=(libnbd-bin)
command -v qemu-img >/dev/null && command -v qemu-io >/dev/null || need+=(qemu-utils)
command -v fio >/dev/null || need+=(fio)
command -v nbdfuse >/dev/null || need+=(nbdfuse)
command -v fusermount3 >/dev/null || need+=(fuse3)
command -v mkfs.ext4 >/dev/null && command -v fsck.ext4 >/dev/null || need+=(e2fsprogs)
command -v losetup >/dev/null || need+=(mount)
command -v jq >/dev/null || need+=(jq)
if [ ${#need[@]} -gt 0 ]; then
	say "installing ${need[*]}"
	if [ "$(id -u)" = 0 ]; then timeout 300 apt-get install -y -qq "${need[@]}" >/dev/null || { timeout 120 apt-get update -qq && timeout 300 apt-get install -y -qq "${need[@]}" >/dev/null; }
	else timeout 300 sudo apt-get install -y -qq "${need[@]}" >/dev/null; fi
fi

say "starting quilt up"
# QUILT_BIN: a quilt binary built before (make test passes its own).
if [ -n "${QUILT_BIN:-}" ]; then cp "$QUILT_BIN" "$work/quilt"; else
	(cd "$root" && timeout 120 go build -o "$work/quilt" ./cmd/quilt)
fi
export QUILT_HOME="$work/home"
"$work/quilt" up --port 0 --no-fsync >"$work/up.log" 2>&1 &
pid=$!
gw="$work/home/grid/gateway"
for _ in $(seq 1 120); do [ -s "$gw/nbd.env" ] && break; sleep 0.5; done
[ -s "$gw/nbd.env" ] || { cat "$work/up.log"; echo "quilt up did not start"; exit 1; }
q() { timeout 60 "$work/quilt" volume --dir "$gw" "$@"; }

say "create, import, ls"
q create vm1 --size 64MiB
head -c 5000000 /dev/urandom >"$work/img"
q import img1 "$work/img"
q ls | tee "$work/ls"
grep -q '^vm1 .*64.0 MiB' "$work/ls" || grep -q '^vm1 ' "$work/ls"
grep -q '^img1 ' "$work/ls"
if q create vm1 --size 1MiB 2>/dev/null; then echo "created vm1 twice"; exit 1; fi
if q create 'bad/name' --size 1MiB 2>/dev/null; then echo "accepted a bad name"; exit 1; fi

say "quilt up's NBD server (nbd.env); quilt volume serve beside it needs its own --state"
. "$gw/nbd.env"
url="$QUILT_NBD"
case "$url" in nbd://127.0.0.1:[0-9]*) ;; *) echo "nbd.env: bad QUILT_NBD=$url"; exit 1;; esac
if timeout 20 "$work/quilt" volume --dir "$gw" serve --listen 127.0.0.1:0 >"$work/serve.log" 2>&1; then
	echo "a second server took quilt up's journals"; exit 1
fi
grep -qi 'lock\|in use' "$work/serve.log" || { cat "$work/serve.log"; exit 1; }
"$work/quilt" volume --dir "$gw" serve --state "$work/state2" --listen 127.0.0.1:0 >"$work/serve.log" 2>&1 &
spid=$!
addr=
for _ in $(seq 1 60); do
	addr=$(sed -n 's/.*serving NBD on \([0-9.:]*\) .*/\1/p' "$work/serve.log" 2>/dev/null || true)
	[ -n "$addr" ] && break
	sleep 0.5
done
[ -n "$addr" ] || { cat "$work/serve.log"; echo "quilt volume serve did not start"; exit 1; }
t nbdinfo --list "nbd://$addr" >"$work/list0"
grep -q 'export="img1"' "$work/list0"
kill "$spid"; wait "$spid" 2>/dev/null || true
spid=

say "nbdinfo"
t nbdinfo --list "$url" | tee "$work/list"
grep -q 'export="vm1"' "$work/list"
grep -q 'export="img1"' "$work/list"
t nbdinfo "$url/vm1" | tee "$work/info"
grep -q 'export-size: 67108864' "$work/info"
grep -q 'can_flush: true' "$work/info"
grep -q 'can_fua: true' "$work/info"
grep -q 'can_trim: true' "$work/info"
grep -q 'can_zero: true' "$work/info"
grep -q 'can_multi_conn: true' "$work/info"
if t nbdinfo "$url/nope" >/dev/null 2>&1; then echo "an unknown export was opened"; exit 1; fi

say "qemu-io pattern writes, flush, reads"
t qemu-io -f raw -c 'write -P 0xab 0 1M' -c 'write -P 0xcd -f 4095k 2M' -c 'write -P 0x11 100000 777' -c flush "$url/vm1"
t qemu-io -f raw -c 'read -P 0xab 0 99999' -c 'read -P 0x11 100000 777' -c 'read -P 0xcd 4095k 2M' -c 'read -P 0 6143k 1M' -c 'read -P 0 60M 4M' "$url/vm1"
t qemu-io -f raw -c 'write -z 4M 1k' -c 'discard 0 4M' -c flush "$url/vm1"
t qemu-io -f raw -c 'read -P 0 0 4M' -c 'read -P 0 4M 1k' -c 'read -P 0xcd 4097k 1M' "$url/vm1"

say "qemu-img and nbdcopy"
t qemu-img create -f raw "$work/disk" 64M >/dev/null
t qemu-io -f raw -c 'write -P 0x5a 1M 3M' -c 'write -P 0x77 40M 1M' "$work/disk" >/dev/null
t qemu-img convert -n -f raw -O raw "$work/disk" "$url/vm1"
t qemu-img compare -f raw -F raw "$work/disk" "$url/vm1"
t nbdcopy "$url/vm1" "$work/back"
cmp "$work/disk" "$work/back"
t nbdcopy "$url/img1" "$work/img1.back"
cmp "$work/img" <(head -c 5000000 "$work/img1.back")
# Multi-conn: four connections write and read one volume at once (nbdcopy
# uses them only when the server announces CAN_MULTI_CONN; it says how many).
q create mc1 --size 64MiB
t nbdcopy -v --connections=4 --threads=4 --flush "$work/disk" "$url/mc1" 2>&1 | grep 'connections=4 '
t qemu-img compare -f raw -F raw "$work/disk" "$url/mc1"
t nbdcopy -v --connections=4 --threads=4 "$url/mc1" "$work/mc1.back" 2>&1 | grep 'connections=4 '
cmp "$work/disk" "$work/mc1.back"

say "structured replies and block status: nbdinfo --map, qemu-img map, nbdcopy"
# Extents 0 and 10 (of 4 MiB) written, 5 written and discarded, the rest never
# written: the map shows data for 0 and 10, holes (reading zeros) elsewhere.
q create map1 --size 64MiB
t qemu-img create -f raw "$work/map1.img" 64M >/dev/null
for f in "$work/map1.img" "$url/map1"; do
	t qemu-io -f raw -c 'write -P 0x5a 1M 3M' -c 'write -P 0x77 40M 1M' -c 'write -P 1 20M 4M' -c flush -c 'discard 20M 4M' "$f" >/dev/null
done
t qemu-io -f raw -c 'write -z 20M 4M' "$work/map1.img" >/dev/null
t nbdinfo "$url/map1" | tee "$work/info"
grep -q 'can_df: true' "$work/info"
grep -q 'base:allocation' "$work/info"
t nbdinfo --map "$url/map1" | tee "$work/map"
printf '%s\n' '0 4194304 0 data' '4194304 37748736 3 hole,zero' '41943040 4194304 0 data' '46137344 20971520 3 hole,zero' >"$work/map.want"
awk '{print $1, $2, $3, $4}' "$work/map" | diff "$work/map.want" -
t qemu-img map --output=json -f raw "$url/map1" | tee "$work/qmap"
jq -r '.[] | "\(.start) \(.length) \(.data) \(.zero)"' "$work/qmap" >"$work/qmap.got"
printf '%s\n' '0 4194304 true false' '4194304 37748736 false true' '41943040 4194304 true false' '46137344 20971520 false true' | diff - "$work/qmap.got"
# nbdcopy skips the holes it is told of and still copies every byte, out
# and into a new volume (whose holes stay holes).
t nbdcopy "$url/map1" "$work/map1.back"
cmp "$work/map1.img" "$work/map1.back"
q create map2 --size 64MiB
t nbdcopy --flush "$url/map1" "$url/map2"
t qemu-img compare -f raw -F raw "$work/map1.img" "$url/map2"
t nbdinfo --map "$url/map2" | awk '$4 == "data" {print $1, $2}' | diff <(printf '%s\n' '0 4194304' '41943040 4194304') -

say "nbdcopy round trip of a 1 GiB volume of random data"
# About 35-45 s on 2 cores at a load of 10-14 (docs/benchmarks.md); bounded at 5 min.
q create big1 --size 1GiB
head -c 1G /dev/urandom >"$work/big"
timeout 300 nbdcopy --flush "$work/big" "$url/big1"
timeout 300 nbdcopy "$url/big1" "$work/big.back"
cmp "$work/big" "$work/big.back"
rm -f "$work/big.back"
rm -f "$work/big"
q rm big1

say "fio: random 4 KiB writes, then verified reads (nbd engine)"
q create fio1 --size 32MiB
t fio --name=verify --ioengine=nbd --uri="$url/fio1" --rw=randwrite --bs=4k --size=32M \
	--iodepth=8 --verify=crc32c --do_verify=1 --verify_fatal=1 --verify_state_save=0 --runtime=20 \
	--output="$work/fio.out" || { cat "$work/fio.out"; exit 1; }
# Both phases ran (the verify phase is fio's reads) and none failed.
grep -q 'WRITE: bw=' "$work/fio.out" && grep -q 'READ: bw=' "$work/fio.out" || { cat "$work/fio.out"; exit 1; }
if grep -qi 'verify:.*bad\|err= *[1-9]' "$work/fio.out"; then cat "$work/fio.out"; exit 1; fi

say "ext4 on nbdfuse and a loop device: mkfs, files, umount, fsck"
[ "$(id -u)" = 0 ] || { echo "the ext4 step needs root (losetup, mount)"; exit 1; }
q create fs1 --size 64MiB
mnt="$work/mnt"
mkdir -p "$mnt/fuse" "$mnt/fs"
nbdfuse -C 1 -P "$work/nbdfuse.pid" "$mnt/fuse" "$url/fs1" 2>"$work/nbdfuse.log" &
for _ in $(seq 1 40); do [ -s "$work/nbdfuse.pid" ] && break; sleep 0.25; done
[ -s "$work/nbdfuse.pid" ] || { cat "$work/nbdfuse.log"; echo "nbdfuse did not start"; exit 1; }
loop=$(t losetup -f --show "$mnt/fuse/nbd")
t mkfs.ext4 -q -F "$loop"
t mount "$loop" "$mnt/fs"
for i in 1 2 3; do head -c $((i * 1000000)) /dev/urandom >"$mnt/fs/f$i"; done
mkdir "$mnt/fs/d"
echo hello >"$mnt/fs/d/hello"
(cd "$mnt/fs" && sha256sum f1 f2 f3 d/hello >"$work/sums")
t umount "$mnt/fs"
t fsck.ext4 -n -f "$loop"
t mount -o ro "$loop" "$mnt/fs"
(cd "$mnt/fs" && sha256sum -c --quiet "$work/sums")
t umount "$mnt/fs"
t losetup -d "$loop"
loop=
t fusermount3 -u "$mnt/fuse"
mnt=

say "clone, snapshot, export (the server's map is committed)"
q clone vm1 vm2
q snapshot vm1 s1
t qemu-io -f raw -c 'write -P 0x99 0 8M' "$url/vm2" >/dev/null
t qemu-img compare -f raw -F raw "$work/disk" "$url/vm1"
t qemu-img compare -f raw -F raw "$work/disk" "$url/vm1@s1"
t qemu-io -f raw -c 'read -P 0x99 0 8M' "$url/vm2" >/dev/null
if t qemu-io -f raw -c 'write -P 1 0 4k' "$url/vm1@s1" >/dev/null 2>&1; then echo "wrote to a snapshot"; exit 1; fi
q export vm1 "$work/exported"
cmp "$work/disk" "$work/exported"

say "rollback to a snapshot, resize (the CLI takes the volume's lease while no client has it)"
t qemu-io -f raw -c 'write -P 0x44 0 2M' -c flush "$url/vm1" >/dev/null
q rollback vm1 s1
t qemu-img compare -f raw -F raw "$work/disk" "$url/vm1"
if q rollback vm1 nope 2>/dev/null; then echo "rolled back to a snapshot that does not exist"; exit 1; fi
if q rollback vm1 vm2 2>/dev/null; then echo "rolled back to a volume that is not a snapshot"; exit 1; fi
q resize vm1 --size 96MiB
t nbdinfo "$url/vm1" | grep -q 'export-size: 100663296'
t qemu-io -f raw -c 'read -P 0x77 40M 1M' -c 'read -P 0 64M 32M' -c 'write -P 0x45 90M 1M' "$url/vm1" >/dev/null
q resize vm1 --size 64MiB
t qemu-img compare -f raw -F raw "$work/disk" "$url/vm1"
if q resize vm1 --size 1000 2>/dev/null; then echo "resized to 1000 bytes"; exit 1; fi

say "qcow2: import (file and stdin), export, qemu-img compare; images reading other files refused"
t qemu-img create -f qcow2 "$work/q.qcow2" 40M >/dev/null
t qemu-io -f qcow2 -c 'write -P 0x61 1M 3M' -c 'write -P 0x62 30M 5M' -c 'write -z 34M 1M' "$work/q.qcow2" >/dev/null
q import qc1 "$work/q.qcow2"
q ls >"$work/ls4"
grep -q '^qc1 .*40.0 MiB' "$work/ls4" || { cat "$work/ls4"; exit 1; }
t qemu-img compare -f qcow2 -F raw "$work/q.qcow2" "$url/qc1"
q export qc1 "$work/out.qcow2" --format qcow2
t qemu-img info "$work/out.qcow2" >"$work/qinfo"
grep -q 'file format: qcow2' "$work/qinfo"
t qemu-img compare -f qcow2 -F qcow2 "$work/q.qcow2" "$work/out.qcow2"
q import qc2 - <"$work/q.qcow2"
t qemu-img compare -f qcow2 -F raw "$work/q.qcow2" "$url/qc2"
# Into an existing volume, over what it held.
t qemu-io -f raw -c 'write -P 0x99 0 40M' "$url/qc2" >/dev/null
q import qc2 "$work/q.qcow2" --format qcow2
t qemu-img compare -f qcow2 -F raw "$work/q.qcow2" "$url/qc2"
t qemu-img create -f qcow2 -b "$work/q.qcow2" -F qcow2 "$work/over.qcow2" >/dev/null
if q import qc3 "$work/over.qcow2" 2>"$work/bad.log"; then echo "imported a qcow2 with a backing file"; exit 1; fi
grep -q 'backing file' "$work/bad.log" || { cat "$work/bad.log"; exit 1; }
if q import qc3 "$work/img" --format qcow2 2>"$work/bad.log"; then echo "imported a raw image as qcow2"; exit 1; fi
grep -q 'not a qcow2 image' "$work/bad.log" || { cat "$work/bad.log"; exit 1; }

say "non-persistent attachments (NAME+np): a clone per connection, gone at disconnect"
t qemu-io -f raw -c 'read -P 0x5a 1M 3M' -c 'write -P 0xee 0 6M' -c flush -c 'read -P 0xee 0 6M' "$url/vm1+np" >/dev/null
t nbdinfo "$url/vm1+np" >"$work/npinfo"
grep -q 'can_multi_conn: false' "$work/npinfo"
t qemu-img compare -f raw -F raw "$work/disk" "$url/vm1"
# The server deletes the clone once it sees the client gone.
for _ in $(seq 1 60); do q ls >"$work/ls3"; grep -q '\.np-' "$work/ls3" || break; sleep 0.5; done
if grep -q '\.np-' "$work/ls3"; then cat "$work/ls3"; echo "a non-persistent clone outlived its connection"; exit 1; fi
if t nbdinfo "$url/nope+np" >/dev/null 2>&1; then echo "attached a volume that does not exist"; exit 1; fi

say "rm"
q rm vm2
q ls | tee "$work/ls2"
if grep -q '^vm2 ' "$work/ls2"; then echo "vm2 still listed"; exit 1; fi
say "TLS: STARTTLS required, a client certificate per volume (quilt volume cert), revoke"
if q serve --tls maybe --listen 127.0.0.1:0 >"$work/bad.log" 2>&1; then echo "serve took --tls maybe"; exit 1; fi
grep -q 'want on, off or auto' "$work/bad.log" || { cat "$work/bad.log"; exit 1; }
q create sec1 --size 16MiB
q create sec2 --size 1MiB
q cert sec1 "$work/c1"
q cert sec2 "$work/c2"
for f in ca-cert.pem client-cert.pem client-key.pem; do [ -s "$work/c1/$f" ] || { echo "cert: no $f"; exit 1; }; done
"$work/quilt" volume --dir "$gw" serve --tls on --state "$work/state3" --listen 127.0.0.1:0 >"$work/serve.log" 2>&1 &
spid=$!
addr=
for _ in $(seq 1 60); do
	addr=$(sed -n 's/.*serving NBD on \([0-9.:]*\) (nbds:.*/\1/p' "$work/serve.log" 2>/dev/null || true)
	[ -n "$addr" ] && break
	sleep 0.5
done
[ -n "$addr" ] || { cat "$work/serve.log"; echo "quilt volume serve --tls on did not start"; exit 1; }
# A client without TLS is refused with ERR_TLS_REQD (libnbd's debug shows the server's message).
if LIBNBD_DEBUG=1 t nbdinfo "nbd://$addr/sec1" >"$work/plain.log" 2>&1; then echo "served without TLS"; exit 1; fi
grep -q 'TLS is required' "$work/plain.log" || { cat "$work/plain.log"; exit 1; }
if t qemu-img info "nbd://$addr/sec1" >"$work/plain.log" 2>&1; then echo "qemu-img opened without TLS"; exit 1; fi
grep -qi 'TLS negotiation required' "$work/plain.log" || { cat "$work/plain.log"; exit 1; }
# With the volume's certificate: libnbd and QEMU (tls-creds-x509), checking the server's against the CA.
t nbdinfo "nbds://$addr/sec1?tls-certificates=$work/c1" | tee "$work/info"
grep -q 'with TLS' "$work/info"
grep -q 'export-size: 16777216' "$work/info"
t nbdinfo --list "nbds://$addr?tls-certificates=$work/c1" >"$work/list"
grep -q 'export="sec1"' "$work/list"
if grep -q 'export="sec2"' "$work/list"; then echo "listed a volume the certificate does not open"; exit 1; fi
port=${addr##*:}
tlsopts() { echo "driver=nbd,server.type=inet,server.host=127.0.0.1,server.port=$port,export=$1,tls-creds=tls0"; }
t qemu-io --object "tls-creds-x509,id=tls0,endpoint=client,dir=$work/c1" --image-opts "$(tlsopts sec1)" \
	-c 'write -P 0x3c 1M 2M' -c flush -c 'read -P 0x3c 1M 2M' -c 'read -P 0 0 1M' >/dev/null
t qemu-img info --object "tls-creds-x509,id=tls0,endpoint=client,dir=$work/c1" --image-opts "$(tlsopts sec1)" >"$work/qinfo"
grep -q 'virtual size: 16 MiB' "$work/qinfo"
# Another volume's certificate is refused (ERR_POLICY), by libnbd and QEMU.
if LIBNBD_DEBUG=1 t nbdinfo "nbds://$addr/sec1?tls-certificates=$work/c2" >"$work/wrong.log" 2>&1; then echo "opened with another volume's certificate"; exit 1; fi
grep -q "not one of the volume's" "$work/wrong.log" || { cat "$work/wrong.log"; exit 1; }
if t qemu-img info --object "tls-creds-x509,id=tls0,endpoint=client,dir=$work/c2" --image-opts "$(tlsopts sec1)" >"$work/wrong.log" 2>&1; then
	echo "qemu-img opened with another volume's certificate"; exit 1
fi
grep -q "not one of the volume's" "$work/wrong.log" || { cat "$work/wrong.log"; exit 1; }
# Revoked, the certificate opens nothing; a new one does.
q revoke sec1
if t nbdinfo "nbds://$addr/sec1?tls-certificates=$work/c1" >/dev/null 2>&1; then echo "a revoked certificate opened the volume"; exit 1; fi
q cert sec1 "$work/c1b"
t qemu-io --object "tls-creds-x509,id=tls0,endpoint=client,dir=$work/c1b" --image-opts "$(tlsopts sec1)" -c 'read -P 0x3c 1M 2M' >/dev/null
say "the OpenNebula driver of docs/volumes.md (quilt-one): register, clone per VM, attach, detach, delete"
awk '/^<!-- quilt-one.sh -->$/ {f=1; next} f && /^```sh$/ {g=1; next} g && /^```$/ {exit} g' "$root/docs/volumes.md" >"$work/quilt-one"
grep -q '^#!/bin/sh' "$work/quilt-one" || { echo "no quilt-one script in docs/volumes.md"; exit 1; }
chmod +x "$work/quilt-one"
one() { PATH="$work:$PATH" QUILT_DIR="$gw" timeout 60 "$work/quilt-one" "$@"; }
# qio URI ARGS: qemu-io on an nbd:// URI, or on an nbds://HOST:PORT/NAME?tls-certificates=DIR
# one through QEMU's tls-creds-x509 (QEMU takes no nbds:// URI).
qio() {
	u=$1
	shift
	case "$u" in
	nbds://*)
		hp=${u#nbds://}
		hp=${hp%%/*}
		name=${u#nbds://*/}
		name=${name%%\?*}
		t qemu-io --object "tls-creds-x509,id=tls0,endpoint=client,dir=${u##*tls-certificates=}" --image-opts \
			"driver=nbd,server.type=inet,server.host=${hp%:*},server.port=${hp##*:},export=$name,tls-creds=tls0" "$@" ;;
	*) t qemu-io -f raw "$@" "$u" ;;
	esac
}
for nbd in "$url" "nbds://$addr"; do
	export QUILT_NBD="$nbd"
	one register golden "$work/disk"
	[ "$(one clone golden 42 0)" = one-42-0 ]
	one clone golden 43 0 >/dev/null
	u42=$(one attach one-42-0 "$work/certs/one-42-0")
	u43=$(one attach one-43-0 "$work/certs/one-43-0")
	case "$nbd" in nbds:*) case "$u42" in *tls-certificates=*) ;; *) echo "attach over TLS gave $u42"; exit 1;; esac;; esac
	# The VMs write their disks; the image and the other VM's disk keep their contents.
	qio "$u42" -c 'write -P 0x42 0 8M' -c flush >/dev/null
	t nbdcopy "$u43" "$work/vm43"
	cmp "$work/disk" "$work/vm43"
	one save 42 0 golden-42
	one detach one-42-0 "$work/certs/one-42-0"
	one detach one-43-0 "$work/certs/one-43-0"
	case "$nbd" in nbds:*)
		if t nbdinfo "$u42" >/dev/null 2>&1; then echo "a detached disk still opens"; exit 1; fi
		[ ! -e "$work/certs/one-42-0" ] || { echo "detach left the certificate"; exit 1; };;
	esac
	one delete 42 0
	one delete 43 0
	q ls >"$work/ls5"
	if grep -q '^one-4[23]-0 ' "$work/ls5"; then cat "$work/ls5"; echo "delete left a VM disk"; exit 1; fi
	ugold=$(one attach golden "$work/certs/golden")
	ug42=$(one attach golden-42 "$work/certs/g42")
	t nbdcopy "$ugold" "$work/gold.back"
	cmp "$work/disk" "$work/gold.back"
	qio "$ug42" -c 'read -P 0x42 0 8M' -c 'read -P 0x77 40M 1M' >/dev/null
	one detach golden "$work/certs/golden"
	one detach golden-42 "$work/certs/g42"
	one unregister golden-42
	one unregister golden
	if PATH="$work:$PATH" "$work/quilt-one" bogus 2>/dev/null; then echo "quilt-one took a bogus verb"; exit 1; fi
done
kill "$spid"; wait "$spid" 2>/dev/null || true
spid=

echo "volume clients: ok"
