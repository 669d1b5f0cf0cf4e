#!/usr/bin/env bash
# Installs the programs the lab's sshfs-fio, dbench, nbd-fio and
# parallel-transfers experiments run, with apt when missing: fio (which
# stands in for IOzone, whose licence keeps it out of the distribution),
# sshfs and fuse3 (fusermount3); dbench, nbdkit and nbdfuse (libnbd) for
# the block-volume experiments; rclone, whose serve webdav is
# parallel-transfers' plain-disk reference. Fails if /dev/fuse is
# missing, since sshfs cannot mount without it.
set -euo pipefail
need=()
command -v fio >/dev/null || need+=(fio)
command -v sshfs >/dev/null || need+=(sshfs)
command -v fusermount3 >/dev/null || need+=(fuse3)
command -v rclone >/dev/null || need+=(rclone)
command -v dbench >/dev/null || need+=(dbench)
command -v nbdkit >/dev/null || need+=(nbdkit)
command -v nbdfuse >/dev/null || need+=(nbdfuse)
if [ ${#need[@]} -gt 0 ]; then
	echo "installing ${need[*]}"
	if [ "$(id -u)" = 0 ]; then apt-get install -y -qq "${need[@]}" >/dev/null || { apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null; }
	else sudo apt-get install -y -qq "${need[@]}" >/dev/null || { sudo apt-get update -qq && sudo apt-get install -y -qq "${need[@]}" >/dev/null; }; fi
fi
[ -e /dev/fuse ] || { echo "no /dev/fuse: sshfs cannot mount here" >&2; exit 1; }
echo "$(fio --version), $(sshfs --version 2>&1 | grep -i "^sshfs version")"
