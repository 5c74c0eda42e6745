package localstack

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestQuantileInterpolatesWithinBucketsOverAllSeries(t *testing.T) {
	// Two series: 10 observations in (0, 1], 10 in (1, 2], 20 in (2, 4] and 0 beyond.
	scrape := `# TYPE wait_seconds histogram
wait_seconds_bucket{replica="a",le="1"} 10
wait_seconds_bucket{replica="a",le="2"} 10
wait_seconds_bucket{replica="a",le="4"} 20
wait_seconds_bucket{replica="a",le="+Inf"} 20
wait_seconds_sum{replica="a"} 50
wait_seconds_count{replica="a"} 20
wait_seconds_bucket{replica="b",le="1"} 0
wait_seconds_bucket{replica="b",le="2"} 10
wait_seconds_bucket{replica="b",le="4"} 20
wait_seconds_bucket{replica="b",le="+Inf"} 20
wait_seconds_sum{replica="b"} 50
wait_seconds_count{replica="b"} 20
`
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(scrape))
	if err != nil {
		t.Fatal(err)
	}
	m := Metrics(families)
	var got []float64
	for _, q := range []float64{0.125, 0.5, 0.75, 1} {
		v, ok := m.Quantile("wait_seconds", q)
		if !ok {
			t.Fatalf("quantile %v: no observations", q)
		}
		got = append(got, v)
	}
	if diff := cmp.Diff([]float64{0.5, 2, 3, 4}, got); diff != "" {
		t.Errorf("quantiles 0.125, 0.5, 0.75, 1 (-want +got):\n%s", diff)
	}
	if _, ok := m.Quantile("absent_seconds", 0.5); ok {
		t.Error("a family without observations has a quantile")
	}
}
