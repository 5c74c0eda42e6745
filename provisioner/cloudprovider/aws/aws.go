// Package aws is Tailor's cloud provider for EC2: it resolves EC2NodeClasses, builds the
// instance catalog with prices, launches instances with CreateFleet and finds, tags and
// terminates them, all through aws-sdk-go-v2.
package aws

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/backoff"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/nodecost"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/transport"
)

// Keys of the provider's periodic work in refreshFailures, besides the kinds of prices.
const (
	failureCatalog            = "instance-types"
	failureTemplateCollection = "launch-templates"
)

// Reads of prices: the first, on which planning waits, makes one attempt of each request
// within firstPriceReadTimeout and falls back to the embedded prices at once when it fails;
// later ones run in the background with a few attempts, and after a failure wait for
// refreshFailures before the next.
const (
	firstPriceReadTimeout  = 10 * time.Second
	backgroundReadAttempts = 3
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
	errs = append(errs, validateVMMemoryOverhead(o.VMMemoryOverheadPercent))
	return errors.Join(errs...)
}

// Clients are the AWS API clients the provider uses.
type Clients struct {
	EC2     *ec2.Client
	SSM     *ssm.Client
	Pricing *pricing.Client
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
	cfg.APIOptions = append(cfg.APIOptions, countAPIErrors)
	pricingCfg := cfg.Copy()
	pricingCfg.Region = "us-east-1"
	return Clients{
		EC2:     ec2.NewFromConfig(cfg),
		SSM:     ssm.NewFromConfig(cfg),
		Pricing: pricing.NewFromConfig(pricingCfg),
		IAM:     iam.NewFromConfig(cfg),
		EKS:     eks.NewFromConfig(cfg),
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
	claims  client.Reader
	clock   clock.Clock

	unavailable *unavailableOfferings
	describe    *idBatcher[*ec2types.Instance]
	terminate   *idBatcher[struct{}]
	// afterCreateFleet, when set, runs once CreateFleet launched an instance; tests use it
	// to crash a launch there.
	afterCreateFleet func(ctx context.Context, instanceID string) error

	mu       sync.Mutex
	catalog  cached[map[string]*catalogEntry]
	onDemand cached[map[string]float64]
	spot     cached[map[string]map[string]float64]
	// nodeCosts prices what a node costs besides its instance; read with on-demand prices.
	nodeCosts *nodecost.Table
	sources   PriceSources
	// refreshing is set while a background refresh of the catalog and prices runs.
	refreshing bool
	// refreshMu is held while the catalog and prices are read from AWS, so that callers
	// that find nothing cached wait for one read rather than each making their own.
	refreshMu sync.Mutex
	classes   map[types.UID]cached[*resolvedClass]
	// classErrors are the last failed resolution of each class, returned until the wait
	// of failures passes, so that planning and launches do not resolve a broken class
	// each time.
	classErrors map[types.UID]error
	// failures space out the resolutions of classes that fail, by UID.
	failures *backoff.Failures
	// refreshFailures space out the reads of the catalog, prices and launch templates that
	// fail, by failureCatalog, kindOnDemand, kindSpot and failureTemplateCollection.
	refreshFailures *backoff.Failures
	// catalogErr is why the catalog could not be read, while it never was.
	catalogErr error
	// templates holds the launch templates known to exist, by name.
	templates map[string]knownTemplate
	// windows holds the prices of Windows instances, read once a Windows class plans.
	windows windowsPriceCache
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
	p := &Provider{
		opts: opts, ec2: clients.EC2, ssm: clients.SSM, pricing: clients.Pricing, iam: clients.IAM,
		kube: kube, claims: claims, clock: clk,
		unavailable:     newUnavailableOfferings(clk, opts.UnavailableOfferingsTTL),
		classes:         map[types.UID]cached[*resolvedClass]{},
		classErrors:     map[types.UID]error{},
		failures:        backoff.New(clk, backoff.DefaultInitial, backoff.DefaultMax),
		refreshFailures: backoff.New(clk, housekeepingPeriod, backoff.DefaultMax),
		templates:       map[string]knownTemplate{},
	}
	p.describe = newIDBatcher(clk, p.describeInstances)
	p.terminate = newIDBatcher(clk, p.terminateInstances)
	return p, nil
}

// InstanceTypes returns the instance types the NodePool's EC2NodeClass can launch in the
// zones of its subnets, with prices. A reserved offering's ReservedInstances leave out the
// instances of NodeClaims planned into its reservation that have not launched yet.
func (p *Provider) InstanceTypes(ctx context.Context, nodePool *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	lc, err := p.launchContext(ctx, nodePool.Spec.Template.Spec.NodeClassRef)
	if err != nil {
		return nil, err
	}
	if len(lc.resolved.reservations.reservations) == 0 || !p.opts.ReservedCapacity {
		return lc.types, nil
	}
	planned, err := p.plannedReservations(ctx)
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
	if windowsBuild(class) != "" {
		prices = p.windowsPriceBook(ctx, prices, entries)
	}
	costs := p.nodeCostTable()
	zones := resolved.zones()
	lc := &launchContext{class: class, resolved: resolved, entries: entries, types: make([]*cloudprovider.InstanceType, 0, len(entries))}
	for _, e := range entries {
		it := newInstanceType(e, class, zones, prices, p.overheadSettings())
		if p.opts.ReservedCapacity {
			it.Offerings = append(it.Offerings, p.reservedOfferings(it, resolved, prices)...)
		}
		for i := range it.Offerings {
			o := &it.Offerings[i]
			subnet, hasAddress := resolved.subnetFor(o.Zone)
			// A reservation takes nodes while it has an instance left; no offering takes
			// them while a capacity error marks it out.
			left := o.CapacityType != karpv1.CapacityTypeReserved || o.ReservedInstances > 0
			o.Available = hasAddress && left && !p.unavailable.has(keyOf(it.Name, *o))
			o.NodeCosts = costs.NodeCosts(class, resolved.publicIPv4[subnet.ID])
		}
		if _, ok := resolved.amis[it.Labels[corev1.LabelArchStable]]; ok && len(it.Offerings) > 0 {
			lc.types = append(lc.types, it)
		}
	}
	return lc, nil
}

func (p *Provider) overheadSettings() overheadSettings {
	return overheadSettings{vmMemoryOverheadPercent: p.opts.VMMemoryOverheadPercent, reservedENIs: int64(p.opts.ReservedENIs), prefixDelegation: p.opts.PrefixDelegation}
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

// resolved returns the class's resolved selectors, resolving them when stale. A class that
// failed to resolve returns the same error, without asking AWS, until a wait that doubles
// with each failure has passed or its spec changed.
func (p *Provider) resolved(ctx context.Context, class *awsv1.EC2NodeClass) (*resolvedClass, error) {
	version := strconv.FormatInt(class.Generation, 10)
	p.mu.Lock()
	c, ok := p.classes[class.UID]
	lastErr := p.classErrors[class.UID]
	p.mu.Unlock()
	now := p.clock.Now()
	if ok && c.fresh(now, p.opts.NodeClassTTL) {
		return c.value, nil
	}
	if lastErr != nil && p.failures.Wait(string(class.UID), version) > 0 {
		return nil, lastErr
	}
	r, err := p.resolveClass(ctx, class)
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
	p.classes[class.UID] = cached[*resolvedClass]{value: r, at: now, valid: true}
	delete(p.classErrors, class.UID)
	p.mu.Unlock()
	return r, nil
}

// ResolveNodeClass resolves the selectors of a node class into the status fields the
// EC2NodeClass reports, with the conditions of what may resolve to nothing without making
// the class not ready (capacity reservations).
func (p *Provider) ResolveNodeClass(ctx context.Context, class *awsv1.EC2NodeClass) (awsv1.EC2NodeClassStatus, error) {
	r, err := p.resolveClass(ctx, class)
	if err != nil {
		return awsv1.EC2NodeClassStatus{}, err
	}
	status := awsv1.EC2NodeClassStatus{
		Subnets: r.subnets, SecurityGroups: r.securityGroups, CapacityReservations: r.reservations.reservations,
		Conditions: []metav1.Condition{r.reservations.condition()},
	}
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

// catalogAndPrices returns the instance catalog and current prices. Only the first call
// waits for AWS, and for on-demand prices at most one attempt within firstPriceReadTimeout;
// later ones return what is cached at once and refresh what is stale in the background, so
// planning never waits on the Pricing or EC2 APIs. A catalog that could not be read returns
// the same error until the wait after the failure has passed.
func (p *Provider) catalogAndPrices(ctx context.Context) (map[string]*catalogEntry, *priceBook, error) {
	p.mu.Lock()
	ready := p.readyLocked()
	if ready {
		defer p.mu.Unlock()
		if p.staleLocked(p.clock.Now()) && !p.refreshing {
			p.refreshing = true
			go func() {
				p.refreshMu.Lock()
				defer p.refreshMu.Unlock()
				_ = p.refreshLocked(context.WithoutCancel(ctx))
			}()
		}
		return p.catalog.value, &priceBook{onDemand: p.onDemand.value, spot: p.spot.value}, nil
	}
	p.mu.Unlock()
	p.refreshMu.Lock()
	defer p.refreshMu.Unlock()
	p.mu.Lock()
	ready = p.readyLocked()
	lastErr := p.catalogErr
	p.mu.Unlock()
	if !ready {
		if lastErr != nil && p.refreshFailures.Wait(failureCatalog, "") > 0 {
			return nil, nil, lastErr
		}
		if err := p.refreshLocked(ctx); err != nil {
			return nil, nil, err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.readyLocked() {
		return nil, nil, errors.New("the instance catalog and prices are not read yet")
	}
	return p.catalog.value, &priceBook{onDemand: p.onDemand.value, spot: p.spot.value}, nil
}

// readyLocked reports whether the catalog and prices can be planned with. p.mu must be held.
func (p *Provider) readyLocked() bool {
	return p.catalog.valid && p.onDemand.valid && p.spot.valid
}

// CatalogReady is a readiness check (healthz.Checker): it fails until the instance catalog
// and prices can be planned with, so a replica is not reported ready before it could plan.
// LoadCatalog reads them on every replica.
func (p *Provider) CatalogReady(*http.Request) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.readyLocked() {
		return errors.New("the instance catalog and prices are not read yet")
	}
	return nil
}

// LoadCatalog reads the instance catalog and prices until they can be planned with or ctx
// ends, waiting after each failure as long as the failure's wait; it returns nil either
// way. Run on every replica, it makes CatalogReady true without waiting for leadership.
func (p *Provider) LoadCatalog(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("aws")
	for {
		_, _, err := p.catalogAndPrices(ctx)
		if err == nil {
			return nil
		}
		wait := max(p.refreshFailures.Wait(failureCatalog, ""), time.Second)
		logger.Error(err, "Failed to read the instance catalog", "retryIn", wait.String())
		select {
		case <-ctx.Done():
			return nil
		case <-p.clock.After(wait):
		}
	}
}

// staleLocked reports whether a part of the catalog or prices is due for a refresh. p.mu
// must be held.
func (p *Provider) staleLocked(now time.Time) bool {
	catalog, onDemand, spot := p.dueLocked(now)
	return catalog || onDemand || spot
}

// dueLocked reports which parts of the catalog and prices are to be read again: those older
// than their TTL, and prices that fell back to the embedded catalog when AWS failed; either
// not before the wait after a failed read has passed. p.mu must be held.
func (p *Provider) dueLocked(now time.Time) (catalog, onDemand, spot bool) {
	due := func(key string, fresh, fallback bool) bool {
		return (!fresh || fallback) && p.refreshFailures.Wait(key, "") == 0
	}
	catalog = due(failureCatalog, p.catalog.fresh(now, p.opts.CatalogTTL), false)
	onDemand = due(kindOnDemand, p.onDemand.fresh(now, p.opts.CatalogTTL), p.sources.OnDemand == PriceSourceEmbedded && !p.opts.IsolatedVPC)
	spot = due(kindSpot, p.spot.fresh(now, p.opts.SpotPriceTTL), p.sources.Spot == PriceSourceEmbedded)
	return catalog, onDemand, spot
}

// refreshLocked reads what is stale of the catalog and prices from AWS, without holding p.mu
// during the calls. Prices that AWS cannot give fall back to the embedded catalog's, and in an
// isolated VPC on-demand prices are the embedded ones from the start; the catalog itself has
// no fallback. p.refreshMu must be held.
func (p *Provider) refreshLocked(ctx context.Context) error {
	now := p.clock.Now()
	p.mu.Lock()
	needCatalog, needOnDemand, needSpot := p.dueLocked(now)
	firstOnDemand, firstSpot := !p.onDemand.valid, !p.spot.valid
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.refreshing = false
		p.mu.Unlock()
	}()
	logger := klog.FromContext(ctx)
	var errs []error
	if needCatalog {
		entries, err := describeInstanceTypes(ctx, p.ec2)
		p.mu.Lock()
		if err == nil {
			p.catalog = cached[map[string]*catalogEntry]{value: entries, at: now, valid: true}
			p.catalogErr = nil
			refreshedMetric.WithLabelValues("instance-types").SetToCurrentTime()
		} else if !p.catalog.valid {
			p.catalogErr = err
			errs = append(errs, err)
		}
		p.mu.Unlock()
		if err != nil {
			wait := p.refreshFailures.Failed(failureCatalog, "")
			logger.Error(err, "Failed to refresh the instance catalog", "retryIn", wait.String())
		} else {
			p.refreshFailures.Forget(failureCatalog)
		}
	}
	if needOnDemand && p.opts.IsolatedVPC {
		p.mu.Lock()
		p.nodeCosts = embeddedNodeCosts()
		p.onDemand = cached[map[string]float64]{value: embeddedPrices().onDemand, at: now, valid: true}
		refreshedMetric.WithLabelValues(kindOnDemand).SetToCurrentTime()
		p.setSourceLocked(kindOnDemand, PriceSourceEmbedded)
		p.mu.Unlock()
	} else if needOnDemand {
		prices, err := p.readOnDemandPrices(ctx, firstOnDemand)
		if err == nil {
			// Only once the Pricing API answered, so that an outage costs no more requests.
			p.refreshNodeCosts(ctx, firstOnDemand)
		}
		p.setPrices(ctx, kindOnDemand, err, func(fallback bool) {
			if fallback {
				prices = embeddedPrices().onDemand
			}
			p.onDemand = cached[map[string]float64]{value: prices, at: now, valid: true}
		})
	}
	if needSpot {
		// The first read has the client's retries: EC2 answers the catalog's reads too.
		attempts := backgroundReadAttempts
		if firstSpot {
			attempts = 0
		}
		prices, err := spotPrices(ctx, p.ec2, now, attempts)
		p.setPrices(ctx, kindSpot, err, func(fallback bool) {
			if fallback {
				prices = embeddedPrices().spot
			}
			p.spot = cached[map[string]map[string]float64]{value: prices, at: now, valid: true}
		})
	}
	return errors.Join(errs...)
}

// readOnDemandPrices reads on-demand prices from the Pricing API: the first time with one
// attempt within firstPriceReadTimeout, since planning waits for it and the embedded prices
// stand in when it fails; later, in the background, with backgroundReadAttempts.
func (p *Provider) readOnDemandPrices(ctx context.Context, first bool) (map[string]float64, error) {
	if !first {
		return onDemandPrices(ctx, p.pricing, p.opts.Region, backgroundReadAttempts)
	}
	ctx, cancel := context.WithTimeout(ctx, firstPriceReadTimeout)
	defer cancel()
	return onDemandPrices(ctx, p.pricing, p.opts.Region, 1)
}
