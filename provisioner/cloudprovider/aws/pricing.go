package aws

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/nodecost"
)

// priceBook holds hourly prices: on-demand per instance type, spot per type and zone.
type priceBook struct {
	onDemand map[string]float64
	spot     map[string]map[string]float64
}

func (p *priceBook) price(instanceType, zone, capacityType string) (float64, bool) {
	if capacityType == karpv1.CapacityTypeSpot {
		v, ok := p.spot[instanceType][zone]
		return v, ok
	}
	v, ok := p.onDemand[instanceType]
	return v, ok
}

// onDemandPrices reads Linux, shared-tenancy on-demand prices of the region from the
// Pricing API, making at most attempts of each request (0: the client's retryer decides).
// The filters are Karpenter's: without marketoption=OnDemand the capacity blocks of GPU
// types come too, with the same attributes otherwise, and the last product read for a type
// would set its price.
func onDemandPrices(ctx context.Context, client *pricing.Client, region string, attempts int) (map[string]float64, error) {
	return getOnDemandPrices(ctx, client, attempts,
		termMatch("regionCode", region),
		termMatch("operatingSystem", "Linux"),
		termMatch("tenancy", "Shared"),
		termMatch("preInstalledSw", "NA"),
		termMatch("capacitystatus", "Used"),
		termMatch("marketoption", "OnDemand"),
	)
}

func termMatch(field, value string) pricingtypes.Filter {
	return pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String(field), Value: aws.String(value)}
}

// getOnDemandPrices reads the hourly on-demand price of every instance type the filters
// select from the Pricing API.
func getOnDemandPrices(ctx context.Context, client *pricing.Client, attempts int, filters ...pricingtypes.Filter) (map[string]float64, error) {
	pages := pricing.NewGetProductsPaginator(client, &pricing.GetProductsInput{
		ServiceCode: aws.String("AmazonEC2"),
		Filters:     filters,
		MaxResults:  aws.Int32(100),
	})
	out := map[string]float64{}
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx, func(o *pricing.Options) { o.RetryMaxAttempts = attempts })
		if err != nil {
			return nil, fmt.Errorf("getting on-demand prices: %w", err)
		}
		for _, doc := range page.PriceList {
			name, price, err := parsePriceDocument(doc)
			if err != nil {
				return nil, err
			}
			if name != "" {
				out[name] = price
			}
		}
	}
	return out, nil
}

// priceDocument is the part of a price list product document Tailor reads.
type priceDocument struct {
	Product struct {
		Attributes struct {
			InstanceType string `json:"instanceType"`
		} `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

func parsePriceDocument(doc string) (string, float64, error) {
	var d priceDocument
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return "", 0, fmt.Errorf("decoding price list document: %w", err)
	}
	for _, term := range d.Terms.OnDemand {
		for _, dim := range term.PriceDimensions {
			usd, ok := dim.PricePerUnit["USD"]
			if !ok {
				continue
			}
			price, err := nodecost.ParsePrice(usd)
			if err != nil {
				return "", 0, fmt.Errorf("parsing pricePerUnit.USD of %s: %w", d.Product.Attributes.InstanceType, err)
			}
			if price > 0 {
				return d.Product.Attributes.InstanceType, price, nil
			}
		}
	}
	return "", 0, nil
}

// spotPrices reads the latest Linux spot price of every instance type in every zone, making
// at most attempts of each request (0: the client's retryer decides).
func spotPrices(ctx context.Context, client *ec2.Client, now time.Time, attempts int) (map[string]map[string]float64, error) {
	return describeSpotPrices(ctx, client, now, attempts, "Linux/UNIX")
}

// describeSpotPrices reads the latest spot price of every instance type in every zone for
// one product description (operating system).
func describeSpotPrices(ctx context.Context, client *ec2.Client, now time.Time, attempts int, product string) (map[string]map[string]float64, error) {
	pages := ec2.NewDescribeSpotPriceHistoryPaginator(client, &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: []string{product},
		StartTime:           aws.Time(now),
		MaxResults:          aws.Int32(1000),
	})
	out := map[string]map[string]float64{}
	latest := map[string]time.Time{}
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx, func(o *ec2.Options) { o.RetryMaxAttempts = attempts })
		if err != nil {
			return nil, fmt.Errorf("describing spot price history: %w", err)
		}
		for _, p := range page.SpotPriceHistory {
			if err := addSpotPrice(out, latest, p); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func addSpotPrice(out map[string]map[string]float64, latest map[string]time.Time, p ec2types.SpotPrice) error {
	it, zone := string(p.InstanceType), aws.ToString(p.AvailabilityZone)
	key := it + "/" + zone
	if ts := aws.ToTime(p.Timestamp); !latest[key].IsZero() && ts.Before(latest[key]) {
		return nil
	}
	price, err := nodecost.ParsePrice(aws.ToString(p.SpotPrice))
	if err != nil {
		return fmt.Errorf("parsing SpotPrice of %s: %w", key, err)
	}
	if out[it] == nil {
		out[it] = map[string]float64{}
	}
	out[it][zone] = price
	latest[key] = aws.ToTime(p.Timestamp)
	return nil
}

// Where prices come from.
const (
	// PriceSourceAPI means the prices were read from AWS: the Pricing API for on-demand
	// prices, DescribeSpotPriceHistory for spot prices.
	PriceSourceAPI = "api"
	// PriceSourceEmbedded means AWS could not be asked (--isolated-vpc, missing permission,
	// outage) and the prices are those of the catalog embedded in the binary.
	PriceSourceEmbedded = "embedded"

	kindOnDemand = "on-demand"
	kindSpot     = "spot"
)

// PriceSources says where the prices in use come from: PriceSourceAPI or
// PriceSourceEmbedded, "" before the first read.
type PriceSources struct {
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

// PriceSources returns where the prices in use come from.
func (p *Provider) PriceSources() PriceSources {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sources
}

// setPrices records the outcome of reading one kind of prices: on success, or on failure
// with nothing cached yet, set stores the prices (from the embedded catalog when fallback is
// true); on failure with prices cached, those are kept. After a failure the next read waits
// for refreshFailures.
func (p *Provider) setPrices(ctx context.Context, kind string, err error, set func(fallback bool)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	valid := p.onDemand.valid
	if kind == kindSpot {
		valid = p.spot.valid
	}
	if err != nil {
		wait := p.refreshFailures.Failed(kind, "")
		klog.FromContext(ctx).Error(err, "Failed to read prices from AWS", "kind", kind, "fallback", !valid, "retryIn", wait.String())
		if valid {
			return
		}
	} else {
		p.refreshFailures.Forget(kind)
	}
	set(err != nil)
	refreshedMetric.WithLabelValues(kind).SetToCurrentTime()
	source := PriceSourceAPI
	if err != nil {
		source = PriceSourceEmbedded
	}
	p.setSourceLocked(kind, source)
}

// setSourceLocked records where the prices of a kind in use come from. p.mu must be held.
func (p *Provider) setSourceLocked(kind, source string) {
	if kind == kindSpot {
		p.sources.Spot = source
	} else {
		p.sources.OnDemand = source
	}
	for _, s := range []string{PriceSourceAPI, PriceSourceEmbedded} {
		v := 0.0
		if s == source {
			v = 1
		}
		priceSourceMetric.WithLabelValues(kind, s).Set(v)
	}
}

// embeddedPrices are the prices of the catalog embedded in the binary.
func embeddedPrices() *priceBook {
	prices := &priceBook{onDemand: map[string]float64{}, spot: map[string]map[string]float64{}}
	cat, err := catalog.Embedded()
	if err != nil {
		return prices
	}
	for i := range cat.InstanceTypes {
		addCatalogPrices(prices, &cat.InstanceTypes[i])
	}
	return prices
}

// embeddedNodeCosts is the node cost table embedded in the binary.
func embeddedNodeCosts() *nodecost.Table {
	t, err := nodecost.Embedded()
	if err != nil {
		// The embedded table is validated by the package's tests: a node then costs its
		// instance only.
		return &nodecost.Table{HoursPerMonth: 730}
	}
	return t
}

// nodeCostTable returns the node cost table in use: the one read from the Pricing API, or
// the embedded one before that read or when it failed.
func (p *Provider) nodeCostTable() *nodecost.Table {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nodeCosts == nil {
		p.nodeCosts = embeddedNodeCosts()
	}
	return p.nodeCosts
}

// refreshNodeCosts reads the prices of volumes and public IPv4 addresses from the Pricing
// API over the embedded table, as readOnDemandPrices reads instance prices. A failed read
// keeps the table in use.
func (p *Provider) refreshNodeCosts(ctx context.Context, first bool) {
	attempts := backgroundReadAttempts
	if first {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, firstPriceReadTimeout)
		defer cancel()
		attempts = 1
	}
	table, err := nodecost.Read(ctx, p.pricing, p.opts.Region, embeddedNodeCosts(), attempts)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Failed to read node cost prices from AWS, keeping the prices in use")
		return
	}
	p.mu.Lock()
	p.nodeCosts = table
	p.mu.Unlock()
}
