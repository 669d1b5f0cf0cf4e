# Quilt: `make run` starts a 10-node grid on this machine; `make test` runs
# every test. Both build what they need first.

GO      ?= go
BIN     ?= bin/quilt
NODES   ?= 10

# FUZZ: every fuzz target, as package:Target (go test -fuzz takes one
# package and one target at a time); make fuzz runs each for FUZZTIME, a
# count of inputs: Go 1.26's fuzzer can fail a target with "context
# deadline exceeded" when a time budget ends on a busy machine (fixed in
# Go 1.27), and a count has no deadline to race. make test fuzzes
# FUZZ_TEST, the parsers of what other machines send (shares, node and
# namespace requests, S3 requests): each package fuzzed costs a build
# with coverage, and CI has a time budget. Every target's seeds and
# committed crashers run in every go test.
FUZZ_TEST = internal/sharefile:FuzzParseHeader internal/sharefile:FuzzParseTrailer \
	internal/sharefile:FuzzChecker \
	internal/namespace:FuzzUnframe internal/namespace:FuzzAPI internal/node:FuzzShareAPI \
	internal/gateway/s3/sigv4:FuzzVerify internal/gateway/s3/sigv4:FuzzParseAuth \
	internal/gateway/s3/sigv4:FuzzChunked internal/gateway/s3:FuzzParseRange \
	internal/gateway/s3:FuzzXMLBodies
FUZZ     = $(FUZZ_TEST) internal/codec:FuzzParseCap \
	internal/identity:FuzzParseInvite internal/dag:FuzzDecode internal/dag:FuzzParseIDs \
	internal/object:FuzzGetRange internal/lab/scenario:FuzzParse \
	internal/bulk:FuzzParse internal/bulk:FuzzCheckpoint
FUZZTIME ?= 5000x

.PHONY: all build run test fuzz bench bench-ns bench-tahoe lab vet clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/quilt

## run: a grid of $(NODES) storage nodes on 127.0.0.1, until Ctrl-C
run: build
	$(BIN) up --nodes $(NODES)

## test: vet, then every test (unit, property, conformance, 10-node
## in-process grid, real processes); the race detector on the core packages;
## the fuzz targets of network parsers for $(FUZZTIME) inputs (make fuzz: all, see docs/testing.md); then real
## clients against quilt up: S3 (awscli, boto3, rclone, headless
## Chromium; minio-go's and minio-py's functional tests, each result
## checked against test/s3-minio-*.expected), Swift (swift CLI,
## swiftclient, swift-bench; two regions of gateway processes, one pair
## behind haproxy) and SFTP (sftp,
## scp, sshfs), WebDAV (litmus, cadaver, rclone), quilt cp (beside
## awscli and WebDAV), the web app (headless Chromium), the same file
## through the browser, WebDAV, awscli and quilt cp (every-door.sh), the FUSE mount (cp, diff,
## mv, git, tar) and NBD volumes (nbdinfo, qemu-io, qemu-img, nbdcopy,
## fio's nbd engine, ext4 through nbdfuse and a loop device)
test: build
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 15m ./...
	$(GO) test -count=1 -race -timeout 10m ./internal/sharestore/... ./internal/codec/
	$(GO) test -count=1 -race -short -timeout 10m ./internal/object/ ./internal/dag/ ./internal/namespace/ ./internal/nsclient/ ./internal/tree/... ./internal/linkemu/ ./internal/lab/scenario/ ./internal/lab/report/
	for t in $(FUZZ_TEST); do $(GO) test -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) -parallel 1 ./$${t%%:*}/ || exit 1; done
	QUILT_BIN=$(abspath $(BIN)) ./test/clients.sh

## fuzz: every fuzz target for FUZZTIME inputs each (make fuzz FUZZTIME=200000x
## for more)
fuzz:
	for t in $(FUZZ); do $(GO) test -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) -parallel 1 ./$${t%%:*}/ || exit 1; done

## bench: codec micro-benchmarks (one core), then quilt bench on a fresh grid
bench: build
	$(GO) test -run '^$$' -bench . -benchtime 2s -cpu 1 ./internal/codec/ ./internal/placement/
	./bench/grid-bench.sh

## bench-ns: namespaces — append rate, listing, bytes per entry, and
## convergence of one write over 30 emulated nodes (several minutes)
bench-ns:
	$(GO) test -run '^$$' -bench 'Append|List' -benchtime 20000x ./internal/namespace/
	$(GO) test -run '^$$' -bench Convergence -benchtime 100x -timeout 30m ./internal/namespace/

## bench-tahoe: Quilt and Tahoe-LAFS side by side (installs tahoe-lafs in a venv)
bench-tahoe:
	./bench/tahoe/compare.sh

## lab: the lab's experiments in their --quick variants, results (CSV,
## Markdown, PNG) in docs/lab/; write-read and sshfs-fio also run
## Tahoe-LAFS, and swift-bench OpenStack Swift (installed from PyPI into
## venvs), behind the same emulated links; sshfs-fio needs fio, sshfs and
## fuse3, dbench and nbd-fio nbdkit, nbdfuse and dbench, and dbench root
## (bench/lab-deps.sh)
lab: build
	./bench/lab-deps.sh
	$(BIN) lab run write-read --quick --tahoe --tahoe-foolscap --helper best-node --out docs/lab/write-read
	$(BIN) lab run write-read --quick --tahoe --tahoe-foolscap --scenario azure --out docs/lab/write-read-azure
	$(BIN) lab run put-get-del --quick --out docs/lab/put-get-del
	$(BIN) lab run swift-bench --quick --out docs/lab/swift-bench
	$(BIN) lab run convergence --quick --out docs/lab/convergence
	$(BIN) lab run parallel-transfers --quick --out docs/lab/parallel-transfers
	$(BIN) lab run cfs-mount --quick --out docs/lab/cfs-mount
	$(BIN) lab run sshfs-fio --quick --tahoe --out docs/lab/sshfs-fio
	$(BIN) lab run dbench --quick --out docs/lab/dbench
	$(BIN) lab run nbd-fio --quick --out docs/lab/nbd-fio

vet:
	$(GO) vet ./...

clean:
	rm -rf bin
