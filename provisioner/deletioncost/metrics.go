package deletioncost

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Results of a pod patch, the result label of tailor_pod_deletion_cost_patches_total.
const (
	resultSet     = "set"
	resultCleared = "cleared"
	resultFailed  = "failed"
)

var patchesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "tailor", Subsystem: "pod_deletion_cost", Name: "patches_total",
	Help: "Pod patches that steer Deployment scale-downs onto the nodes consolidation would empty first, by result: set (a controller.kubernetes.io/pod-deletion-cost written), cleared (Tailor's cost removed from a pod whose node is no longer ranked), failed.",
}, []string{"result"})

func init() {
	crmetrics.Registry.MustRegister(Collectors()...)
}

// Collectors are the metrics deletioncost registers: what init registers, and what the
// metrics reference lists.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{patchesTotal}
}
