#!/usr/bin/env bash
# The real-client scripts of `make test`, in lanes that run at the same
# time: the scripts spend most of their time waiting (round trips, the
# clients' own start-up, sleeps for a grid to settle), not computing, so
# on two cores three lanes take much less time than one, and CI has a
# time budget. Each script runs on a `quilt up` of its own (ports chosen
# by the kernel) in a directory of its own.
#
#   ./test/clients.sh                 # every lane
#   ./test/clients.sh s3-clients.sh   # the named scripts, one after another
#
# First it installs, one at a time, what the scripts would install with
# apt (two lanes at once would race for dpkg's lock). Each script's
# output goes to a file, printed whole when the script ends, with how
# long it took. A lane stops at its first failing script; the others run
# on; the exit status is non-zero if any script failed, and the failed
# scripts are named at the end. QUILT_BIN (a quilt binary) is passed on.
set -uo pipefail
cd "$(dirname "$0")"

# The lanes: scripts that share a venv or a cache run in one lane, in
# order (s3-clients.sh makes the awscli venv cp-clients.sh and
# every-door.sh use; swift-clients.sh the one swift-regions.sh uses; the
# two browser tests run one at a time), and the lanes take about as long
# as each other.
lane1=(s3-clients.sh cp-clients.sh every-door.sh sftp-clients.sh webapp-browser/run.sh mount-clients.sh)
lane2=(s3-minio-functional.sh webdav-clients.sh owncloud-clients.sh)
lane3=(s3-minio-py-functional.sh swift-clients.sh swift-regions.sh volume-clients.sh)

pkgs=()
need() { # need COMMAND PACKAGE
	command -v "$1" >/dev/null 2>&1 || pkgs+=("$2")
}
need rclone rclone
need litmus litmus
need cadaver cadaver
need mount.davfs davfs2
need owncloudcmd owncloud-client-cmd
need nextcloudcmd nextcloud-desktop-cmd
need sftp openssh-client
need rsync rsync
need bwrap bubblewrap
need sshfs sshfs
need fusermount3 fuse3
need git git
need haproxy haproxy
need nbdinfo libnbd-bin
need qemu-img qemu-utils
need fio fio
need nbdfuse nbdfuse
need mkfs.ext4 e2fsprogs
need jq jq
need node nodejs
need npm npm
need chromium chromium
if [ ${#pkgs[@]} -gt 0 ]; then
	echo "== installing ${pkgs[*]}"
	sudo=
	[ "$(id -u)" = 0 ] || sudo=sudo
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get install -y -qq "${pkgs[@]}" >/dev/null ||
		{ $sudo apt-get update -qq && $sudo apt-get install -y -qq "${pkgs[@]}" >/dev/null; } ||
		{ echo "apt-get install ${pkgs[*]} failed" >&2; exit 1; }
fi

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

lane() { # lane SCRIPT...: one after another, until one fails
	local s start rc log
	for s in "$@"; do
		log="$logs/${s//\//-}.log"
		start=$(date +%s)
		"./$s" >"$log" 2>&1
		rc=$?
		{
			flock 9
			echo "==== test/$s"
			cat "$log"
			echo "==== test/$s: $(($(date +%s) - start)) s, exit status $rc"
		} 9>"$logs/lock"
		if [ "$rc" != 0 ]; then
			echo "test/$s" >>"$logs/failed"
			return "$rc"
		fi
	done
}

if [ $# -gt 0 ]; then
	lane "$@"
	rc=$?
else
	start=$(date +%s)
	lane "${lane1[@]}" &
	p1=$!
	lane "${lane2[@]}" &
	p2=$!
	lane "${lane3[@]}" &
	p3=$!
	rc=0
	for p in $p1 $p2 $p3; do wait "$p" || rc=1; done
	echo "==== every client script: $(($(date +%s) - start)) s"
fi
if [ -s "$logs/failed" ]; then
	# The end of each failed script's output once more, last, where a
	# CI log cut to its tail still shows why.
	while read -r s; do
		s=${s#test/}
		echo "==== the last 60 lines of test/$s"
		tail -n 60 "$logs/${s//\//-}.log"
	done <"$logs/failed"
	echo "FAILED: $(tr '\n' ' ' <"$logs/failed")"
	rc=1
fi
exit "$rc"
