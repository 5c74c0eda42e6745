package termination

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestBlockedDrainsCountsNodeClaimsPerNodePool(t *testing.T) {
	type update struct {
		nodeClaim, nodePool string
		blocked             bool
	}
	tests := []struct {
		name    string
		updates []update
		// want is the gauge per NodePool; a NodePool absent from it has no series.
		want map[string]float64
	}{
		{name: "nothing blocked has no series", updates: []update{{"a", "general", false}}, want: map[string]float64{}},
		{
			name:    "blocked drains are counted per NodePool",
			updates: []update{{"a", "general", true}, {"b", "general", true}, {"c", "gpu", true}, {"a", "general", true}},
			want:    map[string]float64{"general": 2, "gpu": 1},
		},
		{
			name:    "a drain no longer blocked, or a NodeClaim gone, counts no more",
			updates: []update{{"a", "general", true}, {"b", "gpu", true}, {"a", "general", false}, {"b", "", false}},
			want:    map[string]float64{"general": 0, "gpu": 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gauge := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "blocked"}, []string{"nodepool"})
			b := newBlockedDrains(gauge)
			for _, u := range tt.updates {
				b.set(u.nodeClaim, u.nodePool, u.blocked)
			}
			if diff := cmp.Diff(tt.want, series(t, gauge)); diff != "" {
				t.Errorf("gauge per NodePool (-want +got):\n%s", diff)
			}
		})
	}
}

// series reads every series of the gauge, by its nodepool label.
func series(t *testing.T, gauge *prometheus.GaugeVec) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 100)
	gauge.Collect(ch)
	close(ch)
	out := map[string]float64{}
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		out[pb.GetLabel()[0].GetValue()] = pb.GetGauge().GetValue()
	}
	return out
}
