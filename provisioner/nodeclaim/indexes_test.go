package nodeclaim

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

func TestNodeClaimInstanceIDIsTheEndOfTheProviderID(t *testing.T) {
	tests := []struct {
		providerID string
		want       []string
	}{
		{providerID: "aws:///us-east-1a/i-0123456789abcdef0", want: []string{"i-0123456789abcdef0"}},
		{providerID: "aws:///us-east-1a/", want: nil},
		{providerID: "i-0123456789abcdef0", want: nil},
		{providerID: "", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.providerID, func(t *testing.T) {
			nc := &karpv1.NodeClaim{Status: karpv1.NodeClaimStatus{ProviderID: tt.providerID}}
			if diff := cmp.Diff(tt.want, NodeClaimInstanceID(nc)); diff != "" {
				t.Errorf("NodeClaimInstanceID (-want +got):\n%s", diff)
			}
		})
	}
}
