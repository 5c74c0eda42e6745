package nodeclass

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/backoff"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/amifamily"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/expiring"
)

// Resolver reads EC2NodeClasses and resolves their selectors, reusing a resolution for a
// time to live.
type Resolver struct {
	ec2               *ec2.Client
	ssm               *ssm.Client
	kube              client.Reader
	clock             clock.Clock
	ttl               time.Duration
	kubernetesVersion string

	mu      sync.Mutex
	classes map[types.UID]expiring.Value[*Resolved]
	// classErrors are the last failed resolution of each class, returned until the wait
	// of failures passes, so that planning and launches do not resolve a broken class
	// each time.
	classErrors map[types.UID]error
	// failures space out the resolutions of classes that fail, by UID.
	failures *backoff.Failures
}

// NewResolver returns a resolver that reads EC2NodeClasses from kube, resolves them against
// EC2 and SSM (aliases for kubernetesVersion, major.minor) and reuses a resolution for ttl.
func NewResolver(ec2Client *ec2.Client, ssmClient *ssm.Client, kube client.Reader, clk clock.Clock, ttl time.Duration, kubernetesVersion string) *Resolver {
	return &Resolver{
		ec2: ec2Client, ssm: ssmClient, kube: kube, clock: clk, ttl: ttl, kubernetesVersion: kubernetesVersion,
		classes:     map[types.UID]expiring.Value[*Resolved]{},
		classErrors: map[types.UID]error{},
		failures:    backoff.New(clk, backoff.DefaultInitial, backoff.DefaultMax),
	}
}

// Get reads the EC2NodeClass a NodePool or NodeClaim refers to.
func (p *Resolver) Get(ctx context.Context, ref *karpv1.NodeClassReference) (*awsv1.EC2NodeClass, error) {
	if ref == nil {
		return nil, cloudprovider.NewNodeClassNotReadyError(errors.New("nodeClassRef is not set"))
	}
	if ref.Group != awsv1.Group || ref.Kind != "EC2NodeClass" {
		return nil, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("nodeClassRef %s/%s is not an %s EC2NodeClass", ref.Group, ref.Kind, awsv1.Group))
	}
	class := &awsv1.EC2NodeClass{}
	if err := p.kube.Get(ctx, client.ObjectKey{Name: ref.Name}, class); err != nil {
		return nil, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("getting EC2NodeClass %q: %w", ref.Name, err))
	}
	return class, nil
}

// Resolved returns the class's resolved selectors, resolving them when stale. A class that
// failed to resolve returns the same error, without asking AWS, until a wait that doubles
// with each failure has passed or its spec changed.
func (p *Resolver) Resolved(ctx context.Context, class *awsv1.EC2NodeClass) (*Resolved, error) {
	version := strconv.FormatInt(class.Generation, 10)
	p.mu.Lock()
	c, ok := p.classes[class.UID]
	lastErr := p.classErrors[class.UID]
	p.mu.Unlock()
	now := p.clock.Now()
	if ok && c.Fresh(now, p.ttl) {
		return c.Value, nil
	}
	if lastErr != nil && p.failures.Wait(string(class.UID), version) > 0 {
		return nil, lastErr
	}
	r, err := p.Resolve(ctx, class)
	if err != nil {
		err = cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("EC2NodeClass %q: %w", class.Name, err))
		p.failures.Failed(string(class.UID), version)
		p.mu.Lock()
		p.classErrors[class.UID] = err
		p.mu.Unlock()
		return nil, err
	}
	p.failures.Forget(string(class.UID))
	p.mu.Lock()
	p.classes[class.UID] = expiring.Of(r, now)
	delete(p.classErrors, class.UID)
	p.mu.Unlock()
	return r, nil
}

// Status resolves the selectors of a node class into the status fields the EC2NodeClass
// reports, with the conditions of what may resolve to nothing without making the class not
// ready (capacity reservations). The instance profile is left to the caller.
func (p *Resolver) Status(ctx context.Context, class *awsv1.EC2NodeClass) (awsv1.EC2NodeClassStatus, error) {
	r, err := p.Resolve(ctx, class)
	if err != nil {
		return awsv1.EC2NodeClassStatus{}, err
	}
	status := awsv1.EC2NodeClassStatus{
		Subnets: r.Subnets, SecurityGroups: r.SecurityGroups, CapacityReservations: r.Reservations.Reservations,
		Conditions: []metav1.Condition{r.Reservations.Condition()},
	}
	for _, arch := range []string{amifamily.ArchitectureAMD64, amifamily.ArchitectureARM64} {
		if ami, ok := r.AMIs[arch]; ok {
			status.AMIs = append(status.AMIs, ami)
		}
	}
	return status, nil
}
