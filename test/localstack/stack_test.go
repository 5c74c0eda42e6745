package localstack

import (
	"os"
	"testing"
	"time"
)

func TestFreePortSkipsThePortsPicked(t *testing.T) {
	every := map[int]bool{}
	for p := firstListenPort; p <= lastListenPort; p++ {
		every[p] = true
	}
	if port, err := freePort(every); err == nil {
		t.Errorf("freePort with every port picked returned %d, want an error", port)
	}
	odd := map[int]bool{}
	for p := firstListenPort | 1; p <= lastListenPort; p += 2 {
		odd[p] = true
	}
	for range 20 {
		port, err := freePort(odd)
		if err != nil {
			t.Fatal(err)
		}
		if odd[port] || port < firstListenPort || port > lastListenPort {
			t.Fatalf("freePort returned %d: picked already, or outside %d–%d", port, firstListenPort, lastListenPort)
		}
	}
}

func TestProcessUsageReadsThisProcess(t *testing.T) {
	// Burn some CPU so the reading is not zero.
	deadline := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(deadline) {
	}
	u, err := processUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.PeakRSSBytes < 1<<20 || u.CPUSeconds <= 0 {
		t.Errorf("usage of this test process %+v, want a peak RSS of at least 1 MiB and some CPU time", u)
	}
}
