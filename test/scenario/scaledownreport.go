package scenario

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// ScaleDownReport is one scale-down as make bench-scaledown writes it to
// _output/bench/scaledown.json.
type ScaleDownReport struct {
	// Workload names the scale-down: its shapes and sizes, "diverse 1000 → 700".
	Workload string `json:"workload"`
	From     int    `json:"from"`
	To       int    `json:"to"`
	// CostBefore and CostAfter are the live nodes' hourly price, priced whole, when every pod
	// first ran and once converged; FreshKept is a fresh plan of the kept pods, priced the
	// same way, and CostVsFresh their ratio.
	CostBefore  float64 `json:"costBeforeDollarsPerHour"`
	CostAfter   float64 `json:"costAfterDollarsPerHour"`
	FreshKept   float64 `json:"freshPlanDollarsPerHour"`
	CostVsFresh float64 `json:"costVsFresh"`
	// EvictionsPerDollarSaved is the evictions over the hourly saving, the moves a dollar an
	// hour of saving took; 0 when nothing was saved.
	EvictionsPerDollarSaved float64 `json:"evictionsPerDollarPerHourSaved"`
	NodesDisrupted          int     `json:"nodesDisrupted"`
	NodeClaimsCreated       int     `json:"nodeClaimsCreated"`
	Evictions               int     `json:"evictions"`
	EvictedTwice            int     `json:"evictedTwice"`
	PDBViolations           int     `json:"pdbViolations"`
	Converged               bool    `json:"converged"`
	ConvergeSeconds         float64 `json:"convergeSeconds"`
}

// Report is the scale-down's figures for its JSON report.
func (r *ScaleDownResult) Report() ScaleDownReport {
	rep := ScaleDownReport{
		Workload: fmt.Sprintf("%s %d → %d", r.Name(), r.From, r.To), From: r.From, To: r.To,
		CostBefore: r.CostBefore, CostAfter: r.CostAfter, FreshKept: r.FreshKept, CostVsFresh: r.Ratio(),
		NodesDisrupted: r.NodesDisrupted, NodeClaimsCreated: r.NodeClaimsCreated,
		Evictions: r.Evictions, EvictedTwice: r.EvictedTwice, PDBViolations: r.PDBViolations,
		Converged: r.Converged, ConvergeSeconds: r.Converge.Seconds(),
	}
	if saved := r.CostBefore - r.CostAfter; saved > 0 {
		rep.EvictionsPerDollarSaved = float64(r.Evictions) / saved
	}
	return rep
}

// WriteScaleDownReports writes the scale-downs' reports to path as a JSON array, creating
// its directory.
func WriteScaleDownReports(path string, results []*ScaleDownResult) error {
	reps := make([]ScaleDownReport, len(results))
	for i, r := range results {
		reps[i] = r.Report()
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing the scale-down report: %w", err)
	}
	raw, err := json.MarshalIndent(reps, "", "  ")
	if err != nil {
		return fmt.Errorf("writing the scale-down report: %w", err)
	}
	if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the scale-down report: %w", err)
	}
	return nil
}
