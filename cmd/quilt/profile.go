package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// startProfile writes a CPU profile of this command to the file named by
// QUILT_CPUPROFILE, and a profile of every allocation it made to the file
// named by QUILT_MEMPROFILE, if set, for `go tool pprof`; the returned
// function ends them. It is how docs/benchmarks.md finds where a put's
// time and memory go.
func startProfile() (stop func()) {
	stopCPU := startCPUProfile(os.Getenv("QUILT_CPUPROFILE"))
	mem := os.Getenv("QUILT_MEMPROFILE")
	if mem != "" {
		runtime.MemProfileRate = 64 << 10 // enough samples for a short command
	}
	return func() {
		stopCPU()
		if mem != "" {
			writeMemProfile(mem)
		}
	}
}

func startCPUProfile(path string) (stop func()) {
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

func writeMemProfile(path string) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "quilt: QUILT_MEMPROFILE: %v\n", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		fmt.Fprintf(os.Stderr, "quilt: QUILT_MEMPROFILE: %v\n", err)
	}
}
