package scenario

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestScaleDownReportsAreWrittenWithTheirRatios(t *testing.T) {
	results := []*ScaleDownResult{
		{
			Workloads: []Workload{{Shape: "diverse"}}, From: 1000, To: 700,
			CostBefore: 16, CostAfter: 9.5, FreshKept: 9.25,
			NodesDisrupted: 300, NodeClaimsCreated: 40, Evictions: 390, EvictedTwice: 1, PDBViolations: 2,
			Converged: true, Converge: 6*time.Minute + 30*time.Second,
		},
		// Nothing saved: no evictions per dollar; no fresh plan: no ratio.
		{Workloads: []Workload{{Shape: "webmix"}}, From: 20, To: 20, CostBefore: 1, CostAfter: 1, Evictions: 3},
	}
	path := filepath.Join(t.TempDir(), "bench", "scaledown.json")
	if err := WriteScaleDownReports(path, results); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []ScaleDownReport
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := []ScaleDownReport{
		{
			Workload: "diverse 1000 → 700", From: 1000, To: 700,
			CostBefore: 16, CostAfter: 9.5, FreshKept: 9.25, CostVsFresh: 9.5 / 9.25, EvictionsPerDollarSaved: 60,
			NodesDisrupted: 300, NodeClaimsCreated: 40, Evictions: 390, EvictedTwice: 1, PDBViolations: 2,
			Converged: true, ConvergeSeconds: 390,
		},
		{Workload: "webmix 20 → 20", From: 20, To: 20, CostBefore: 1, CostAfter: 1, Evictions: 3},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}
