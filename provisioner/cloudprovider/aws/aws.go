// Package aws is Tailor's cloud provider for EC2, all through aws-sdk-go-v2. Provider
// composes one provider per concern: nodeclass resolves EC2NodeClasses, instancetype and
// pricing build the instance catalog with prices, launch launches instances with CreateFleet,
// and instance finds, tags and terminates them.
package aws

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	awspricing "github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/backoff"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/amifamily"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/apierror"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/instance"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/instanceprofile"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/instancetype"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/launch"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/nodeclass"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/pricing"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/reservation"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/transport"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/unavailable"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/userdata"
)

// failureTemplateCollection is the key of the garbage collections of launch templates in
// the provider's failures.
const failureTemplateCollection = "launch-templates"

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
	// PrefixDelegation says the VPC CNI assigns /28 prefixes (ENABLE_PREFIX_DELEGATION):
	// Nitro types hold as many pods as the EKS max-pods calculator says for it.
	PrefixDelegation bool
	// CatalogTTL is how long instance types and on-demand prices are reused.
	CatalogTTL time.Duration
	// SpotPriceTTL is how long spot prices are reused.
	SpotPriceTTL time.Duration
	// NodeClassTTL is how long the resolution of a node class's selectors is reused.
	NodeClassTTL time.Duration
	// UnavailableOfferingsTTL is how long an offering that reported a capacity error is
	// kept from the planner and from launches (DefaultUnavailableOfferingsTTL by default).
	UnavailableOfferingsTTL time.Duration
	// LaunchTemplateTTL is how long a launch template neither created nor used by a launch
	// is kept before GarbageCollectLaunchTemplates deletes it (10 minutes by default).
	LaunchTemplateTTL time.Duration
	// IsolatedVPC means the Pricing API cannot be reached: on-demand prices come from the
	// catalog embedded in the binary without asking AWS.
	IsolatedVPC bool
	// LaunchPrices, when set, returns the instance types a launch for the named NodePool
	// chooses among, with the prices planning used (NodeOverlays): on-demand launches then
	// ask CreateFleet for them in that order (the prioritized strategy) instead of by EC2's
	// lowest price, so the instance launched is the one planned.
	LaunchPrices func(ctx context.Context, nodePool string, types []*cloudprovider.InstanceType) ([]*cloudprovider.InstanceType, error)
	// ReservedCapacity offers the active capacity reservations of node classes as
	// capacity type reserved and launches into them (Karpenter's ReservedCapacity gate).
	ReservedCapacity bool
}

func (o *Options) defaults() {
	if o.VMMemoryOverheadPercent == 0 {
		o.VMMemoryOverheadPercent = instancetype.DefaultVMMemoryOverheadPercent
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
	if o.UnavailableOfferingsTTL == 0 {
		o.UnavailableOfferingsTTL = DefaultUnavailableOfferingsTTL
	}
	if o.LaunchTemplateTTL == 0 {
		o.LaunchTemplateTTL = 10 * time.Minute
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
	if o.UnavailableOfferingsTTL < 0 {
		errs = append(errs, fmt.Errorf("unavailable offerings TTL must not be negative, got %s", o.UnavailableOfferingsTTL))
	}
	errs = append(errs, instancetype.ValidateVMMemoryOverhead(o.VMMemoryOverheadPercent))
	return errors.Join(errs...)
}

// Clients are the AWS API clients the provider uses.
type Clients struct {
	EC2     *ec2.Client
	SSM     *ssm.Client
	Pricing *awspricing.Client
	IAM     *iam.Client
	// EKS describes the cluster, for settings the sidecar is not given.
	EKS *eks.Client
}

// NewClients makes the provider's clients from one SDK configuration, with NewRetryer's
// retries unless the configuration sets a retryer. The Pricing API is only served from a few
// regions; us-east-1 serves every region's prices.
func NewClients(cfg aws.Config) Clients {
	cfg.HTTPClient = transport.NewClient(cfg.HTTPClient)
	if cfg.Retryer == nil {
		cfg.Retryer = func() aws.Retryer { return NewRetryer(nil) }
	}
	cfg.APIOptions = append(cfg.APIOptions, apierror.CountErrors)
	pricingCfg := cfg.Copy()
	pricingCfg.Region = "us-east-1"
	return Clients{
		EC2:     ec2.NewFromConfig(cfg),
		SSM:     ssm.NewFromConfig(cfg),
		Pricing: awspricing.NewFromConfig(pricingCfg),
		IAM:     iam.NewFromConfig(cfg),
		EKS:     eks.NewFromConfig(cfg),
	}
}

// Provider implements cloudprovider.CloudProvider on EC2, composing the providers of each
// concern.
type Provider struct {
	opts Options
	// kube reads EC2NodeClasses; claims lists the cluster's NodeClaims.
	kube, claims client.Reader
	clock        clock.Clock

	classes     *nodeclass.Resolver
	catalog     *instancetype.Catalog
	instances   *instance.Provider
	launcher    *launch.Launcher
	profiles    *instanceprofile.Provider
	unavailable *unavailable.Offerings
	// failures space out the garbage collections of launch templates that fail; the catalog
	// and prices share them under keys of their own.
	failures *backoff.Failures
	// afterCreateFleet, when set, runs once CreateFleet launched an instance; tests use it
	// to crash a launch there.
	afterCreateFleet func(ctx context.Context, instanceID string) error
}

var _ cloudprovider.CloudProvider = (*Provider)(nil)

// DefaultUnavailableOfferingsTTL is how long an offering that reported a capacity error is
// kept from the planner and from launches.
const DefaultUnavailableOfferingsTTL = unavailable.DefaultTTL

// ClusterInfo is what a node needs to join the cluster.
type ClusterInfo = userdata.ClusterInfo

// Reasons of the CapacityReservationsReady condition.
const (
	ReasonCapacityReservationsResolved  = reservation.ReasonCapacityReservationsResolved
	ReasonCapacityReservationsUnmatched = reservation.ReasonCapacityReservationsUnmatched
)

// New validates the options and returns a provider. kube reads EC2NodeClasses; claims lists
// the cluster's NodeClaims (the manager's cache), whose launch templates are kept.
func New(opts Options, clients Clients, kube, claims client.Reader, clk clock.Clock) (*Provider, error) {
	opts.defaults()
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("configuring the AWS provider: %w", err)
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	failures := backoff.New(clk, housekeepingPeriod, backoff.DefaultMax)
	prices := pricing.New(pricing.Options{Region: opts.Region, OnDemandTTL: opts.CatalogTTL, SpotTTL: opts.SpotPriceTTL, IsolatedVPC: opts.IsolatedVPC}, clients.EC2, clients.Pricing, clk, failures)
	profiles := instanceprofile.New(clients.IAM, opts.Cluster.Name)
	offerings := unavailable.New(clk, opts.UnavailableOfferingsTTL)
	return &Provider{
		opts: opts, kube: kube, claims: claims, clock: clk,
		classes:     nodeclass.NewResolver(clients.EC2, clients.SSM, kube, clk, opts.NodeClassTTL, opts.KubernetesVersion),
		catalog:     instancetype.NewCatalog(clients.EC2, prices, clk, opts.CatalogTTL, failures),
		instances:   instance.New(clients.EC2, opts.Cluster.Name, opts.ReservedCapacity, opts.settings(), clk),
		launcher:    launch.New(launch.Options{Cluster: opts.Cluster, PrefixDelegation: opts.PrefixDelegation, LaunchTemplateTTL: opts.LaunchTemplateTTL}, clients.EC2, profiles, offerings, claims, clk),
		profiles:    profiles,
		unavailable: offerings,
		failures:    failures,
	}, nil
}

// settings are the cluster-wide settings that shape a node's allocatable resources.
func (o *Options) settings() instancetype.Settings {
	return instancetype.Settings{VMMemoryOverheadPercent: o.VMMemoryOverheadPercent, ReservedENIs: int64(o.ReservedENIs), PrefixDelegation: o.PrefixDelegation}
}

// InstanceTypes returns the instance types the NodePool's EC2NodeClass can launch in the
// zones of its subnets, with prices. A reserved offering's ReservedInstances leave out the
// instances of NodeClaims planned into its reservation that have not launched yet.
func (p *Provider) InstanceTypes(ctx context.Context, nodePool *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	lc, err := p.launchContext(ctx, nodePool.Spec.Template.Spec.NodeClassRef)
	if err != nil {
		return nil, err
	}
	if len(lc.Resolved.Reservations.Reservations) == 0 || !p.opts.ReservedCapacity {
		return lc.types, nil
	}
	planned, err := reservation.Planned(ctx, p.claims)
	if err != nil {
		return nil, err
	}
	for _, it := range lc.types {
		for i := range it.Offerings {
			if o := &it.Offerings[i]; o.ReservationID != "" {
				o.ReservedInstances = max(o.ReservedInstances-planned[o.ReservationID], 0)
				o.Available = o.Available && o.ReservedInstances > 0
			}
		}
	}
	return lc.types, nil
}

// launchContext is what launching from a node class needs: the class, what its selectors
// resolve to, the catalog, and the instance types the class can launch (with an AMI for
// their architecture and an offering in its zones).
type launchContext struct {
	launch.Context
	entries map[string]*instancetype.Entry
	types   []*cloudprovider.InstanceType
}

func (p *Provider) launchContext(ctx context.Context, ref *karpv1.NodeClassReference) (*launchContext, error) {
	class, err := p.classes.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	resolved, err := p.classes.Resolved(ctx, class)
	if err != nil {
		return nil, err
	}
	entries, prices, err := p.catalog.Get(ctx)
	if err != nil {
		return nil, err
	}
	if amifamily.WindowsBuild(class) != "" {
		prices = p.catalog.Prices().Windows(ctx, prices, instancetype.VCPUs(entries))
	}
	costs := p.catalog.Prices().NodeCostTable()
	zones := resolved.Zones()
	lc := &launchContext{Context: launch.Context{Class: class, Resolved: resolved}, entries: entries, types: make([]*cloudprovider.InstanceType, 0, len(entries))}
	for _, e := range entries {
		it := instancetype.New(e, class, zones, prices, p.opts.settings())
		if p.opts.ReservedCapacity {
			it.Offerings = append(it.Offerings, resolved.Reservations.Offerings(it, zones, prices)...)
		}
		for i := range it.Offerings {
			o := &it.Offerings[i]
			subnet, hasAddress := resolved.SubnetFor(o.Zone)
			// A reservation takes nodes while it has an instance left; no offering takes
			// them while a capacity error marks it out.
			left := o.CapacityType != karpv1.CapacityTypeReserved || o.ReservedInstances > 0
			o.Available = hasAddress && left && !p.unavailable.Has(unavailable.KeyOf(it.Name, *o))
			o.NodeCosts = costs.NodeCosts(class, resolved.PublicIPv4[subnet.ID])
		}
		if _, ok := resolved.AMIs[it.Labels[corev1.LabelArchStable]]; ok && len(it.Offerings) > 0 {
			lc.types = append(lc.types, it)
		}
	}
	return lc, nil
}

// ResolveNodeClass resolves the selectors of a node class into the status fields the
// EC2NodeClass reports, with the conditions of what may resolve to nothing without making
// the class not ready (capacity reservations).
func (p *Provider) ResolveNodeClass(ctx context.Context, class *awsv1.EC2NodeClass) (awsv1.EC2NodeClassStatus, error) {
	status, err := p.classes.Status(ctx, class)
	if err != nil {
		return awsv1.EC2NodeClassStatus{}, err
	}
	if class.Spec.InstanceProfile != nil {
		status.InstanceProfile = *class.Spec.InstanceProfile
	} else {
		status.InstanceProfile = p.profiles.Name(class.Spec.Role)
	}
	return status, nil
}

// CatalogReady is a readiness check (healthz.Checker): it fails until the instance catalog
// and prices can be planned with, so a replica is not reported ready before it could plan.
// LoadCatalog reads them on every replica.
func (p *Provider) CatalogReady(r *http.Request) error { return p.catalog.Ready(r) }

// LoadCatalog reads the instance catalog and prices until they can be planned with or ctx
// ends, waiting after each failure as long as the failure's wait; it returns nil either
// way. Run on every replica, it makes CatalogReady true without waiting for leadership.
func (p *Provider) LoadCatalog(ctx context.Context) error { return p.catalog.Load(ctx) }

// PriceSources returns where the prices in use come from.
func (p *Provider) PriceSources() PriceSources { return p.catalog.Prices().Sources() }

// Where prices come from.
const (
	PriceSourceAPI      = pricing.SourceAPI
	PriceSourceEmbedded = pricing.SourceEmbedded
)

// PriceSources says where the prices in use come from: PriceSourceAPI or
// PriceSourceEmbedded, "" before the first read.
type PriceSources = pricing.Sources

func init() {
	metrics.Registry.MustRegister(Collectors()...)
}

// Collectors are the metrics the AWS provider registers: what init registers, and what the
// metrics reference lists.
func Collectors() []prometheus.Collector {
	return slices.Concat(apierror.Collectors(), unavailable.Collectors(), pricing.Collectors())
}
