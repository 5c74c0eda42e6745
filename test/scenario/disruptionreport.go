package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tailor-autoscaler/tailor/provisioner/surge"
)

// DisruptionReport is the disruption scenario as make bench-disruption writes it to
// _output/bench/disruption.json.
type DisruptionReport struct {
	// Rows are the Deployments behind a Service, the opted-in half first.
	Rows []DisruptionReportRow `json:"rows"`
	// ExtraPodsAtEnd counts the pods beyond their Deployment's replicas, or still labelled
	// tailor.sh/replaces, at the end.
	ExtraPodsAtEnd int `json:"extraPodsAtEnd"`
	// ConvergeSeconds is the time from the drift to convergence of the opted-in pool, or to
	// the run's bound when TimedOut.
	ConvergeSeconds float64 `json:"convergeSeconds"`
	TimedOut        bool    `json:"timedOut"`
	// DriftedNodes and DriftedNodesReplaced count the opted-in pool's drifted NodeClaims and
	// those gone by the end, DriftedNodesDraining those being deleted still;
	// BaselineDriftedNodes and BaselineNodesKept the baseline pool's drifted NodeClaims and
	// those still there, BaselineNodesDraining those of them being deleted (their drain
	// blocked).
	DriftedNodes          int `json:"driftedNodes"`
	DriftedNodesReplaced  int `json:"driftedNodesReplaced"`
	DriftedNodesDraining  int `json:"driftedNodesDraining"`
	BaselineDriftedNodes  int `json:"baselineDriftedNodes"`
	BaselineNodesKept     int `json:"baselineNodesKept"`
	BaselineNodesDraining int `json:"baselineNodesDraining"`
	// Copies counts the pods started labelled tailor.sh/replaces; Evictions the pods evicted
	// through the Eviction API.
	Copies    int `json:"copies"`
	Evictions int `json:"evictions"`
	// PassesSinceDrift counts the sidecar's disruption passes from the drift to the end, by
	// result (decided, busy, idle, planning, failed).
	PassesSinceDrift map[string]int `json:"passesSinceDrift"`
}

// DisruptionReportRow is one Deployment of the report.
type DisruptionReportRow struct {
	Name    string `json:"name"`
	OptedIn bool   `json:"optedIn"`
	// OptedInBy says how: "pod template" or "NodePool"; absent for the baseline.
	OptedInBy                   string  `json:"optedInBy,omitempty"`
	SecondsWithoutReadyEndpoint float64 `json:"secondsWithoutReadyEndpoint"`
	Moved                       bool    `json:"moved"`
}

// Report is the scenario's figures for its JSON report.
func (r DisruptionResult) Report() DisruptionReport {
	rep := DisruptionReport{
		Rows:            make([]DisruptionReportRow, len(r.Rows)),
		ExtraPodsAtEnd:  r.ExtraPods,
		ConvergeSeconds: r.Converge.Seconds(), TimedOut: r.TimedOut,
		DriftedNodes: r.OptedIn.Drifted, DriftedNodesReplaced: r.OptedIn.Replaced, DriftedNodesDraining: r.OptedIn.Draining,
		BaselineDriftedNodes: r.Baseline.Drifted, BaselineNodesKept: r.Baseline.Kept(), BaselineNodesDraining: r.Baseline.Draining,
		Copies: r.Copies, Evictions: r.Evictions, PassesSinceDrift: r.Passes,
	}
	for i, row := range r.Rows {
		rep.Rows[i] = DisruptionReportRow{
			Name: row.Name, OptedIn: row.OptIn != "", OptedInBy: row.OptIn,
			SecondsWithoutReadyEndpoint: row.WithoutReadyEndpoint.Seconds(), Moved: row.Moved,
		}
	}
	return rep
}

// WriteDisruptionReport writes the scenario's report to path as JSON, creating its
// directory.
func WriteDisruptionReport(path string, r DisruptionResult) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing the disruption report: %w", err)
	}
	raw, err := json.MarshalIndent(r.Report(), "", "  ")
	if err != nil {
		return fmt.Errorf("writing the disruption report: %w", err)
	}
	if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the disruption report: %w", err)
	}
	return nil
}

// HalfFigures sums one half's rows: how many Deployments, how long they had no ready
// endpoint in all and at most, how many moved.
type HalfFigures struct {
	Deployments, Moved int
	Total, Most        time.Duration
	// Without counts the Deployments that were without a ready endpoint at some point.
	Without int
}

// Half sums the rows of the opted-in half (optedIn) or of the baseline.
func (r DisruptionResult) Half(optedIn bool) HalfFigures {
	var h HalfFigures
	for _, row := range r.Rows {
		if (row.OptIn != "") != optedIn {
			continue
		}
		h.Deployments++
		h.Total += row.WithoutReadyEndpoint
		h.Most = max(h.Most, row.WithoutReadyEndpoint)
		if row.WithoutReadyEndpoint > 0 {
			h.Without++
		}
		if row.Moved {
			h.Moved++
		}
	}
	return h
}

// PrintDisruption prints the scenario's table, a row per Deployment and a summary, in one
// write (a test's log takes each write as a line).
func PrintDisruption(w io.Writer, r DisruptionResult) {
	out := &bytes.Buffer{}
	defer func() { _, _ = w.Write(out.Bytes()) }()
	in, base := r.Half(true), r.Half(false)
	fmt.Fprintf(out, "\nreplace-before-evict: %d Deployments of one replica, each behind a Service and a PodDisruptionBudget of minAvailable 1; %d opted in, %d not; nodes drifted, fillers scaled %d → 1\n",
		len(r.Rows), in.Deployments, base.Deployments, r.Fillers)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  DEPLOYMENT\tOPTED IN BY\tWITHOUT READY ENDPOINT\tMOVED")
	for _, row := range r.Rows {
		by := row.OptIn
		if by == "" {
			by = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%.1fs\t%s\n", row.Name, by, row.WithoutReadyEndpoint.Seconds(), yesNo(row.Moved))
	}
	tw.Flush()
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	row := func(k, format string, args ...any) {
		fmt.Fprintf(tw, "  %s\t"+format+"\n", append([]any{k}, args...)...)
	}
	row("provisioned", "%s, on %d nodes", r.Provisioned.Round(time.Second), r.NodesBefore)
	row("opted in", "%s (target 0); %d of %d moved", describeHalf(in), in.Moved, in.Deployments)
	row("baseline", "%s; %d of %d moved", describeHalf(base), base.Moved, base.Deployments)
	row("opted-in pool", "%d of %d drifted nodes replaced (target all), %d draining still", r.OptedIn.Replaced, r.OptedIn.Drifted, r.OptedIn.Draining)
	row("baseline pool", "%d of %d drifted nodes kept, %d of them draining (their drain blocked); %d replaced", r.Baseline.Kept(), r.Baseline.Drifted, r.Baseline.Draining, r.Baseline.Replaced)
	row("copies", "%d pods started labelled %s", r.Copies, surge.ReplacesLabelKey)
	row("evictions", "%d pods evicted through the Eviction API", r.Evictions)
	row("extra pods", "%d at the end (target 0)", r.ExtraPods)
	passes := make([]string, len(passResults))
	for i, res := range passResults {
		passes[i] = fmt.Sprintf("%d %s", r.Passes[res], res)
	}
	row("sidecar passes", "%s since the drift (busy: a decision under way, or a NodeClaim it deleted not gone yet)", strings.Join(passes, ", "))
	if r.TimedOut {
		row("converged", "NO: timed out %s after the drift, waiting for %s", r.Converge.Round(time.Second), r.Waiting)
	} else {
		row("converged", "in %s (drifted nodes of the opted-in pool gone, no pod pending or labelled %s, no node of it cordoned; then so for %s)",
			r.Converge.Round(time.Second), surge.ReplacesLabelKey, r.Quiet)
	}
	row("wall time", "%s", r.Wall.Round(time.Second))
	tw.Flush()
}

// describeHalf renders how long a half's Deployments were without a ready endpoint.
func describeHalf(h HalfFigures) string {
	return fmt.Sprintf("%d of %d Deployments without a ready endpoint at some point, %.1fs in all, %.1fs at most",
		h.Without, h.Deployments, h.Total.Seconds(), h.Most.Seconds())
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
