package chaos

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
)

func TestTheLeaderIsTheReplicaOfTheLeasesHolder(t *testing.T) {
	holder := func(s string) *string { return &s }
	tests := []struct {
		name   string
		holder *string
		want   string
	}{
		{"a scheduler of replica b", holder("b_5f0c1d7e-2a4b-4c55-9e0f-1d2c3b4a5968"), "b"},
		{"no holder", nil, ""},
		{"released", holder(""), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := replicaOf(&coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: tt.holder}}); got != tt.want {
				t.Errorf("replicaOf = %q, want %q", got, tt.want)
			}
		})
	}
}
