package chaos

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tailor-autoscaler/tailor/test/stacktest"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

// The short run's trials: five from seed 6801 (every phase and nine fault kinds, a leader
// killed while it replaces a pod before its eviction among them: the drift trial's;
// TestTheShortRunDrawsWhatItsCommentSays pins them), with fewer and shorter faults and
// smaller Deployments.
const (
	shortRunSeed   = 6801
	shortRunTrials = 5
)

var shortRunWindow = Window{Within: 10 * time.Second, MaxFaults: 2, MaxFor: 8 * time.Second, MaxReplicas: 5}

// TestShortChaosRun is the CI run of make chaos: the short run's trials on one stack, within
// about six minutes on two cores. It fails with the seed of every breach; CHAOS_SEED and
// CHAOS_TRIALS replay others.
func TestShortChaosRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the local stack")
	}
	opts := Options{
		Trials: shortRunTrials, Seed: shortRunSeed,
		Window:   shortRunWindow,
		Recovery: 150 * time.Second,
		Out:      logWriter{t},
	}
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		opts.Seed = mustUint(t, v)
	}
	if v := os.Getenv("CHAOS_TRIALS"); v != "" {
		opts.Trials = int(mustUint(t, v))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	stackOpts := StackOptions(testenv.Root(), t.TempDir())
	stackOpts.Progress = logWriter{t}
	stack, _, _ := stacktest.Start(t, ctx, stackOpts)
	r, err := RunOn(ctx, opts, stack)
	if r != nil {
		b := &strings.Builder{}
		r.Print(b)
		t.Log("\n" + b.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range r.Breaches {
		t.Errorf("breach, seed %d (%s): %s: %s", b.Seed, b.Phase, b.Invariant, b.Detail)
	}
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func mustUint(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
