package scenario

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// disruptionTestResult is a run in which the opted-in half moved without a gap but for one
// Deployment, and the baseline kept one drifted node.
func disruptionTestResult() DisruptionResult {
	return DisruptionResult{
		Rows: []DisruptionRow{
			{Name: "template-00", OptIn: OptInTemplate, Moved: true},
			{Name: "nodepool-01", OptIn: OptInNodePool, WithoutReadyEndpoint: 1500 * time.Millisecond, Moved: true},
			{Name: "baseline-02"},
			{Name: "baseline-03", WithoutReadyEndpoint: 4 * time.Second, Moved: true},
		},
		Fillers: 4, Provisioned: 40 * time.Second, NodesBefore: 5,
		OptedIn:  PoolDrift{NodePool: "opted-in", Drifted: 3, Replaced: 3},
		Baseline: PoolDrift{NodePool: "baseline", Drifted: 2, Replaced: 1, Draining: 1},
		Copies:   2, Evictions: 1, ExtraPods: 1,
		Passes:   map[string]int{"decided": 4, "busy": 20, "idle": 3},
		Converge: 95 * time.Second, Quiet: 19 * time.Second, Wall: 3 * time.Minute,
	}
}

func TestDisruptionReportIsWrittenWithItsRowsAndNodes(t *testing.T) {
	r := disruptionTestResult()
	path := filepath.Join(t.TempDir(), "bench", "disruption.json")
	if err := WriteDisruptionReport(path, r); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got DisruptionReport
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := DisruptionReport{
		Rows: []DisruptionReportRow{
			{Name: "template-00", OptedIn: true, OptedInBy: "pod template", Moved: true},
			{Name: "nodepool-01", OptedIn: true, OptedInBy: "NodePool", SecondsWithoutReadyEndpoint: 1.5, Moved: true},
			{Name: "baseline-02"},
			{Name: "baseline-03", SecondsWithoutReadyEndpoint: 4, Moved: true},
		},
		ExtraPodsAtEnd: 1, ConvergeSeconds: 95,
		DriftedNodes: 3, DriftedNodesReplaced: 3, BaselineDriftedNodes: 2, BaselineNodesKept: 1, BaselineNodesDraining: 1,
		Copies: 2, Evictions: 1, PassesSinceDrift: map[string]int{"decided": 4, "busy": 20, "idle": 3},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	// The fields are the report's public names: bench tooling reads them.
	var fields map[string]any
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"rows", "extraPodsAtEnd", "convergeSeconds", "driftedNodes", "driftedNodesReplaced", "baselineNodesKept"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("the report has no field %q: %s", k, raw)
		}
	}
	row := fields["rows"].([]any)[2].(map[string]any)
	if diff := cmp.Diff(map[string]any{"name": "baseline-02", "optedIn": false, "secondsWithoutReadyEndpoint": 0.0, "moved": false}, row); diff != "" {
		t.Errorf("a baseline row (-want +got):\n%s", diff)
	}
}

func TestDisruptionTablePrintsEveryDeploymentAndTheSummary(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    func() DisruptionResult
		want string
	}{
		{
			name: "converged",
			r:    disruptionTestResult,
			want: `
replace-before-evict: 4 Deployments of one replica, each behind a Service and a PodDisruptionBudget of minAvailable 1; 2 opted in, 2 not; nodes drifted, fillers scaled 4 → 1
  DEPLOYMENT   OPTED IN BY   WITHOUT READY ENDPOINT  MOVED
  template-00  pod template  0.0s                    yes
  nodepool-01  NodePool      1.5s                    yes
  baseline-02  -             0.0s                    no
  baseline-03  -             4.0s                    yes

  provisioned     40s, on 5 nodes
  opted in        1 of 2 Deployments without a ready endpoint at some point, 1.5s in all, 1.5s at most (target 0); 2 of 2 moved
  baseline        1 of 2 Deployments without a ready endpoint at some point, 4.0s in all, 4.0s at most; 1 of 2 moved
  opted-in pool   3 of 3 drifted nodes replaced (target all), 0 draining still
  baseline pool   1 of 2 drifted nodes kept, 1 of them draining (their drain blocked); 1 replaced
  copies          2 pods started labelled tailor.sh/replaces
  evictions       1 pods evicted through the Eviction API
  extra pods      1 at the end (target 0)
  sidecar passes  4 decided, 20 busy, 3 idle, 0 planning, 0 failed since the drift (busy: a decision under way, or a NodeClaim it deleted not gone yet)
  converged       in 1m35s (drifted nodes of the opted-in pool gone, no pod pending or labelled tailor.sh/replaces, no node of it cordoned; then so for 19s)
  wall time       3m0s
`,
		},
		{
			name: "timed out",
			r: func() DisruptionResult {
				r := disruptionTestResult()
				r.Rows = r.Rows[:1]
				r.TimedOut, r.Converge, r.Waiting = true, 4*time.Minute, "1 drifted NodeClaims of NodePool opted-in to go (in-1)"
				return r
			},
			want: `
replace-before-evict: 1 Deployments of one replica, each behind a Service and a PodDisruptionBudget of minAvailable 1; 1 opted in, 0 not; nodes drifted, fillers scaled 4 → 1
  DEPLOYMENT   OPTED IN BY   WITHOUT READY ENDPOINT  MOVED
  template-00  pod template  0.0s                    yes

  provisioned     40s, on 5 nodes
  opted in        0 of 1 Deployments without a ready endpoint at some point, 0.0s in all, 0.0s at most (target 0); 1 of 1 moved
  baseline        0 of 0 Deployments without a ready endpoint at some point, 0.0s in all, 0.0s at most; 0 of 0 moved
  opted-in pool   3 of 3 drifted nodes replaced (target all), 0 draining still
  baseline pool   1 of 2 drifted nodes kept, 1 of them draining (their drain blocked); 1 replaced
  copies          2 pods started labelled tailor.sh/replaces
  evictions       1 pods evicted through the Eviction API
  extra pods      1 at the end (target 0)
  sidecar passes  4 decided, 20 busy, 3 idle, 0 planning, 0 failed since the drift (busy: a decision under way, or a NodeClaim it deleted not gone yet)
  converged       NO: timed out 4m0s after the drift, waiting for 1 drifted NodeClaims of NodePool opted-in to go (in-1)
  wall time       3m0s
`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			PrintDisruption(&out, tc.r())
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("table (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDisruptionHalvesSumTheirRows(t *testing.T) {
	r := disruptionTestResult()
	got := []HalfFigures{r.Half(true), r.Half(false)}
	want := []HalfFigures{
		{Deployments: 2, Moved: 2, Total: 1500 * time.Millisecond, Most: 1500 * time.Millisecond, Without: 1},
		{Deployments: 2, Moved: 1, Total: 4 * time.Second, Most: 4 * time.Second, Without: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("halves (-want +got):\n%s", diff)
	}
}
