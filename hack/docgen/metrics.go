package main

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/utils/clock"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/provisioner/deletioncost"
	"github.com/tailor-autoscaler/tailor/provisioner/disruption"
	"github.com/tailor-autoscaler/tailor/provisioner/interruption"
	"github.com/tailor-autoscaler/tailor/provisioner/metrics"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/garbagecollection"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/lifecycle"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/termination"
	"github.com/tailor-autoscaler/tailor/provisioner/nodepool"
	"github.com/tailor-autoscaler/tailor/provisioner/surge"
)

// collectors are every collector the sidecar registers: each package's, and those the
// operator builds over the cache (which describe themselves without it).
func collectors() []prometheus.Collector {
	var out []prometheus.Collector
	for _, list := range [][]prometheus.Collector{
		metrics.Collectors(), aws.Collectors(), disruption.Collectors(), deletioncost.Collectors(), surge.Collectors(), interruption.Collectors(),
		termination.Collectors(), garbagecollection.Collectors(),
		{nodepool.NewCollector(nil), metrics.NewClusterCollector(nil, nil, clock.RealClock{}), lifecycle.NewWaitingCollector(nil, clock.RealClock{})},
	} {
		out = append(out, list...)
	}
	return out
}

// metric is one family as the reference lists it.
type metric struct {
	name, kind, help string
	labels           []string
}

// descFields reads a descriptor's name, help and variable labels from its String(), the one
// place client_golang shows them.
var descFields = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), constLabels: \{[^}]*\}, variableLabels: \{([^}]*)\}\}$`)

// kindOf is a collector's metric type: of a vector by its Go type, of a single metric by
// what it writes (a Gauge has every method of a Counter, and a Histogram and a Summary the
// same methods, so their interfaces cannot tell them apart); the gRPC server's by the
// family's name; Tailor's own collectors report gauges.
func kindOf(c prometheus.Collector, name string) string {
	switch c := c.(type) {
	case *prometheus.CounterVec:
		return "counter"
	case *prometheus.GaugeVec:
		return "gauge"
	case *prometheus.HistogramVec:
		return "histogram"
	case *prometheus.SummaryVec:
		return "summary"
	case *grpcprom.ServerMetrics:
		if strings.HasSuffix(name, "_seconds") {
			return "histogram"
		}
		return "counter"
	case prometheus.Metric:
		var m dto.Metric
		if err := c.Write(&m); err == nil {
			switch {
			case m.Counter != nil:
				return "counter"
			case m.Histogram != nil:
				return "histogram"
			case m.Summary != nil:
				return "summary"
			}
		}
	}
	return "gauge"
}

func metricFamilies() ([]metric, error) {
	var out []metric
	for _, c := range collectors() {
		ch := make(chan *prometheus.Desc, 64)
		go func() {
			c.Describe(ch)
			close(ch)
		}()
		for d := range ch {
			m := descFields.FindStringSubmatch(d.String())
			if m == nil {
				return nil, fmt.Errorf("reading descriptor %s", d)
			}
			name, err := strconv.Unquote(m[1])
			if err != nil {
				return nil, err
			}
			help, err := strconv.Unquote(m[2])
			if err != nil {
				return nil, err
			}
			var labels []string
			if m[3] != "" {
				labels = strings.Split(m[3], ",")
			}
			out = append(out, metric{name: name, kind: kindOf(c, name), help: help, labels: labels})
		}
	}
	slices.SortFunc(out, func(a, b metric) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// metricsPage lists every metric family the sidecar serves.
func metricsPage(string) (string, error) {
	families, err := metricFamilies()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(header("Metrics", "the collectors tailor-provisioner registers"))
	b.WriteString("The sidecar serves these on `--metrics-bind-address` (`/metrics`), beside controller-runtime's own (`controller_runtime_*`, `workqueue_*`, `rest_client_*`) and Go's (`go_*`, `process_*`); tailor-scheduler serves kube-scheduler's on its secure port. The `karpenter_*` families carry Karpenter's names, labels and label values, so a Karpenter fleet's dashboards and alerts read Tailor too.\n\n")
	b.WriteString("| metric | type | labels | meaning |\n|---|---|---|---|\n")
	for _, m := range families {
		labels := make([]string, len(m.labels))
		for i, l := range m.labels {
			labels[i] = "`" + l + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m.name, m.kind, strings.Join(labels, ", "), cell(m.help))
	}
	return b.String(), nil
}
