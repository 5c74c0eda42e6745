// Package measured wraps a cloud provider so that every call is timed and every error
// counted, under Karpenter's metric names (karpenter_cloudprovider_duration_seconds and
// karpenter_cloudprovider_errors_total), labelled with the controller that made the call.
package measured

import (
	"context"
	"time"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/metrics"
)

// Provider is the name of the cloud provider in the metrics' provider label.
const Provider = "aws"

// Values of the error label: the cloud provider's typed errors, and empty for any other.
const (
	ErrorNodeClaimNotFound    = "NodeClaimNotFoundError"
	ErrorInsufficientCapacity = "InsufficientCapacityError"
	ErrorNodeClassNotReady    = "NodeClassNotReadyError"
)

// CloudProvider is the wrapped provider: Tailor's cloud provider contract.
type CloudProvider = cloudprovider.CloudProvider

// New wraps cp for the calls of one controller.
func New(cp CloudProvider, controller string) CloudProvider {
	return &measured{cp: cp, controller: controller}
}

type measured struct {
	cp         CloudProvider
	controller string
}

// observe records a call of method that started at start and ended with err.
func (m *measured) observe(method string, start time.Time, err error) {
	metrics.KarpenterCloudProviderDuration.WithLabelValues(m.controller, method, Provider).Observe(time.Since(start).Seconds())
	if err != nil {
		metrics.KarpenterCloudProviderErrors.WithLabelValues(m.controller, method, Provider, errorType(err)).Inc()
	}
}

func errorType(err error) string {
	switch {
	case cloudprovider.IsNodeClaimNotFoundError(err):
		return ErrorNodeClaimNotFound
	case cloudprovider.IsInsufficientCapacityError(err):
		return ErrorInsufficientCapacity
	case cloudprovider.IsNodeClassNotReadyError(err):
		return ErrorNodeClassNotReady
	default:
		return ""
	}
}

func (m *measured) Create(ctx context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	start := time.Now()
	out, err := m.cp.Create(ctx, nodeClaim)
	m.observe("Create", start, err)
	return out, err
}

func (m *measured) Adopt(ctx context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	start := time.Now()
	out, err := m.cp.Adopt(ctx, nodeClaim)
	m.observe("Adopt", start, err)
	return out, err
}

func (m *measured) Delete(ctx context.Context, nodeClaim *karpv1.NodeClaim) error {
	start := time.Now()
	err := m.cp.Delete(ctx, nodeClaim)
	m.observe("Delete", start, err)
	return err
}

func (m *measured) Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error) {
	start := time.Now()
	out, err := m.cp.Get(ctx, providerID)
	m.observe("Get", start, err)
	return out, err
}

func (m *measured) List(ctx context.Context) ([]*karpv1.NodeClaim, error) {
	start := time.Now()
	out, err := m.cp.List(ctx)
	m.observe("List", start, err)
	return out, err
}

// InstanceTypes is GetInstanceTypes in the method label, as Karpenter names it.
func (m *measured) InstanceTypes(ctx context.Context, nodePool *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	start := time.Now()
	out, err := m.cp.InstanceTypes(ctx, nodePool)
	m.observe("GetInstanceTypes", start, err)
	return out, err
}
