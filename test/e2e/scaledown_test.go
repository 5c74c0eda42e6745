package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/tailor-autoscaler/tailor/test/localstack"
	"github.com/tailor-autoscaler/tailor/test/scenario"
	"github.com/tailor-autoscaler/tailor/test/testenv"
	"github.com/tailor-autoscaler/tailor/test/workloads"
)

// The scale-downs run with a shorter disruption interval than the sidecar's 10s default
// and a consolidateAfter to match, so that the passes a scale-down needs (each takes away
// at most the default budget of 10% of a NodePool's nodes) fit in a CI run; what is asserted
// does not depend on the pace.
const (
	scaleDownInterval         = 3 * time.Second
	scaleDownConsolidateAfter = 5 * time.Second
)

// TestScaleDownConsolidatesWithinBudgets runs issue 5's scale-downs at a fifth of their size
// (webmix 400 → 100 pods, diverse 200 → 140) on the whole stack: Deployments with a
// PodDisruptionBudget each, all running, then scaled down. Consolidation must converge with
// every kept pod running, never take a budget below its desired healthy pods, delete no pod
// without eviction beyond the scale-down, leave no instance without its NodeClaim, and not
// cost more than before. A fifth keeps each shape to some 50 to 90 nodes, which the passes
// (each takes at most 10% of a NodePool's nodes) work through in a couple of minutes.
func TestScaleDownConsolidatesWithinBudgets(t *testing.T) {
	ctrllog.SetLogger(klog.Background())
	for _, c := range []struct {
		name string
		opts scenario.ScaleDownOptions
		// maxRatio bounds the cost after convergence over a fresh plan of the kept pods,
		// the 1.05 where consolidation meets it at this size; 0 leaves it to the
		// log. diverse at 200 pods ends at 1.06 to 1.10 (1.04 at its full 1,000): its
		// nodes are small and many hold a single anti-affinity pod, so one node more than
		// the fresh plan is several percent.
		maxRatio float64
		// spotToSpot enables the SpotToSpotConsolidation feature gate. The fresh plan puts
		// most of webmix on spot, which consolidation reaches only when it may replace spot
		// with cheaper spot; under Karpenter's default (off) spot nodes only go when their
		// pods fit elsewhere or on-demand is cheaper, and webmix ends ×1.08 to ×1.23.
		spotToSpot bool
	}{
		{"webmix 400 to 100", scenario.ScaleDownOptions{Shape: "webmix", Pods: 400, Keep: scenario.KeepRule{Kept: 1, Every: 4}}, 1.05, true},
		{"diverse 200 to 140", scenario.ScaleDownOptions{Shape: "diverse", Pods: 200, Keep: scenario.KeepRule{Kept: 7, Every: 10}}, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := c.opts
			opts.Root = testenv.Root()
			opts.DisruptionInterval, opts.ConsolidateAfter = scaleDownInterval, scaleDownConsolidateAfter
			opts.RunTimeout, opts.ConvergeTimeout = 3*time.Minute, 5*time.Minute
			opts.Snapshot = filepath.Join(t.TempDir(), "start.json")
			e := startStack(t, func(o *localstack.Options) {
				o.ProvisionerArgs = []string{"--disruption-interval", scaleDownInterval.String()}
				if c.spotToSpot {
					o.ProvisionerArgs = append(o.ProvisionerArgs, "--feature-gates", "SpotToSpotConsolidation=true")
				}
			})
			r, err := scenario.ScaleDown(e.ctx, e.stack, opts, testWriter{t})
			if err != nil {
				t.Fatal(err)
			}
			checkScaleDown(t, r)
			checkSnapshot(t, opts, r)
			t.Logf("%s: $%.2f/hour after, ×%.3f a fresh plan; %d nodes disrupted, %d NodeClaims created, %d evictions, %d pods evicted more than once, converged in %s",
				c.name, r.CostAfter, r.Ratio(), r.NodesDisrupted, r.NodeClaimsCreated, r.Evictions, r.EvictedTwice, r.Converge.Round(time.Second))
			if c.maxRatio > 0 && r.Ratio() > c.maxRatio {
				t.Errorf("the cost after convergence is ×%.3f a fresh plan of the kept pods ($%.2f against $%.2f an hour), want at most ×%.2f",
					r.Ratio(), r.CostAfter, r.FreshKept, c.maxRatio)
			}
		})
	}
}

// checkSnapshot checks that the start of consolidation was captured whole: every kept pod
// once, on a node with its offering.
func checkSnapshot(t *testing.T, opts scenario.ScaleDownOptions, r *scenario.ScaleDownResult) {
	t.Helper()
	snap, err := workloads.ReadSnapshot(opts.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Shape != opts.Shape || snap.Pods != opts.Pods {
		t.Errorf("snapshot of workload %s %d, want %s %d", snap.Shape, snap.Pods, opts.Shape, opts.Pods)
	}
	seen := map[int]bool{}
	for _, n := range snap.Nodes {
		if n.NodePool == "" || n.InstanceType == "" || n.Zone == "" || n.CapacityType == "" {
			t.Errorf("snapshot node %+v lacks its NodePool or offering", n)
		}
		for _, i := range n.Pods {
			if seen[i] || !opts.Keep.Keeps(i) {
				t.Errorf("snapshot places pod %d on %s: seen before %v, kept %v", i, n.Name, seen[i], opts.Keep.Keeps(i))
			}
			seen[i] = true
		}
	}
	if len(seen) != r.To {
		t.Errorf("snapshot places %d pods on %d nodes, want the %d kept", len(seen), len(snap.Nodes), r.To)
	}
}

func checkScaleDown(t *testing.T, r *scenario.ScaleDownResult) {
	t.Helper()
	if !r.Converged {
		t.Errorf("not converged: the last NodeClaim change was %s after the scale-down", r.Converge.Round(time.Second))
	}
	if r.Running != r.To || r.Pending != 0 {
		t.Errorf("%d of the %d kept pods running, %d pending", r.Running, r.To, r.Pending)
	}
	if r.PDBViolations != 0 {
		t.Errorf("%d observations of a PodDisruptionBudget below its desired healthy pods:\n  %s", r.PDBViolations, strings.Join(r.Violations, "\n  "))
	}
	if r.OtherDeletions != 0 {
		t.Errorf("%d pods deleted neither by eviction nor by the scale-down", r.OtherDeletions)
	}
	if len(r.Orphans) > 0 || len(r.ClaimsWithoutInstance) > 0 {
		t.Errorf("instances without a NodeClaim: %v; NodeClaims without an instance: %v", r.Orphans, r.ClaimsWithoutInstance)
	}
	if len(r.PriceMismatches) > 0 {
		t.Errorf("the local endpoint and the planner price instances differently:\n  %s", strings.Join(r.PriceMismatches, "\n  "))
	}
	if r.CostAfter > r.CostBefore {
		t.Errorf("consolidation raised the cost from $%.2f to $%.2f an hour", r.CostBefore, r.CostAfter)
	}
	if r.EvictedTwice != 0 {
		t.Errorf("%d pods evicted more than once: consolidation moved pods it had moved already", r.EvictedTwice)
	}
	if len(r.Unpriced) > 0 {
		t.Errorf("live instances no NodeClaim prices, so their nodes' cost is not whole: %v", r.Unpriced)
	}
}
