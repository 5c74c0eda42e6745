package localstack

import (
	"fmt"
	"os"
	"path/filepath"
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
	u, err := ProcessUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.PeakRSSBytes < 1<<20 || u.CPUSeconds <= 0 {
		t.Errorf("usage of this test process %+v, want a peak RSS of at least 1 MiB and some CPU time", u)
	}
}

// TestKillSendsSIGKILLAlone: a component killed gets no SIGTERM it could act on, as in a
// crash; one stopped gets SIGTERM first. The shell records a SIGTERM it receives.
func TestKillSendsSIGKILLAlone(t *testing.T) {
	for _, tc := range []struct {
		name      string
		grace     time.Duration
		wantTrace string
	}{
		{"kill", 0, ""},
		{"stop", 5 * time.Second, "TERM\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			trace := filepath.Join(dir, "trace")
			script := fmt.Sprintf(`trap 'echo TERM >> %s; exit 0' TERM; touch %s.ready; while :; do sleep 0.05; done`, trace, trace)
			p, err := startProcess(dir, "trap", "/bin/sh", []string{"-c", script}, nil, false)
			if err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(5 * time.Second); ; {
				if _, err := os.Stat(trace + ".ready"); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the shell did not start")
				}
				time.Sleep(10 * time.Millisecond)
			}
			p.stop(dir, tc.grace)
			got, _ := os.ReadFile(trace)
			if string(got) != tc.wantTrace {
				t.Errorf("signals the shell saw %q, want %q", got, tc.wantTrace)
			}
			if exited, _ := p.exited(); !exited {
				t.Error("the process still runs after stop")
			}
		})
	}
}
