package localaws

import (
	"encoding/json"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// termMatch is a TERM_MATCH filter.
func termMatch(field, value string) pricingtypes.Filter {
	return pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String(field), Value: aws.String(value)}
}

// linuxFilters are the filters a price lookup for Linux on-demand instances uses.
func linuxFilters() []pricingtypes.Filter {
	return []pricingtypes.Filter{
		termMatch("regionCode", "us-east-1"),
		termMatch("operatingSystem", "Linux"),
		termMatch("tenancy", "Shared"),
		termMatch("preInstalledSw", "NA"),
		termMatch("capacitystatus", "Used"),
		termMatch("marketoption", "OnDemand"),
	}
}

// testPriceDocument is what the tests read of a price list document.
type testPriceDocument struct {
	Product struct {
		ProductFamily string            `json:"productFamily"`
		Attributes    map[string]string `json:"attributes"`
		SKU           string            `json:"sku"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				Unit         string            `json:"unit"`
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// onDemandPrices reads the hourly USD price of each product document.
func onDemandPrices(t *testing.T, priceList []string) map[string]string {
	t.Helper()
	prices := map[string]string{}
	for _, doc := range priceList {
		var product testPriceDocument
		require.NoError(t, json.Unmarshal([]byte(doc), &product))
		require.Equal(t, "Compute Instance", product.Product.ProductFamily)
		require.Len(t, product.Terms.OnDemand, 1)
		for termKey, term := range product.Terms.OnDemand {
			require.Equal(t, product.Product.SKU+".JRTCKXETXF", termKey)
			for _, dim := range term.PriceDimensions {
				require.Equal(t, "Hrs", dim.Unit)
				prices[product.Product.Attributes["instanceType"]] = dim.PricePerUnit["USD"]
			}
		}
	}
	return prices
}

func TestGetProducts(t *testing.T) {
	h := newHarness(t, Options{})
	tests := []struct {
		name     string
		filters  []pricingtypes.Filter
		want     map[string]string
		wantCode string
	}{
		{
			name:    "one instance type",
			filters: append(linuxFilters(), termMatch("instanceType", "m5.large")),
			want:    map[string]string{"m5.large": "0.0960000000"},
		},
		{
			name:    "field names and values ignore case",
			filters: []pricingtypes.Filter{termMatch("INSTANCETYPE", "T3.Micro"), termMatch("location", "US East (N. Virginia)"), termMatch("OperatingSystem", "LINUX")},
			want:    map[string]string{"t3.micro": "0.0104000000"},
		},
		{
			name: "any of",
			filters: []pricingtypes.Filter{{
				Type: pricingtypes.FilterTypeAnyOf, Field: aws.String("instanceType"), Value: aws.String("c5.large,g4dn.xlarge"),
			}, termMatch("operatingSystem", "Linux")},
			want: map[string]string{"c5.large": "0.0850000000", "g4dn.xlarge": "0.5260000000"},
		},
		{
			// The catalog's Linux price plus the derived license of $0.046 per vCPU-hour.
			name:    "windows with the license included",
			filters: append(linuxFilters()[:1], termMatch("operatingSystem", "Windows"), termMatch("licenseModel", "License included"), termMatch("instanceType", "m5.large")),
			want:    map[string]string{"m5.large": "0.1880000000"},
		},
		{
			name:    "windows runs on x86_64 alone",
			filters: append(linuxFilters()[:1], termMatch("operatingSystem", "Windows"), termMatch("instanceType", "m6g.large")),
			want:    map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := h.pricing.GetProducts(h.ctx, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), Filters: tt.filters})
			require.NoError(t, err)
			require.Equal(t, "aws_v1", aws.ToString(out.FormatVersion))
			if diff := cmp.Diff(tt.want, onDemandPrices(t, out.PriceList)); diff != "" {
				t.Errorf("prices (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGetProductsListsCapacityBlocksApartByMarketOption(t *testing.T) {
	h := newHarness(t, Options{})
	tests := []struct {
		name    string
		filters []pricingtypes.Filter
		want    map[string]string
	}{
		{
			name:    "on demand",
			filters: append(linuxFilters(), termMatch("instanceType", "p5.48xlarge")),
			want:    map[string]string{"OnDemand": "55.0400000000"},
		},
		{
			name:    "capacity blocks",
			filters: []pricingtypes.Filter{termMatch("marketoption", "CapacityBlock"), termMatch("instanceType", "p5.48xlarge")},
			want:    map[string]string{"CapacityBlock": "24.7680000000"},
		},
		{
			name:    "without the marketoption filter",
			filters: append(linuxFilters()[:5], termMatch("instanceType", "p5.48xlarge")),
			want:    map[string]string{"OnDemand": "55.0400000000", "CapacityBlock": "24.7680000000"},
		},
		{
			name:    "a type no capacity block sells",
			filters: []pricingtypes.Filter{termMatch("marketoption", "CapacityBlock"), termMatch("instanceType", "m5.large")},
			want:    map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := h.pricing.GetProducts(h.ctx, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), Filters: tt.filters})
			require.NoError(t, err)
			got := map[string]string{}
			for _, doc := range out.PriceList {
				var product struct {
					Product struct {
						Attributes map[string]string `json:"attributes"`
					} `json:"product"`
				}
				require.NoError(t, json.Unmarshal([]byte(doc), &product))
				got[product.Product.Attributes["marketoption"]] = onDemandPrices(t, []string{doc})["p5.48xlarge"]
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("prices by marketoption (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGetProductsPaginatesEveryType(t *testing.T) {
	h := newHarness(t, Options{})
	paginator := pricing.NewGetProductsPaginator(h.pricing, &pricing.GetProductsInput{
		ServiceCode: aws.String("AmazonEC2"),
		Filters:     linuxFilters(),
		MaxResults:  aws.Int32(100),
	})
	prices := map[string]string{}
	pages := 0
	for paginator.HasMorePages() {
		page, err := paginator.NextPage(h.ctx)
		require.NoError(t, err)
		pages++
		for k, v := range onDemandPrices(t, page.PriceList) {
			prices[k] = v
		}
	}
	require.Len(t, prices, 1345)
	require.Equal(t, 14, pages)
	require.Equal(t, "55.0400000000", prices["p5.48xlarge"])
}

func TestGetProductsErrors(t *testing.T) {
	h := newHarness(t, Options{})
	tests := []struct {
		name     string
		input    pricing.GetProductsInput
		wantCode string
	}{
		{name: "other service", input: pricing.GetProductsInput{ServiceCode: aws.String("AmazonRDS")}, wantCode: "NotFoundException"},
		{name: "page too large", input: pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), MaxResults: aws.Int32(101)}, wantCode: "InvalidParameterException"},
		{name: "foreign token", input: pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), NextToken: aws.String("abc")}, wantCode: "InvalidNextTokenException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.pricing.GetProducts(h.ctx, &tt.input)
			require.Equal(t, tt.wantCode, errorCode(t, err))
		})
	}
}

func TestGetProductsServesNodeCosts(t *testing.T) {
	h := newHarness(t, Options{})
	tests := []struct {
		name    string
		service string
		filters []pricingtypes.Filter
		want    map[string]string
	}{
		{
			name:    "gp3 storage, IOPS and throughput",
			service: "AmazonEC2",
			filters: []pricingtypes.Filter{termMatch("regionCode", "us-east-1"), termMatch("volumeApiName", "gp3")},
			want: map[string]string{
				"EBS:VolumeUsage.gp3 GB-Mo":           "0.0800000000",
				"EBS:VolumeP-IOPS.gp3 IOPS-Mo":        "0.0050000000",
				"EBS:VolumeP-Throughput.gp3 MiBps-Mo": "0.0400000000",
			},
		},
		{
			name:    "public IPv4 under AmazonVPC",
			service: "AmazonVPC",
			filters: []pricingtypes.Filter{{Type: pricingtypes.FilterTypeContains, Field: aws.String("usagetype"), Value: aws.String("PublicIPv4:InUse")}},
			want:    map[string]string{"PublicIPv4:InUseAddress Hrs": "0.0050000000"},
		},
		{
			name:    "no instances under AmazonVPC",
			service: "AmazonVPC",
			filters: []pricingtypes.Filter{termMatch("instanceType", "m5.large")},
			want:    map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := h.pricing.GetProducts(h.ctx, &pricing.GetProductsInput{ServiceCode: aws.String(tt.service), Filters: tt.filters})
			require.NoError(t, err)
			got := map[string]string{}
			for _, doc := range out.PriceList {
				var product testPriceDocument
				require.NoError(t, json.Unmarshal([]byte(doc), &product))
				for _, term := range product.Terms.OnDemand {
					for _, dim := range term.PriceDimensions {
						got[product.Product.Attributes["usagetype"]+" "+dim.Unit] = dim.PricePerUnit["USD"]
					}
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("prices (-want +got):\n%s", diff)
			}
		})
	}
}
