package chaos

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tailor-autoscaler/tailor/test/localstack"
)

func TestCheckEvictions(t *testing.T) {
	start := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	plan := Plan{Seed: 7, Phase: PhaseScaleDown, Deployments: []Deployment{{Name: "web", Replicas: 4, Keep: 2}, {Name: "api", Replicas: 3, Keep: 3}}}
	tests := []struct {
		name             string
		killed           []string
		evicted, deleted []eviction
		want             []string
	}{{
		name:    "the scale-down deletes what it drops",
		deleted: []eviction{{pod: "web-1", deployment: "web", node: "n1"}, {pod: "web-2", deployment: "web", node: "n1"}},
		want:    []string{InvPDB, InvEvictedOnce},
	}, {
		name:    "a deletion beyond the scale-down bypassed the budgets",
		deleted: []eviction{{pod: "api-1", deployment: "api", node: "n1"}},
		want:    []string{InvEvictedOnce},
	}, {
		name:    "pods go with the node a fault took",
		killed:  []string{"n1"},
		deleted: []eviction{{pod: "api-1", deployment: "api", node: "n1"}, {pod: "api-2", deployment: "api", node: "n1"}},
		want:    []string{InvPDB, InvEvictedOnce},
	}, {
		// Seed 4000: the pod replaced one lost with a reclaimed spot node; consolidation had
		// moved no pod of its Deployment, so evicting it is its first move.
		name:    "a replacement of a pod a fault took is not a moved pod",
		killed:  []string{"n1"},
		deleted: []eviction{{pod: "api-1", deployment: "api", node: "n1"}},
		evicted: []eviction{{pod: "api-4", deployment: "api", node: "n2", created: at(7 * time.Second), at: at(15 * time.Second)}},
		want:    []string{InvPDB, InvEvictedOnce},
	}, {
		// Seed 4000 again: the node of a reclaimed instance was drained before it went.
		name:   "the drain of a node a fault took is no consolidation",
		killed: []string{"n1"},
		evicted: []eviction{
			{pod: "api-1", deployment: "api", node: "n1", created: at(-time.Minute), at: at(6 * time.Second)},
			{pod: "api-4", deployment: "api", node: "n2", created: at(7 * time.Second), at: at(20 * time.Second)},
		},
		want: []string{InvPDB, InvEvictedOnce},
	}, {
		name: "a pod created after consolidation moved its sibling may not move within the hold",
		evicted: []eviction{
			{pod: "api-1", deployment: "api", node: "n1", created: at(-time.Minute), at: at(3 * time.Second)},
			{pod: "api-4", deployment: "api", node: "n2", created: at(4 * time.Second), at: at(20 * time.Second)},
		},
		want: []string{InvPDB},
	}, {
		name: "past the hold it may",
		evicted: []eviction{
			{pod: "api-1", deployment: "api", node: "n1", created: at(-time.Minute), at: at(3 * time.Second)},
			{pod: "api-4", deployment: "api", node: "n2", created: at(4 * time.Second), at: at(4*time.Second + MovedPodsHold)},
		},
		want: []string{InvPDB, InvEvictedOnce},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &runner{inject: newInjector(&localstack.Stack{}, nil, "")}
			for _, n := range tt.killed {
				r.inject.killedNodes[n] = true
			}
			res := &TrialResult{}
			r.checkEvictions(plan, start, tt.evicted, tt.deleted, res)
			if diff := cmp.Diff(tt.want, res.Held); diff != "" {
				t.Errorf("invariants held (-want +got):\n%s\nbreaches: %+v", diff, res.Breaches)
			}
		})
	}
}
