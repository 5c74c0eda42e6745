package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tailor-autoscaler/tailor/provisioner/launchlimit"
	"github.com/tailor-autoscaler/tailor/test/localstack"
)

// sample is one process's goroutines and resident memory after a trial.
type sample struct {
	Phase     Phase  `json:"phase"`
	Component string `json:"component"`
	PID       int    `json:"pid"`
	// Goroutines is go_goroutines from the process's metrics (the sidecars'; -1 when not
	// read); RSSBytes its VmRSS.
	Goroutines int   `json:"goroutines"`
	RSSBytes   int64 `json:"rssBytes"`
}

// sampleProcesses reads the goroutines and memory of every Tailor process.
func sampleProcesses(ctx context.Context, stack *localstack.Stack, phase Phase) []sample {
	var out []sample
	for i, replica := range []string{"a", "b"} {
		for _, name := range []string{localstack.ProvisionerOf(replica), localstack.SchedulerOf(replica)} {
			pid := stack.PID(name)
			if pid == 0 {
				continue
			}
			s := sample{Phase: phase, Component: name, PID: pid, Goroutines: -1, RSSBytes: rss(pid)}
			if name == localstack.ProvisionerOf(replica) && i < len(stack.ProvisionerMetricsURLs) {
				if m, err := localstack.ScrapeMetrics(ctx, stack.ProvisionerMetricsURLs[i]); err == nil {
					s.Goroutines = int(m.Sum("go_goroutines", nil))
				}
			}
			out = append(out, s)
		}
	}
	return out
}

// rss reads a process's resident memory (VmRSS) from /proc; 0 when unreadable.
func rss(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// Growth bounds: over at least growthSamples trials of one kind in one process's life, its
// goroutines may not grow by half and by more than growthGoroutines, nor its memory by half
// and by more than growthRSS.
const (
	growthSamples    = 4
	growthGoroutines = 200
	growthRSS        = 150 << 20
)

// growth finds the processes whose goroutines or memory grew across trials of one kind.
func growth(samples []sample) []string {
	type key struct {
		phase     Phase
		component string
		pid       int
	}
	series := map[key][]sample{}
	var keys []key
	for _, s := range samples {
		k := key{s.Phase, s.Component, s.PID}
		if _, ok := series[k]; !ok {
			keys = append(keys, k)
		}
		series[k] = append(series[k], s)
	}
	var out []string
	for _, k := range keys {
		ss := series[k]
		if len(ss) < growthSamples {
			continue
		}
		first, last := ss[0], ss[len(ss)-1]
		if first.Goroutines > 0 && last.Goroutines > first.Goroutines*3/2 && last.Goroutines-first.Goroutines > growthGoroutines {
			out = append(out, fmt.Sprintf("%s (pid %d) over %d %s trials: %d → %d goroutines", k.component, k.pid, len(ss), k.phase, first.Goroutines, last.Goroutines))
		}
		if last.RSSBytes > first.RSSBytes*3/2 && last.RSSBytes-first.RSSBytes > growthRSS {
			out = append(out, fmt.Sprintf("%s (pid %d) over %d %s trials: %d → %d MiB resident", k.component, k.pid, len(ss), k.phase, first.RSSBytes>>20, last.RSSBytes>>20))
		}
	}
	return out
}

// CheckCount counts the checks of one invariant.
type CheckCount struct {
	Passed int `json:"passed"`
	Failed int `json:"failed"`
}

// Report is a run's outcome, written to _output/bench/chaos.json.
type Report struct {
	Trials    int                    `json:"trials"`
	FirstSeed uint64                 `json:"firstSeed"`
	Phases    map[Phase]int          `json:"phases"`
	Faults    map[FaultKind]int      `json:"faults"`
	Skipped   map[FaultKind]int      `json:"skipped"`
	Checks    map[string]*CheckCount `json:"checks"`
	Breaches  []Breach               `json:"breaches"`
	// RecoveryP50Seconds and RecoveryP99Seconds are the times from the last fault's end to
	// a sound rest.
	RecoveryP50Seconds float64 `json:"recoveryP50Seconds"`
	RecoveryP99Seconds float64 `json:"recoveryP99Seconds"`
	Launched           int     `json:"instancesLaunched"`
	NodeClaims         int     `json:"nodeClaimsLaunchedFor"`
	// RejectedLaunches counts the instances launched for pods the scheduler rejects on every
	// launched node (UnmodelledRejection faults).
	RejectedLaunches int `json:"rejectedPodLaunches"`
	// Tombstones counts the pod deletions the watch missed while a fault had it down, judged
	// by the pods' last known state like any other.
	Tombstones int `json:"podDeletionTombstones"`
	// Restarts counts, by component, the times it ended on its own and was started again.
	Restarts    map[string]int `json:"restarts"`
	Samples     []sample       `json:"samples"`
	WallSeconds float64        `json:"wallSeconds"`

	started    time.Time
	recoveries []time.Duration
}

func newReport(opts Options) *Report {
	return &Report{
		FirstSeed: opts.Seed, Phases: map[Phase]int{}, Faults: map[FaultKind]int{}, Skipped: map[FaultKind]int{},
		Checks: map[string]*CheckCount{}, Breaches: []Breach{}, started: time.Now(),
	}
}

func (r *Report) add(t *TrialResult) {
	r.Trials++
	r.Phases[t.Plan.Phase]++
	r.recoveries = append(r.recoveries, t.Recovery)
	r.Launched += t.Launched
	r.NodeClaims += t.Created
	r.RejectedLaunches += t.RejectedLaunches
	r.Tombstones += t.Tombstones
	for _, inv := range t.Held {
		r.count(inv).Passed++
	}
	for _, b := range t.Breaches {
		r.count(b.Invariant).Failed++
	}
	r.Breaches = append(r.Breaches, t.Breaches...)
}

func (r *Report) count(invariant string) *CheckCount {
	if r.Checks[invariant] == nil {
		r.Checks[invariant] = &CheckCount{}
	}
	return r.Checks[invariant]
}

// finish adds the faults and restarts of every stack's injector, the checks across trials
// and the percentiles.
func (r *Report) finish(injectors []*injector, samples []sample) {
	r.Restarts = map[string]int{}
	for _, in := range injectors {
		in.mu.Lock()
		for k, v := range in.injected {
			r.Faults[k] += v
		}
		for k, v := range in.skipped {
			r.Skipped[k] += v
		}
		for k, v := range in.restartsTotal {
			r.Restarts[k] += v
		}
		in.mu.Unlock()
	}
	r.Samples = samples
	grown := growth(samples)
	for _, g := range grown {
		r.Breaches = append(r.Breaches, Breach{Invariant: InvNoGrowth, Detail: g})
	}
	r.count(InvNoGrowth).Failed += len(grown)
	if len(grown) == 0 {
		r.count(InvNoGrowth).Passed++
	}
	slices.Sort(r.recoveries)
	r.RecoveryP50Seconds, r.RecoveryP99Seconds = percentile(r.recoveries, 0.5).Seconds(), percentile(r.recoveries, 0.99).Seconds()
	r.WallSeconds = time.Since(r.started).Seconds()
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// FaultCount is the faults injected, all kinds.
func (r *Report) FaultCount() int {
	n := 0
	for _, v := range r.Faults {
		n += v
	}
	return n
}

// Print writes the report's table, ending with the line
// "chaos: T trials, F faults, B breaches".
func (r *Report) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "trials\t%d (seeds %d to %d), %.0fs\n", r.Trials, r.FirstSeed, r.FirstSeed+uint64(max(r.Trials, 1))-1, r.WallSeconds)
	for _, p := range Phases {
		fmt.Fprintf(tw, "  phase %s\t%d\n", p, r.Phases[p])
	}
	fmt.Fprintf(tw, "faults injected\t%d\n", r.FaultCount())
	for _, k := range FaultKinds {
		line := fmt.Sprintf("  %s\t%d", k, r.Faults[k])
		if r.Skipped[k] > 0 {
			line += fmt.Sprintf(" (%d found %s)", r.Skipped[k], nothingToHit(k))
		}
		fmt.Fprintln(tw, line)
	}
	names := make([]string, 0, len(r.Checks))
	for name := range r.Checks {
		names = append(names, name)
	}
	slices.Sort(names)
	passed := 0
	for _, c := range r.Checks {
		passed += c.Passed
	}
	fmt.Fprintf(tw, "invariant checks passed\t%d\n", passed)
	for _, name := range names {
		fmt.Fprintf(tw, "  %s\t%d passed, %d failed\n", name, r.Checks[name].Passed, r.Checks[name].Failed)
	}
	fmt.Fprintf(tw, "instances launched\t%d for %d NodeClaims\n", r.Launched, r.NodeClaims)
	fmt.Fprintf(tw, "launched for rejected pods\t%d (at most %d each)\n", r.RejectedLaunches, launchlimit.DefaultPerPod)
	fmt.Fprintf(tw, "pod deletions the watch missed\t%d (judged by their last known state)\n", r.Tombstones)
	restarts := make([]string, 0, len(r.Restarts))
	for name, n := range r.Restarts {
		restarts = append(restarts, fmt.Sprintf("%s %d", name, n))
	}
	slices.Sort(restarts)
	fmt.Fprintf(tw, "restarts\t%s (components that ended on their own, started again as the kubelet would)\n", strings.Join(restarts, ", "))
	fmt.Fprintf(tw, "time to recover\tp50 %.1fs, p99 %.1fs (last fault's end to a sound rest)\n", r.RecoveryP50Seconds, r.RecoveryP99Seconds)
	fmt.Fprintf(tw, "breaches\t%d\n", len(r.Breaches))
	for _, b := range r.Breaches {
		fmt.Fprintf(tw, "  seed %d (%s)\t%s: %s\n", b.Seed, b.Phase, b.Invariant, b.Detail)
	}
	tw.Flush()
	fmt.Fprintf(w, "chaos: %d trials, %d faults, %d breaches\n", r.Trials, r.FaultCount(), len(r.Breaches))
}

// nothingToHit says what a skipped fault of a kind found nothing of.
func nothingToHit(k FaultKind) string {
	if k == KillLeaderMidReplacement {
		return "no replacement under way"
	}
	return "no instance to hit"
}

// Write writes the report as JSON to path.
func (r *Report) Write(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(raw, '\n'), 0o644)
}
