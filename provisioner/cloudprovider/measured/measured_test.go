package measured

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/metrics"
)

// failing is a cloud provider whose every call returns err.
type failing struct{ err error }

func (f failing) Create(context.Context, *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	return nil, f.err
}
func (f failing) Adopt(context.Context, *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	return nil, f.err
}
func (f failing) Delete(context.Context, *karpv1.NodeClaim) error { return f.err }
func (f failing) Get(context.Context, string) (*karpv1.NodeClaim, error) {
	return nil, f.err
}
func (f failing) List(context.Context) ([]*karpv1.NodeClaim, error) { return nil, f.err }
func (f failing) InstanceTypes(context.Context, *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	return nil, f.err
}

func TestCallsAreTimedAndErrorsCountedByType(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		call      func(CloudProvider) error
		method    string
		wantError string
	}{
		{"insufficient capacity", cloudprovider.NewInsufficientCapacityError(errors.New("no m5.large")),
			func(cp CloudProvider) error {
				_, err := cp.Create(context.Background(), &karpv1.NodeClaim{})
				return err
			},
			"Create", ErrorInsufficientCapacity},
		{"gone", cloudprovider.NewNodeClaimNotFoundError(errors.New("terminated")),
			func(cp CloudProvider) error { return cp.Delete(context.Background(), &karpv1.NodeClaim{}) },
			"Delete", ErrorNodeClaimNotFound},
		{"node class not ready", cloudprovider.NewNodeClassNotReadyError(errors.New("no subnets")),
			func(cp CloudProvider) error {
				_, err := cp.InstanceTypes(context.Background(), &karpv1.NodePool{})
				return err
			},
			"GetInstanceTypes", ErrorNodeClassNotReady},
		{"anything else", fmt.Errorf("wrapped: %w", errors.New("throttled")),
			func(cp CloudProvider) error { _, err := cp.List(context.Background()); return err },
			"List", ""},
		{"success", nil,
			func(cp CloudProvider) error {
				_, err := cp.Get(context.Background(), "aws:///us-east-1a/i-1")
				return err
			},
			"Get", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			controller := "test." + tt.name
			cp := New(failing{tt.err}, controller)
			if err := tt.call(cp); !errors.Is(err, tt.err) {
				t.Fatalf("error %v, want the provider's %v", err, tt.err)
			}
			wantErrors := 1.0
			if tt.err == nil {
				wantErrors = 0
			}
			got := []float64{
				float64(samples(t, metrics.KarpenterCloudProviderDuration.WithLabelValues(controller, tt.method, Provider))),
				testutil.ToFloat64(metrics.KarpenterCloudProviderErrors.WithLabelValues(controller, tt.method, Provider, tt.wantError)),
			}
			if diff := cmp.Diff([]float64{1, wantErrors}, got); diff != "" {
				t.Errorf("timed calls and errors of %s (-want +got):\n%s", tt.method, diff)
			}
		})
	}
}

// samples is how many observations a histogram holds.
func samples(t *testing.T, o prometheus.Observer) uint64 {
	t.Helper()
	m := &dto.Metric{}
	if err := o.(prometheus.Metric).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}
