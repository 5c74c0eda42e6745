package localstack

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics are the metric families one scrape of a component's Prometheus endpoint read.
type Metrics map[string]*dto.MetricFamily

// ScrapeMetrics reads the metrics a component serves at url.
func ScrapeMetrics(ctx context.Context, url string) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing the metrics of %s: %w", url, err)
	}
	return families, nil
}

// Sum adds the samples of a family whose labels include match: counter and gauge values,
// and the sample counts of histograms.
func (m Metrics) Sum(name string, match map[string]string) float64 {
	total := 0.0
	for _, metric := range m[name].GetMetric() {
		labels := map[string]string{}
		for _, l := range metric.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		matches := true
		for k, v := range match {
			matches = matches && labels[k] == v
		}
		if !matches {
			continue
		}
		switch {
		case metric.GetCounter() != nil:
			total += metric.GetCounter().GetValue()
		case metric.GetGauge() != nil:
			total += metric.GetGauge().GetValue()
		case metric.GetHistogram() != nil:
			total += float64(metric.GetHistogram().GetSampleCount())
		}
	}
	return total
}

// Histogram returns the sample count and sum of a histogram family, over all its series.
func (m Metrics) Histogram(name string) (count uint64, sum float64) {
	for _, metric := range m[name].GetMetric() {
		if h := metric.GetHistogram(); h != nil {
			count += h.GetSampleCount()
			sum += h.GetSampleSum()
		}
	}
	return count, sum
}

// Quantile estimates the q-quantile (0 to 1) of a histogram family over all its series, as
// Prometheus's histogram_quantile does: linear within the bucket the rank falls in, the
// largest finite bound for ranks in the +Inf bucket. ok is false without observations.
func (m Metrics) Quantile(name string, q float64) (value float64, ok bool) {
	counts := map[float64]uint64{}
	var total uint64
	for _, metric := range m[name].GetMetric() {
		h := metric.GetHistogram()
		if h == nil {
			continue
		}
		total += h.GetSampleCount()
		for _, b := range h.GetBucket() {
			counts[b.GetUpperBound()] += b.GetCumulativeCount()
		}
	}
	if total == 0 {
		return 0, false
	}
	bounds := slices.Sorted(maps.Keys(counts))
	rank := q * float64(total)
	lower, below := 0.0, uint64(0)
	for _, upper := range bounds {
		cumulative := counts[upper]
		if float64(cumulative) >= rank {
			if math.IsInf(upper, 1) {
				return lower, true
			}
			if cumulative == below {
				return upper, true
			}
			return lower + (upper-lower)*(rank-float64(below))/float64(cumulative-below), true
		}
		lower, below = upper, cumulative
	}
	return lower, true
}
