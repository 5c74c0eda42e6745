package aws

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
)

// TestInstanceTypesPriceWholeNodes checks that every offering carries what a node of the
// class costs besides its instance, priced from the local endpoint's Pricing API; the local
// subnets do not map public addresses on launch.
func TestInstanceTypesPriceWholeNodes(t *testing.T) {
	rootVolume := 20 * 0.08 / 730
	tests := []struct {
		name   string
		mutate func(*awsv1.EC2NodeClassSpec)
		want   cloudprovider.NodeCosts
	}{
		{name: "AL2023's default root volume", want: cloudprovider.NodeCosts{Volumes: rootVolume}},
		{
			name:   "associatePublicIPAddress adds an address",
			mutate: func(s *awsv1.EC2NodeClassSpec) { s.AssociatePublicIPAddress = ptr.To(true) },
			want:   cloudprovider.NodeCosts{Volumes: rootVolume, PublicIPv4: 0.005},
		},
		{
			name:   "detailed monitoring",
			mutate: func(s *awsv1.EC2NodeClassSpec) { s.DetailedMonitoring = ptr.To(true) },
			want:   cloudprovider.NodeCosts{Volumes: rootVolume, Monitoring: 7 * 0.30 / 730},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			ctx := context.Background()
			if tt.mutate != nil {
				class := &awsv1.EC2NodeClass{}
				require.NoError(t, h.kube.Get(ctx, client.ObjectKey{Name: "default"}, class))
				tt.mutate(&class.Spec)
				require.NoError(t, h.kube.Update(ctx, class))
			}
			its, err := h.provider.InstanceTypes(ctx, nodePool())
			require.NoError(t, err)
			got := map[cloudprovider.NodeCosts]int{}
			for _, it := range its {
				for _, o := range it.Offerings {
					got[o.NodeCosts]++
				}
			}
			require.Len(t, got, 1, "every offering costs the same besides its instance")
			for costs := range got {
				if diff := cmp.Diff(tt.want, costs, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
					t.Errorf("node costs (-want +got):\n%s", diff)
				}
			}
		})
	}
}
