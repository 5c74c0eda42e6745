package pricing

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	awspricing "github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/tailor-autoscaler/tailor/provisioner/backoff"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/expiring"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/nodecost"
)

// Where prices come from.
const (
	// SourceAPI means the prices were read from AWS: the Pricing API for on-demand
	// prices, DescribeSpotPriceHistory for spot prices.
	SourceAPI = "api"
	// SourceEmbedded means AWS could not be asked (--isolated-vpc, missing permission,
	// outage) and the prices are those of the catalog embedded in the binary.
	SourceEmbedded = "embedded"
)

// Kinds of prices, the keys of their reads in the failures given to New.
const (
	KindOnDemand = "on-demand"
	KindSpot     = "spot"
)

// Sources says where the prices in use come from: SourceAPI or SourceEmbedded, "" before
// the first read.
type Sources struct {
	OnDemand string
	Spot     string
}

// priceSourceMetric is 1 for the source of each kind of price in use, 0 for the other.
var priceSourceMetric = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "tailor_cloudprovider_price_source",
	Help: "Where the prices the planner uses come from: 1 for the source in use (api: AWS Pricing API and DescribeSpotPriceHistory; embedded: the catalog in the binary), by kind (on-demand, spot).",
}, []string{"kind", "source"})

// refreshedMetric is when each part of the catalog was last read: instance types, on-demand
// and spot prices.
var refreshedMetric = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "tailor_cloudprovider_refreshed_timestamp_seconds",
	Help: "When each part of the catalog was last refreshed (instance-types, on-demand, spot), as Unix time; its age is time() minus it.",
}, []string{"kind"})

// Collectors are the metrics of the package.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{priceSourceMetric, refreshedMetric}
}

// Refreshed records that a part of the catalog (instance-types, or a kind of prices) was
// read now.
func Refreshed(kind string) {
	refreshedMetric.WithLabelValues(kind).SetToCurrentTime()
}

// Options configure the prices read.
type Options struct {
	// Region whose prices are read.
	Region string
	// OnDemandTTL is how long on-demand prices are reused; SpotTTL how long spot prices are.
	OnDemandTTL, SpotTTL time.Duration
	// IsolatedVPC means the Pricing API cannot be reached: on-demand prices are the
	// embedded ones, and Windows on-demand prices derived from them.
	IsolatedVPC bool
}

// Provider holds the prices in use and reads them again when they are due.
type Provider struct {
	opts    Options
	ec2     *ec2.Client
	pricing *awspricing.Client
	clock   clock.Clock
	// failures space out the reads that fail, by kind of price.
	failures *backoff.Failures

	mu       sync.Mutex
	onDemand expiring.Value[map[string]float64]
	spot     expiring.Value[map[string]map[string]float64]
	// nodeCosts prices what a node costs besides its instance; read with on-demand prices.
	nodeCosts *nodecost.Table
	sources   Sources
	// windows holds the prices of Windows instances, read once a Windows class plans.
	windows windowsPriceCache
}

// New returns a provider with no prices read yet. failures space out the reads that fail
// by their kind; the caller may share them under keys of its own.
func New(opts Options, ec2Client *ec2.Client, pricingClient *awspricing.Client, clk clock.Clock, failures *backoff.Failures) *Provider {
	return &Provider{opts: opts, ec2: ec2Client, pricing: pricingClient, clock: clk, failures: failures}
}

// Ready reports whether both kinds of prices were read (or fell back to the embedded ones).
func (p *Provider) Ready() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.onDemand.Valid && p.spot.Valid
}

// Book returns the Linux prices in use.
func (p *Provider) Book() *Book {
	p.mu.Lock()
	defer p.mu.Unlock()
	return &Book{OnDemand: p.onDemand.Value, Spot: p.spot.Value}
}

// Due reports which kinds of prices are to be read again: those older than their TTL, and
// those that fell back to the embedded catalog when AWS failed; either not before the wait
// after a failed read has passed.
func (p *Provider) Due(now time.Time) (onDemand, spot bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	due := func(key string, fresh, fallback bool) bool {
		return (!fresh || fallback) && p.failures.Wait(key, "") == 0
	}
	onDemand = due(KindOnDemand, p.onDemand.Fresh(now, p.opts.OnDemandTTL), p.sources.OnDemand == SourceEmbedded && !p.opts.IsolatedVPC)
	spot = due(KindSpot, p.spot.Fresh(now, p.opts.SpotTTL), p.sources.Spot == SourceEmbedded)
	return onDemand, spot
}

// Refresh reads the kinds of prices asked for from AWS, as read at now. Prices that AWS
// cannot give fall back to the embedded catalog's, and in an isolated VPC on-demand prices
// are the embedded ones from the start. The first read of a kind, on which planning waits,
// makes one attempt within firstReadTimeout.
func (p *Provider) Refresh(ctx context.Context, now time.Time, onDemand, spot bool) {
	p.mu.Lock()
	firstOnDemand, firstSpot := !p.onDemand.Valid, !p.spot.Valid
	p.mu.Unlock()
	if onDemand && p.opts.IsolatedVPC {
		p.mu.Lock()
		p.nodeCosts = EmbeddedNodeCosts()
		p.onDemand = expiring.Of(Embedded().OnDemand, now)
		Refreshed(KindOnDemand)
		p.setSourceLocked(KindOnDemand, SourceEmbedded)
		p.mu.Unlock()
	} else if onDemand {
		prices, err := p.readOnDemandPrices(ctx, firstOnDemand)
		if err == nil {
			// Only once the Pricing API answered, so that an outage costs no more requests.
			p.refreshNodeCosts(ctx, firstOnDemand)
		}
		p.setPrices(ctx, KindOnDemand, err, func(fallback bool) {
			if fallback {
				prices = Embedded().OnDemand
			}
			p.onDemand = expiring.Of(prices, now)
		})
	}
	if spot {
		prices, err := spotPrices(ctx, p.ec2, now, spotAttempts(firstSpot))
		p.setPrices(ctx, KindSpot, err, func(fallback bool) {
			if fallback {
				prices = Embedded().Spot
			}
			p.spot = expiring.Of(prices, now)
		})
	}
}

// readOnDemandPrices reads on-demand prices from the Pricing API: the first time with one
// attempt within firstReadTimeout, since planning waits for it and the embedded prices
// stand in when it fails; later, in the background, with BackgroundAttempts.
func (p *Provider) readOnDemandPrices(ctx context.Context, first bool) (map[string]float64, error) {
	return boundedRead(ctx, first, func(ctx context.Context, attempts int) (map[string]float64, error) {
		return onDemandPrices(ctx, p.pricing, p.opts.Region, attempts)
	})
}

// Sources returns where the prices in use come from.
func (p *Provider) Sources() Sources {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sources
}

// setPrices records the outcome of reading one kind of prices: on success, or on failure
// with nothing cached yet, set stores the prices (from the embedded catalog when fallback is
// true); on failure with prices cached, those are kept. After a failure the next read waits
// for the failures' wait.
func (p *Provider) setPrices(ctx context.Context, kind string, err error, set func(fallback bool)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	valid := p.onDemand.Valid
	if kind == KindSpot {
		valid = p.spot.Valid
	}
	if err != nil {
		wait := p.failures.Failed(kind, "")
		klog.FromContext(ctx).Error(err, "failed to read prices from AWS", "kind", kind, "fallback", !valid, "retryIn", wait.String())
		if valid {
			return
		}
	} else {
		p.failures.Forget(kind)
	}
	set(err != nil)
	Refreshed(kind)
	source := SourceAPI
	if err != nil {
		source = SourceEmbedded
	}
	p.setSourceLocked(kind, source)
}

// setSourceLocked records where the prices of a kind in use come from. p.mu must be held.
func (p *Provider) setSourceLocked(kind, source string) {
	if kind == KindSpot {
		p.sources.Spot = source
	} else {
		p.sources.OnDemand = source
	}
	for _, s := range []string{SourceAPI, SourceEmbedded} {
		v := 0.0
		if s == source {
			v = 1
		}
		priceSourceMetric.WithLabelValues(kind, s).Set(v)
	}
}

// NodeCostTable returns the node cost table in use: the one read from the Pricing API, or
// the embedded one before that read or when it failed.
func (p *Provider) NodeCostTable() *nodecost.Table {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nodeCosts == nil {
		p.nodeCosts = EmbeddedNodeCosts()
	}
	return p.nodeCosts
}

// refreshNodeCosts reads the prices of volumes and public IPv4 addresses from the Pricing
// API over the embedded table, as readOnDemandPrices reads instance prices. A failed read
// keeps the table in use.
func (p *Provider) refreshNodeCosts(ctx context.Context, first bool) {
	table, err := boundedRead(ctx, first, func(ctx context.Context, attempts int) (*nodecost.Table, error) {
		return nodecost.Read(ctx, p.pricing, p.opts.Region, EmbeddedNodeCosts(), attempts)
	})
	if err != nil {
		klog.FromContext(ctx).Error(err, "failed to read node cost prices from AWS, keeping the prices in use")
		return
	}
	p.mu.Lock()
	p.nodeCosts = table
	p.mu.Unlock()
}
