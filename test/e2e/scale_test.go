package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/tailor-autoscaler/tailor/test/localstack"
	"github.com/tailor-autoscaler/tailor/test/scenario"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

// TestBenchScaleSmall runs make bench-scale's path at 250 pods (webmix 200, diverse 50, some
// 60 nodes) on a stack tuned for scale and auditing Tailor's requests: every pod runs,
// consolidation converges within the budgets, and the JSON report holds every field with the
// counts it is built from. Timings are the benchmark's, not asserted.
func TestBenchScaleSmall(t *testing.T) {
	ctrllog.SetLogger(klog.Background())
	first, with := scenario.ScaleWorkloads(250)
	report := filepath.Join(t.TempDir(), "scale.json")
	opts := scenario.ScaleOptions{
		ScaleDownOptions: scenario.ScaleDownOptions{
			Root: testenv.Root(), Shape: first.Shape, Pods: first.Pods, Keep: first.Keep, With: with,
			DisruptionInterval: scaleDownInterval, ConsolidateAfter: scaleDownConsolidateAfter,
			RunTimeout: 3 * time.Minute, ConvergeTimeout: 5 * time.Minute,
		},
		Nodes:  50,
		Report: report,
	}
	e := startStack(t, func(o *localstack.Options) {
		o.Scale, o.Audit = true, true
		o.ProvisionerArgs = []string{"--disruption-interval", scaleDownInterval.String()}
	})
	rep, r, err := scenario.Scale(e.ctx, e.stack, opts, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	checkScaleDown(t, r)
	if rep.PodsRunning != rep.Pods || rep.PodsBound < rep.Pods {
		t.Errorf("%d of %d pods ran, %d bound, before the scale-down", rep.PodsRunning, rep.Pods, rep.PodsBound)
	}
	if rep.PodsPlanned == 0 || rep.NodesLaunched == 0 || rep.Nodes == 0 {
		t.Errorf("%d pods planned onto %d NodeClaims, %d nodes bought: the burst's NodeClaims were not read", rep.PodsPlanned, rep.NodesLaunched, rep.Nodes)
	}
	if rep.APIRequests == 0 || rep.APIRequestsBy[0].Count == 0 {
		t.Errorf("no API request of Tailor's counted from the audit log")
	}
	for _, c := range rep.APIRequestsBy {
		if c.Component != localstack.Provisioner && c.Component != localstack.Scheduler {
			t.Errorf("requests of %q counted as Tailor's", c.Component)
		}
	}
	if rep.ConsolidationDecisions == 0 || rep.FirstConsolidationDecisionSeconds <= 0 {
		t.Errorf("%d consolidation decisions read, the first %.3fs: the sidecar's histogram was not read", rep.ConsolidationDecisions, rep.FirstConsolidationDecisionSeconds)
	}
	for name, v := range map[string]float64{
		"provisioner": float64(rep.ProvisionerPeakRSSBytes) * rep.ProvisionerCPUSeconds,
		"scheduler":   float64(rep.SchedulerPeakRSSBytes) * rep.SchedulerCPUSeconds,
		"API server":  float64(rep.APIServerPeakRSSBytes) * rep.APIServerCPUSeconds,
	} {
		if v <= 0 {
			t.Errorf("no peak RSS or CPU time read of the %s", name)
		}
	}
	checkReportFields(t, report)
}

// checkReportFields checks that the JSON report has a field for every field of
// scenario.ScaleReport.
func checkReportFields(t *testing.T, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("reading the report: %v", err)
	}
	typ := reflect.TypeOf(scenario.ScaleReport{})
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if _, ok := got[name]; !ok {
			t.Errorf("the report %s has no field %q", path, name)
		}
	}
}
