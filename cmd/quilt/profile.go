package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startProfile writes a CPU profile of this command to the file named by
// QUILT_CPUPROFILE, if set, for `go tool pprof`; the returned function
// ends it. It is how docs/benchmarks.md finds where a put's time goes.
func startProfile() (stop func()) {
	path := os.Getenv("QUILT_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "quilt: QUILT_CPUPROFILE: %v\n", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "quilt: QUILT_CPUPROFILE: %v\n", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
