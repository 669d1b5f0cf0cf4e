package object_test

import "testing"

// skipInRaceRun skips a test whose throttled links or stall times make
// it take many seconds when tests run with -short, as make test's run
// under the race detector does; make test's first run (without -short)
// runs it.
func skipInRaceRun(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("slow (throttled links or stall times): run without -short")
	}
}
