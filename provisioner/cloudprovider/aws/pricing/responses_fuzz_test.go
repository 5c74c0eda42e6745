package pricing

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/nodecost"
)

// FuzzParsePriceDocument reads Pricing API product documents: an error naming the price
// field, or a finite positive price for a named instance type, or nothing to use.
func FuzzParsePriceDocument(f *testing.F) {
	doc := func(instanceType, usd string) string {
		return `{"product":{"attributes":{"instanceType":"` + instanceType + `"}},"terms":{"OnDemand":{"A.B":{"priceDimensions":{"A.B.C":{"pricePerUnit":{"USD":"` + usd + `"}}}}}}}`
	}
	for _, s := range []string{
		doc("m5.large", "0.0960000000"), doc("m5.large", "0.0000000000"), doc("m5.large", "-1"), doc("m5.large", "NaN"),
		doc("m5.large", "Inf"), doc("m5.large", "1e400"), doc("m5.large", "0x1p-2"), doc("m5.large", ""), doc("", "0.5"),
		`{"terms":{"OnDemand":null}}`, `{"terms":{"OnDemand":{"x":{"priceDimensions":{"y":{"pricePerUnit":{"EUR":"1"}}}}}}}`,
		"", "null", `{"product":[]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		name, price, err := ParsePriceDocument(doc)
		if err != nil {
			require.True(t, strings.HasPrefix(err.Error(), "decoding price list document") || strings.Contains(err.Error(), "pricePerUnit.USD"), "error %q names no field", err)
			require.Zero(t, price)
			return
		}
		require.True(t, nodecost.UsablePrice(price), "price %v", price)
		if name != "" {
			require.Positive(t, price, "a priced instance type costs nothing")
		}
	})
}

// FuzzAddSpotPrice adds DescribeSpotPriceHistory entries as the SDK hands them over,
// pointers missing or not: an error naming SpotPrice, or a usable price kept as the latest.
func FuzzAddSpotPrice(f *testing.F) {
	f.Add("m5.large", "us-east-1a", "0.0412", int64(1700000000), false, false)
	f.Add("m5.large", "us-east-1a", "NaN", int64(0), true, false)
	f.Add("m5.large", "", "-0.5", int64(-1), false, true)
	f.Add("", "us-east-1a", "+Inf", int64(math.MaxInt64), false, false)
	f.Add("m5.large", "us-east-1a", "1e309", int64(0), false, false)
	f.Fuzz(func(t *testing.T, instanceType, zone, price string, unix int64, noPrice, noTimestamp bool) {
		p := ec2types.SpotPrice{InstanceType: ec2types.InstanceType(instanceType), AvailabilityZone: aws.String(zone), SpotPrice: aws.String(price), Timestamp: aws.Time(time.Unix(unix, 0))}
		if noPrice {
			p.SpotPrice = nil
		}
		if noTimestamp {
			p.Timestamp = nil
		}
		out, latest := map[string]map[string]float64{}, map[string]time.Time{}
		err := AddSpotPrice(out, latest, p)
		if err != nil {
			require.Contains(t, err.Error(), "parsing SpotPrice of ")
			require.Empty(t, out)
			return
		}
		got, ok := out[instanceType][zone]
		require.True(t, ok)
		require.True(t, nodecost.UsablePrice(got), "price %v", got)
	})
}
