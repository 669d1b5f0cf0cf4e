#!/bin/sh
# quilt cp beside awscli's `aws s3 cp` on one `quilt up` grid on loopback,
# measured in the same run: FILES small files of SMALL bytes (recursive)
# and one file of BIG bytes, up and down, ROUNDS rounds alternating the
# two tools; seconds per transfer, and a byte-for-byte check of what came
# back. Needs awscli on PATH. Usage:
#
#   ROUNDS=2 FILES=200 SMALL=65536 BIG=100M ./bench/cp-vs-awscli.sh
set -eu
ROUNDS=${ROUNDS:-2} FILES=${FILES:-200} SMALL=${SMALL:-65536} BIG=${BIG:-100M}
work=$(mktemp -d /tmp/quilt-cp-bench.XXXXXX)
go build -o "$work/quilt" ./cmd/quilt
export QUILT_HOME="$work/home" XDG_CACHE_HOME="$work/cache"
unset AWS_ENDPOINT_URL AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_CA_BUNDLE || true
"$work/quilt" up --dir "$QUILT_HOME/grid" --port 0 --no-fsync >"$work/up.log" 2>&1 &
up=$!
trap 'kill $up; wait $up 2>/dev/null; rm -rf "$work"' EXIT
env="$QUILT_HOME/grid/gateway/s3.env"
for _ in $(seq 600); do [ -s "$env" ] && break; sleep 0.1; done
. "$env"
aws s3 mb s3://bench >/dev/null
mkdir -p "$work/src/small"
for i in $(seq "$FILES"); do head -c "$SMALL" /dev/urandom >"$work/src/small/f$i"; done
head -c "$BIG" /dev/urandom >"$work/src/big.bin"
secs() { s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }
q() { "$work/quilt" cp "$@"; }
a() { aws s3 cp --only-show-errors "$@"; }
echo "round tool case seconds"
for r in $(seq "$ROUNDS"); do
	for tool in q a; do
		p="s3://bench/r$r$tool"; d="$work/down-r$r$tool"
		rec=-r; [ $tool = a ] && rec=--recursive
		echo "$r $tool small-up $(secs $tool $rec "$work/src/small" "$p/small/")"
		echo "$r $tool big-up $(secs $tool "$work/src/big.bin" "$p/big.bin")"
		echo "$r $tool small-down $(secs $tool $rec "$p/small/" "$d/small")"
		echo "$r $tool big-down $(secs $tool "$p/big.bin" "$d/big.bin")"
		cmp "$work/src/big.bin" "$d/big.bin" && diff -r "$work/src/small" "$d/small"
	done
done
echo "all copies identical to their sources (q: quilt cp, a: aws s3 cp)"
