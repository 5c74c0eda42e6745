package e2e

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tailor-autoscaler/tailor/test/localstack"
)

// karpenterFamilies are the Karpenter-named metric families a provisioning and
// consolidation run serves, each with Karpenter's label names, sorted.
var karpenterFamilies = map[string][]string{
	"karpenter_nodeclaims_created_total":                                  {"min_values_relaxed", "nodepool", "reason"},
	"karpenter_nodeclaims_terminated_total":                               {"capacity_type", "nodepool", "zone"},
	"karpenter_nodeclaims_disrupted_total":                                {"capacity_type", "consolidation_policy", "nodepool", "reason", "termination_mode"},
	"karpenter_nodes_created_total":                                       {"nodepool", "zone"},
	"karpenter_nodes_terminated_total":                                    {"nodepool", "zone"},
	"karpenter_nodes_termination_duration_seconds":                        {"nodepool"},
	"karpenter_nodes_drained_total":                                       {"nodepool"},
	"karpenter_pods_startup_duration_seconds":                             {},
	"karpenter_pods_bound_duration_seconds":                               {},
	"karpenter_pods_state":                                                {"arch", "capacity_type", "instance_type", "managed", "name", "namespace", "node", "nodepool", "owner", "phase", "ready", "scheduled", "zone"},
	"karpenter_scheduler_scheduling_duration_seconds":                     {"controller"},
	"karpenter_scheduler_queue_depth":                                     {"controller"},
	"karpenter_cloudprovider_duration_seconds":                            {"controller", "method", "provider"},
	"karpenter_cloudprovider_errors_total":                                {"controller", "error", "method", "provider"},
	"karpenter_voluntary_disruption_decisions_total":                      {"consolidation_type", "decision", "reason"},
	"karpenter_voluntary_disruption_eligible_nodes":                       {"reason"},
	"karpenter_voluntary_disruption_decision_evaluation_duration_seconds": {"consolidation_type", "reason"},
	"karpenter_nodepools_allowed_disruptions":                             {"nodepool", "reason"},
	"karpenter_nodepools_usage":                                           {"nodepool", "resource_type"},
	"karpenter_nodepools_limit":                                           {"nodepool", "resource_type"},
	"karpenter_cluster_state_node_count":                                  {},
	"karpenter_cluster_state_synced":                                      {},
	"karpenter_cluster_state_unsynced_time_seconds":                       {},
}

// checkKarpenterMetrics scrapes the sidecar and checks that every family of
// karpenterFamilies has a series, with Karpenter's labels.
func (e *env) checkKarpenterMetrics(t *testing.T) {
	t.Helper()
	scraped, err := localstack.ScrapeMetrics(e.ctx, e.stack.ProvisionerMetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for name := range karpenterFamilies {
		family, ok := scraped[name]
		if !ok || len(family.GetMetric()) == 0 {
			continue
		}
		labels := []string{}
		for _, l := range family.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName())
		}
		slices.Sort(labels)
		got[name] = labels
	}
	if diff := cmp.Diff(karpenterFamilies, got); diff != "" {
		t.Errorf("Karpenter-named metrics served (-want +got, missing families have no series):\n%s", diff)
	}
}
