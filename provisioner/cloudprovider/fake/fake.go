// Package fake is an in-memory cloudprovider.CloudProvider for the tests of controllers that
// need a cloud but not the AWS wire format: it launches the cheapest offering a NodeClaim
// allows, keeps its instances in memory, and lets a test fail calls, withhold node classes,
// terminate instances behind the controllers' back and read what it was asked.
package fake

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/requirements"
)

// ImageID is the status.imageID of every instance the fake launches.
const ImageID = "fake-image"

// Always is the count of FailCreates or FailDeletes that fails every call until the count
// is set again.
const Always = -1

// Calls are the names of the NodeClaims the provider was asked to create, adopt and delete,
// in the order asked, failed calls included.
type Calls struct {
	Create, Adopt, Delete []string
}

// CloudProvider is an in-memory cloud. Its zero value is not usable: call New. It is safe
// for concurrent use.
type CloudProvider struct {
	clock clock.Clock

	mu    sync.Mutex
	types []*cloudprovider.InstanceType
	// notReady are the reasons of the node classes InstanceTypes and Create refuse, by name.
	notReady map[string]error
	creates  failures
	deletes  failures
	// live are the NodeClaim views of the live instances, in launch order.
	live []*karpv1.NodeClaim
	// launched counts the instances ever launched: the next one's number.
	launched int
	calls    Calls
}

var _ cloudprovider.CloudProvider = (*CloudProvider)(nil)

// New returns a provider with no instance types and no instances. Instances get their
// creation timestamp from clk (the real clock when nil).
func New(clk clock.Clock) *CloudProvider {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &CloudProvider{clock: clk, notReady: map[string]error{}}
}

// SetInstanceTypes sets the instance types InstanceTypes returns and Create launches from,
// for every node class. The provider keeps them as given: do not modify them afterwards.
func (p *CloudProvider) SetInstanceTypes(types ...*cloudprovider.InstanceType) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.types = slices.Clone(types)
}

// SetNodeClassNotReady makes InstanceTypes, and Create, return a NodeClassNotReadyError
// wrapping reason for the node class with this name; a nil reason makes it ready again.
func (p *CloudProvider) SetNodeClassNotReady(nodeClass string, reason error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if reason == nil {
		delete(p.notReady, nodeClass)
		return
	}
	p.notReady[nodeClass] = reason
}

// FailCreates fails the next n Creates (every one with Always; none with 0) with err, an
// InsufficientCapacityError when err is nil. A failed Create launches nothing.
func (p *CloudProvider) FailCreates(n int, err error) {
	if err == nil {
		err = cloudprovider.NewInsufficientCapacityError(errors.New("failure injected by the test"))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.creates = failures{n: n, err: err}
}

// FailDeletes fails the next n Deletes of live instances (every one with Always; none with
// 0) with err, or with a plain error when err is nil. The instance stays live.
func (p *CloudProvider) FailDeletes(n int, err error) {
	if err == nil {
		err = errors.New("terminating instance: failure injected by the test")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deletes = failures{n: n, err: err}
}

// Terminate ends the instance with this provider ID behind the controllers' back, as an
// interruption or a person would; it reports whether the instance was live.
func (p *CloudProvider) Terminate(providerID string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.removeLocked(providerID)
}

// Calls returns what the provider was asked so far.
func (p *CloudProvider) Calls() Calls {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Calls{Create: slices.Clone(p.calls.Create), Adopt: slices.Clone(p.calls.Adopt), Delete: slices.Clone(p.calls.Delete)}
}

// Create launches the cheapest available offering the NodeClaim's requirements allow (its
// labels answer for keys no offering has), or returns the instance already launched for a
// NodeClaim of that name, as the AWS provider adopts one. It returns an
// InsufficientCapacityError when no offering is allowed.
func (p *CloudProvider) Create(_ context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls.Create = append(p.calls.Create, nodeClaim.Name)
	if err := p.notReadyLocked(nodeClaim.Spec.NodeClassRef); err != nil {
		return nil, err
	}
	if err := p.creates.take(); err != nil {
		return nil, err
	}
	if inst := p.launchedForLocked(nodeClaim.Name); inst != nil {
		return inst.DeepCopy(), nil
	}
	it, o, ok := cheapest(p.types, nodeClaim)
	if !ok {
		return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("no available offering of the %d instance types satisfies the NodeClaim's requirements", len(p.types)))
	}
	p.launched++
	id := fmt.Sprintf("i-%d", p.launched)
	inst := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:              nodeClaim.Name,
			Labels:            map[string]string{},
			CreationTimestamp: metav1.NewTime(p.clock.Now()),
		},
		Status: karpv1.NodeClaimStatus{
			ProviderID:  fmt.Sprintf("fake:///%s/%s", o.Zone, id),
			NodeName:    id,
			ImageID:     ImageID,
			Capacity:    it.Capacity.DeepCopy(),
			Allocatable: it.Allocatable(),
			Price:       cloudprovider.NewPriceParts(o.Price, o.NodeCosts, 0).APIPrice(),
		},
	}
	maps.Copy(inst.Labels, it.Labels)
	inst.Labels[corev1.LabelInstanceTypeStable] = it.Name
	o.AddLabels(inst.Labels)
	if np := nodeClaim.Labels[karpv1.NodePoolLabelKey]; np != "" {
		inst.Labels[karpv1.NodePoolLabelKey] = np
	}
	p.live = append(p.live, inst)
	return inst.DeepCopy(), nil
}

// Adopt returns the oldest live instance launched for a NodeClaim of this name, nil when
// there is none.
func (p *CloudProvider) Adopt(_ context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls.Adopt = append(p.calls.Adopt, nodeClaim.Name)
	if inst := p.launchedForLocked(nodeClaim.Name); inst != nil {
		return inst.DeepCopy(), nil
	}
	return nil, nil
}

// Delete terminates the NodeClaim's instance at once: the one its provider ID names, else
// the oldest launched for a NodeClaim of its name. It returns a NodeClaimNotFoundError when
// the NodeClaim has no instance or its instance is gone.
func (p *CloudProvider) Delete(_ context.Context, nodeClaim *karpv1.NodeClaim) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls.Delete = append(p.calls.Delete, nodeClaim.Name)
	id := nodeClaim.Status.ProviderID
	if id == "" {
		inst := p.launchedForLocked(nodeClaim.Name)
		if inst == nil {
			return cloudprovider.NewNodeClaimNotFoundError(errors.New("the NodeClaim has no instance"))
		}
		id = inst.Status.ProviderID
	}
	if p.indexLocked(id) < 0 {
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s is gone", id))
	}
	if err := p.deletes.take(); err != nil {
		return err
	}
	p.removeLocked(id)
	return nil
}

// Get returns the live instance with this provider ID, or a NodeClaimNotFoundError.
func (p *CloudProvider) Get(_ context.Context, providerID string) (*karpv1.NodeClaim, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := p.indexLocked(providerID)
	if i < 0 {
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s is gone", providerID))
	}
	return p.live[i].DeepCopy(), nil
}

// List returns the live instances in launch order.
func (p *CloudProvider) List(context.Context) ([]*karpv1.NodeClaim, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*karpv1.NodeClaim, 0, len(p.live))
	for _, inst := range p.live {
		out = append(out, inst.DeepCopy())
	}
	return out, nil
}

// InstanceTypes returns the instance types set, shared as the AWS provider's cache shares
// them (callers must not modify them), or a NodeClassNotReadyError when the NodePool's node
// class is not ready.
func (p *CloudProvider) InstanceTypes(_ context.Context, nodePool *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.notReadyLocked(nodePool.Spec.Template.Spec.NodeClassRef); err != nil {
		return nil, err
	}
	return slices.Clone(p.types), nil
}

// notReadyLocked is the NodeClassNotReadyError of the referenced node class, nil when it is
// ready.
func (p *CloudProvider) notReadyLocked(ref *karpv1.NodeClassReference) error {
	if ref == nil {
		return nil
	}
	if reason, ok := p.notReady[ref.Name]; ok {
		return cloudprovider.NewNodeClassNotReadyError(reason)
	}
	return nil
}

// launchedForLocked is the oldest live instance launched for the NodeClaim name, nil when
// there is none or the name is empty.
func (p *CloudProvider) launchedForLocked(name string) *karpv1.NodeClaim {
	if name == "" {
		return nil
	}
	for _, inst := range p.live {
		if inst.Name == name {
			return inst
		}
	}
	return nil
}

// indexLocked is the index in live of the instance with this provider ID, -1 when none.
func (p *CloudProvider) indexLocked(providerID string) int {
	return slices.IndexFunc(p.live, func(inst *karpv1.NodeClaim) bool { return inst.Status.ProviderID == providerID })
}

// removeLocked removes the instance with this provider ID and reports whether it was live.
func (p *CloudProvider) removeLocked(providerID string) bool {
	i := p.indexLocked(providerID)
	if i < 0 {
		return false
	}
	p.live = slices.Delete(p.live, i, i+1)
	return true
}

// cheapest is the available offering with the lowest node price that the NodeClaim allows,
// and its type; ties go to the type listed first.
func cheapest(types []*cloudprovider.InstanceType, nodeClaim *karpv1.NodeClaim) (*cloudprovider.InstanceType, cloudprovider.Offering, bool) {
	var bestType *cloudprovider.InstanceType
	var best cloudprovider.Offering
	for _, it := range types {
		o, ok := it.CheapestOffering(func(o cloudprovider.Offering) bool {
			return requirements.MatchesFunc(nodeClaim.Spec.Requirements, func(key string) (string, bool) {
				if v, ok := it.Label(o, key); ok {
					return v, true
				}
				v, ok := nodeClaim.Labels[key]
				return v, ok
			})
		})
		if ok && (bestType == nil || o.NodePrice() < best.NodePrice()) {
			bestType, best = it, o
		}
	}
	return bestType, best, bestType != nil
}

// failures are calls a test asked to fail: n more (all with Always), with err.
type failures struct {
	n   int
	err error
}

// take returns the error the next call fails with, nil when it succeeds.
func (f *failures) take() error {
	if f.n == 0 {
		return nil
	}
	if f.n > 0 {
		f.n--
	}
	return f.err
}
