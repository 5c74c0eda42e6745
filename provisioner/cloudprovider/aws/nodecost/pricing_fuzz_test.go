package nodecost

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParseProduct reads Pricing API product documents of EBS and data transfer: an error
// naming the price field, or a finite positive price, or nothing to use.
func FuzzParseProduct(f *testing.F) {
	doc := func(begin, usd string) string {
		return `{"product":{"attributes":{"usagetype":"EBS:VolumeUsage.gp3","volumeApiName":"gp3"}},"terms":{"OnDemand":{"A":{"priceDimensions":{"A.B":{"beginRange":"` + begin + `","pricePerUnit":{"USD":"` + usd + `"}}}}}}}`
	}
	for _, s := range []string{
		doc("0", "0.08"), doc("", "0.08"), doc("10240", "0.05"), doc("0", "NaN"), doc("0", "-Inf"), doc("0", "-0"),
		doc("0", "9e999"), doc("0", "abc"), "", "{}", `{"terms":{"OnDemand":{"A":null}}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		p, ok, err := parseProduct(doc)
		if err != nil {
			require.True(t, strings.HasPrefix(err.Error(), "decoding price list document") || strings.Contains(err.Error(), "pricePerUnit.USD"), "error %q names no field", err)
			require.False(t, ok)
			return
		}
		if !ok {
			require.Zero(t, p)
			return
		}
		require.True(t, UsablePrice(p.price), "price %v", p.price)
		require.Positive(t, p.price)
	})
}
