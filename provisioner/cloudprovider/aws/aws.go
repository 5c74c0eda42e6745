// Package aws is Tailor's cloud provider for EC2: it resolves EC2NodeClasses, builds the
// instance catalog with prices, launches instances with CreateFleet and finds, tags and
// terminates them, all through aws-sdk-go-v2.
package aws

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/transport"
)

// Options configure the provider.
type Options struct {
	// Cluster is what nodes need to join the cluster.
	Cluster ClusterInfo
	// Region of the cluster.
	Region string
	// KubernetesVersion (major.minor) picks the AMIs of aliases.
	KubernetesVersion string
	// VMMemoryOverheadPercent of an instance's memory that the hypervisor and OS keep from
	// the kubelet's view (0.075 by default).
	VMMemoryOverheadPercent float64
	// ReservedENIs are network interfaces kept from pods (for example for a secondary CNI).
	ReservedENIs int
	// CatalogTTL is how long instance types and on-demand prices are reused.
	CatalogTTL time.Duration
	// SpotPriceTTL is how long spot prices are reused.
	SpotPriceTTL time.Duration
	// NodeClassTTL is how long the resolution of a node class's selectors is reused.
	NodeClassTTL time.Duration
}

func (o *Options) defaults() {
	if o.VMMemoryOverheadPercent == 0 {
		o.VMMemoryOverheadPercent = defaultVMMemoryOverheadPercent
	}
	if o.CatalogTTL == 0 {
		o.CatalogTTL = 6 * time.Hour
	}
	if o.SpotPriceTTL == 0 {
		o.SpotPriceTTL = 5 * time.Minute
	}
	if o.NodeClassTTL == 0 {
		o.NodeClassTTL = time.Minute
	}
}

func (o *Options) validate() error {
	var errs []error
	if o.Cluster.Name == "" {
		errs = append(errs, errors.New("cluster name is required (--cluster-name)"))
	}
	if o.Cluster.Endpoint == "" {
		errs = append(errs, errors.New("cluster endpoint is required (--cluster-endpoint)"))
	}
	if o.Region == "" {
		errs = append(errs, errors.New("region is required (AWS_REGION or --region)"))
	}
	if o.KubernetesVersion == "" {
		errs = append(errs, errors.New("kubernetes version is required"))
	}
	errs = append(errs, validateVMMemoryOverhead(o.VMMemoryOverheadPercent))
	return errors.Join(errs...)
}

// Clients are the AWS API clients the provider uses.
type Clients struct {
	EC2     *ec2.Client
	SSM     *ssm.Client
	Pricing *pricing.Client
	IAM     *iam.Client
}

// NewClients makes the provider's clients from one SDK configuration. The Pricing API is
// only served from a few regions; us-east-1 serves every region's prices.
func NewClients(cfg aws.Config) Clients {
	cfg.HTTPClient = transport.NewClient(cfg.HTTPClient)
	pricingCfg := cfg.Copy()
	pricingCfg.Region = "us-east-1"
	return Clients{
		EC2:     ec2.NewFromConfig(cfg),
		SSM:     ssm.NewFromConfig(cfg),
		Pricing: pricing.NewFromConfig(pricingCfg),
		IAM:     iam.NewFromConfig(cfg),
	}
}

// Provider implements cloudprovider.CloudProvider on EC2.
type Provider struct {
	opts    Options
	ec2     *ec2.Client
	ssm     *ssm.Client
	pricing *pricing.Client
	iam     *iam.Client
	kube    client.Reader
	clock   clock.Clock

	mu       sync.Mutex
	catalog  cached[map[string]*catalogEntry]
	onDemand cached[map[string]float64]
	spot     cached[map[string]map[string]float64]
	classes  map[types.UID]cached[*resolvedClass]
	// templates caches the launch templates known to exist, by name.
	templates map[string]bool
}

var _ cloudprovider.CloudProvider = (*Provider)(nil)

type cached[T any] struct {
	value T
	at    time.Time
	valid bool
}

func (c cached[T]) fresh(now time.Time, ttl time.Duration) bool {
	return c.valid && now.Sub(c.at) < ttl
}

// New validates the options and returns a provider. kube reads EC2NodeClasses.
func New(opts Options, clients Clients, kube client.Reader, clk clock.Clock) (*Provider, error) {
	opts.defaults()
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("configuring the AWS provider: %w", err)
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Provider{
		opts: opts, ec2: clients.EC2, ssm: clients.SSM, pricing: clients.Pricing, iam: clients.IAM,
		kube: kube, clock: clk,
		classes:   map[types.UID]cached[*resolvedClass]{},
		templates: map[string]bool{},
	}, nil
}

// InstanceTypes returns the instance types the NodePool's EC2NodeClass can launch in the
// zones of its subnets, with prices.
func (p *Provider) InstanceTypes(ctx context.Context, nodePool *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	lc, err := p.launchContext(ctx, nodePool.Spec.Template.Spec.NodeClassRef)
	if err != nil {
		return nil, err
	}
	return lc.types, nil
}

// launchContext is what launching from a node class needs: the class, what its selectors
// resolve to, the catalog, and the instance types the class can launch (with an AMI for
// their architecture and an offering in its zones).
type launchContext struct {
	class    *awsv1.EC2NodeClass
	resolved *resolvedClass
	entries  map[string]*catalogEntry
	types    []*cloudprovider.InstanceType
}

func (p *Provider) launchContext(ctx context.Context, ref *karpv1.NodeClassReference) (*launchContext, error) {
	class, err := p.nodeClass(ctx, ref)
	if err != nil {
		return nil, err
	}
	resolved, err := p.resolved(ctx, class)
	if err != nil {
		return nil, err
	}
	entries, prices, err := p.catalogAndPrices(ctx)
	if err != nil {
		return nil, err
	}
	zones := resolved.zones()
	lc := &launchContext{class: class, resolved: resolved, entries: entries, types: make([]*cloudprovider.InstanceType, 0, len(entries))}
	for _, e := range entries {
		it := newInstanceType(e, class, zones, prices, p.overheadSettings())
		if _, ok := resolved.amis[it.Labels[corev1.LabelArchStable]]; ok && len(it.Offerings) > 0 {
			lc.types = append(lc.types, it)
		}
	}
	return lc, nil
}

func (p *Provider) overheadSettings() overheadSettings {
	return overheadSettings{vmMemoryOverheadPercent: p.opts.VMMemoryOverheadPercent, reservedENIs: int64(p.opts.ReservedENIs)}
}

// nodeClass reads the EC2NodeClass a NodePool or NodeClaim refers to.
func (p *Provider) nodeClass(ctx context.Context, ref *karpv1.NodeClassReference) (*awsv1.EC2NodeClass, error) {
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

// resolved returns the class's resolved selectors, resolving them when stale.
func (p *Provider) resolved(ctx context.Context, class *awsv1.EC2NodeClass) (*resolvedClass, error) {
	p.mu.Lock()
	c, ok := p.classes[class.UID]
	p.mu.Unlock()
	now := p.clock.Now()
	if ok && c.fresh(now, p.opts.NodeClassTTL) {
		return c.value, nil
	}
	r, err := p.resolveClass(ctx, class)
	if err != nil {
		return nil, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("EC2NodeClass %q: %w", class.Name, err))
	}
	p.mu.Lock()
	p.classes[class.UID] = cached[*resolvedClass]{value: r, at: now, valid: true}
	p.mu.Unlock()
	return r, nil
}

// ResolveNodeClass resolves the selectors of a node class into the status fields the
// EC2NodeClass reports.
func (p *Provider) ResolveNodeClass(ctx context.Context, class *awsv1.EC2NodeClass) (awsv1.EC2NodeClassStatus, error) {
	r, err := p.resolveClass(ctx, class)
	if err != nil {
		return awsv1.EC2NodeClassStatus{}, err
	}
	status := awsv1.EC2NodeClassStatus{Subnets: r.subnets, SecurityGroups: r.securityGroups}
	for _, arch := range []string{architectureAMD64, architectureARM64} {
		if ami, ok := r.amis[arch]; ok {
			status.AMIs = append(status.AMIs, ami)
		}
	}
	if class.Spec.InstanceProfile != nil {
		status.InstanceProfile = *class.Spec.InstanceProfile
	} else {
		status.InstanceProfile = p.instanceProfileName(class.Spec.Role)
	}
	return status, nil
}

// catalogAndPrices returns the instance catalog and current prices, refreshing what is stale.
func (p *Provider) catalogAndPrices(ctx context.Context) (map[string]*catalogEntry, *priceBook, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	if !p.catalog.fresh(now, p.opts.CatalogTTL) {
		entries, err := describeInstanceTypes(ctx, p.ec2)
		if err != nil {
			if !p.catalog.valid {
				return nil, nil, err
			}
		} else {
			p.catalog = cached[map[string]*catalogEntry]{value: entries, at: now, valid: true}
		}
	}
	if !p.onDemand.fresh(now, p.opts.CatalogTTL) {
		prices, err := onDemandPrices(ctx, p.pricing, p.opts.Region)
		if err != nil {
			if !p.onDemand.valid {
				return nil, nil, err
			}
		} else {
			p.onDemand = cached[map[string]float64]{value: prices, at: now, valid: true}
		}
	}
	if !p.spot.fresh(now, p.opts.SpotPriceTTL) {
		prices, err := spotPrices(ctx, p.ec2, now)
		if err != nil {
			if !p.spot.valid {
				return nil, nil, err
			}
		} else {
			p.spot = cached[map[string]map[string]float64]{value: prices, at: now, valid: true}
		}
	}
	return p.catalog.value, &priceBook{onDemand: p.onDemand.value, spot: p.spot.value}, nil
}
