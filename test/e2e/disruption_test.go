package e2e

import (
	"testing"
	"time"

	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/tailor-autoscaler/tailor/test/localstack"
	"github.com/tailor-autoscaler/tailor/test/scenario"
)

// The disruption scenario runs passes every 3s, as the scale-downs do, so that drift's one
// node a pass fits in a CI run; what is asserted does not depend on the pace.
const (
	disruptionInterval         = 3 * time.Second
	disruptionConsolidateAfter = 5 * time.Second
)

// TestDisruptionReplacesOptedInPodsBeforeEvicting runs issue 42's measurement of
// replace-before-evict at six Deployments: single-replica Deployments behind a Service and a
// PodDisruptionBudget of minAvailable 1, half opted in, every node drifted and the fillers
// scaled down. Every opted-in Deployment must keep a ready endpoint throughout and move,
// every drifted node of the opted-in NodePool must be replaced, and no pod be left over;
// the baseline half's figures are logged.
func TestDisruptionReplacesOptedInPodsBeforeEvicting(t *testing.T) {
	ctrllog.SetLogger(klog.Background())
	e := startStack(t, func(o *localstack.Options) {
		o.ProvisionerArgs = []string{"--disruption-interval", disruptionInterval.String()}
	})
	r, err := scenario.Disruption(e.ctx, e.stack, scenario.DisruptionOptions{
		Deployments: 6, Fillers: 3,
		DisruptionInterval: disruptionInterval, ConsolidateAfter: disruptionConsolidateAfter,
		RunTimeout: 2 * time.Minute, Timeout: 4 * time.Minute,
	}, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	base := r.Half(false)
	t.Logf("baseline: %d of %d Deployments without a ready endpoint at some point, %.1fs in all; %d of %d drifted nodes kept, %d of them draining",
		base.Without, base.Deployments, base.Total.Seconds(), r.Baseline.Kept(), r.Baseline.Drifted, r.Baseline.Draining)
	t.Logf("sidecar's disruption passes since the drift, by result: %v", r.Passes)
	for _, row := range r.Rows {
		if row.OptIn == "" {
			continue
		}
		if row.WithoutReadyEndpoint > 0 {
			t.Errorf("%s (opted in by its %s) had no ready endpoint for %.1fs, want 0", row.Name, row.OptIn, row.WithoutReadyEndpoint.Seconds())
		}
		// Every node drifted: a pod that did not move kept a drifted node.
		if !row.Moved {
			t.Errorf("%s (opted in by its %s) still runs the pod it ran before the drift", row.Name, row.OptIn)
		}
	}
	if r.OptedIn.Drifted == 0 {
		t.Errorf("no NodeClaim of NodePool %s drifted", r.OptedIn.NodePool)
	}
	if r.OptedIn.Replaced != r.OptedIn.Drifted {
		t.Errorf("%d of the %d drifted NodeClaims of NodePool %s replaced (%d draining still), want all",
			r.OptedIn.Replaced, r.OptedIn.Drifted, r.OptedIn.NodePool, r.OptedIn.Draining)
	}
	if r.ExtraPods != 0 {
		t.Errorf("%d pods beyond their Deployment's replicas or still labelled as copies at the end, want 0", r.ExtraPods)
	}
	if r.TimedOut {
		t.Errorf("NodePool %s not converged %s after the drift: waiting for %s", r.OptedIn.NodePool, r.Converge.Round(time.Second), r.Waiting)
	}
}
