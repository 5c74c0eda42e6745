package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

func TestMetricFamiliesReadEveryCollector(t *testing.T) {
	families, err := metricFamilies()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]metric{}
	for _, m := range families {
		got[m.name] = m
	}
	want := map[string]metric{
		"tailor_provisioner_pods_held_back":        {name: "tailor_provisioner_pods_held_back", kind: "gauge", labels: []string{"state"}},
		"tailor_nodepool_limit":                    {name: "tailor_nodepool_limit", kind: "gauge", labels: []string{"nodepool", "resource"}},
		"tailor_interruption_messages_total":       {name: "tailor_interruption_messages_total", kind: "counter", labels: []string{"kind"}},
		"tailor_provisioner_plan_duration_seconds": {name: "tailor_provisioner_plan_duration_seconds", kind: "histogram"},
		"grpc_server_handling_seconds":             {name: "grpc_server_handling_seconds", kind: "histogram", labels: []string{"grpc_type", "grpc_service", "grpc_method"}},
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("no family %s", name)
			continue
		}
		if g.help == "" {
			t.Errorf("%s has no help", name)
		}
		g.help = ""
		if diff := cmp.Diff(w, g, cmp.AllowUnexported(metric{})); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

func TestDescFieldsUnquote(t *testing.T) {
	d := prometheus.NewDesc("x_total", `Counts "x" | y.`, []string{"a", "b"}, nil)
	m := descFields.FindStringSubmatch(d.String())
	if diff := cmp.Diff([]string{`"x_total"`, `"Counts \"x\" | y."`, "a,b"}, m[1:]); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
	if got := cell("a | b\nc"); got != `a \| b c` {
		t.Errorf("cell = %q", got)
	}
}

func TestNamesPageListsTheLaunchLimitsCondition(t *testing.T) {
	text, err := namesPage("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| `tailor.sh/PlannedCapacityRejected` | `provisioner/launchlimit` (PodCondition) |", "| `LaunchLimitReached` | `provisioner/provisioning` (ReasonLaunchLimitReached) |"} {
		if !strings.Contains(text, want) {
			t.Errorf("names page has no row %q", want)
		}
	}
}

// TestKindOfTellsMetricsWithTheSameMethodsApart: a Gauge has a Counter's methods, and a
// Histogram and a Summary have the same ones; each is named by what it writes.
func TestKindOfTellsMetricsWithTheSameMethodsApart(t *testing.T) {
	tests := []struct {
		c    prometheus.Collector
		want string
	}{
		{prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"}), "gauge"},
		{prometheus.NewCounter(prometheus.CounterOpts{Name: "c"}), "counter"},
		{prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h"}), "histogram"},
		{prometheus.NewSummary(prometheus.SummaryOpts{Name: "s"}), "summary"},
		{prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gv"}, []string{"l"}), "gauge"},
		{prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cv"}, []string{"l"}), "counter"},
		{prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hv"}, []string{"l"}), "histogram"},
		{prometheus.NewSummaryVec(prometheus.SummaryOpts{Name: "sv"}, []string{"l"}), "summary"},
	}
	for _, tt := range tests {
		if got := kindOf(tt.c, "x"); got != tt.want {
			t.Errorf("kindOf(%T) = %q, want %q", tt.c, got, tt.want)
		}
	}
}
