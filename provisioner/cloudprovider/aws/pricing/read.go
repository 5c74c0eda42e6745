// Package pricing reads the hourly prices of EC2 instances: on-demand from the Pricing API,
// spot from DescribeSpotPriceHistory, for Linux and for Windows, and what a node costs
// besides its instance (volumes, public IPv4 addresses, monitoring); with the catalog
// embedded in the binary standing in where AWS cannot be asked.
package pricing

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	awspricing "github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/nodecost"
)

// Reads of prices: the first, on which planning waits, makes one attempt of each request
// within firstReadTimeout and falls back at once when it fails; later ones run in the
// background with BackgroundAttempts attempts.
const (
	firstReadTimeout   = 10 * time.Second
	BackgroundAttempts = 3
)

// boundedRead runs read with the attempts of each request a read of prices makes: the
// first read one attempt within firstReadTimeout, later ones BackgroundAttempts.
func boundedRead[T any](ctx context.Context, first bool, read func(ctx context.Context, attempts int) (T, error)) (T, error) {
	if !first {
		return read(ctx, BackgroundAttempts)
	}
	ctx, cancel := context.WithTimeout(ctx, firstReadTimeout)
	defer cancel()
	return read(ctx, 1)
}

// spotAttempts is how many attempts of each request a read of spot prices makes: the
// first has the client's retries (0), since EC2 answers the catalog's reads too.
func spotAttempts(first bool) int {
	if first {
		return 0
	}
	return BackgroundAttempts
}

// onDemandPrices reads Linux, shared-tenancy on-demand prices of the region from the
// Pricing API, making at most attempts of each request (0: the client's retryer decides).
// The filters are Karpenter's: without marketoption=OnDemand the capacity blocks of GPU
// types come too, with the same attributes otherwise, and the last product read for a type
// would set its price.
func onDemandPrices(ctx context.Context, client *awspricing.Client, region string, attempts int) (map[string]float64, error) {
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
func getOnDemandPrices(ctx context.Context, client *awspricing.Client, attempts int, filters ...pricingtypes.Filter) (map[string]float64, error) {
	pages := awspricing.NewGetProductsPaginator(client, &awspricing.GetProductsInput{
		ServiceCode: aws.String("AmazonEC2"),
		Filters:     filters,
		MaxResults:  aws.Int32(100),
	})
	out := map[string]float64{}
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx, func(o *awspricing.Options) { o.RetryMaxAttempts = attempts })
		if err != nil {
			return nil, fmt.Errorf("getting on-demand prices: %w", err)
		}
		for _, doc := range page.PriceList {
			name, price, err := ParsePriceDocument(doc)
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

// ParsePriceDocument reads the instance type and its hourly on-demand price in USD from a
// price list product document; "" when the document has no positive price.
func ParsePriceDocument(doc string) (string, float64, error) {
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
			if err := AddSpotPrice(out, latest, p); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// AddSpotPrice records a spot price in out (by type and zone) unless latest says a newer
// one of the same type and zone is there.
func AddSpotPrice(out map[string]map[string]float64, latest map[string]time.Time, p ec2types.SpotPrice) error {
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
