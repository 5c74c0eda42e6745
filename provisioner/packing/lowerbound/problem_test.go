package lowerbound

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// survivors returns the columns the reduction keeps, in order.
func survivors(columns []Column, demands []Demand) []int {
	dims := len(columns[0].Capacity)
	b := newBuilder(len(columns), dims)
	scale := slices.Repeat([]float64{1}, dims)
	for d, dem := range demands {
		b.addDemand(d, dem.Amount, dem.Columns)
	}
	var kept []int
	for _, col := range b.problem(columns, scale).cols {
		kept = append(kept, col.index)
	}
	slices.Sort(kept)
	return kept
}

func TestReduce(t *testing.T) {
	r5WithGPU := Column{Price: r5.Price, Capacity: []float64{4000, 32 * gib, 58, 1}}
	cpuOnly := demand(1000, 1, 1, 0)
	tests := []struct {
		name    string
		columns []Column
		demands []Demand
		want    []int
	}{
		{
			name:    "a twice as large column at twice the price collapses onto the first",
			columns: []Column{c5, {Price: 2 * c5.Price, Capacity: []float64{8000, 16 * gib, 116, 0}}},
			demands: []Demand{withColumns(cpuOnly, 0, 1)},
			want:    []int{0},
		},
		{
			name:    "a pricier copy is dropped wherever it is listed",
			columns: []Column{{Price: 0.19, Capacity: c5.Capacity}, c5},
			demands: []Demand{withColumns(cpuOnly, 0, 1)},
			want:    []int{1},
		},
		{
			name:    "columns of different shapes both stay",
			columns: []Column{c5, m5, r5},
			demands: []Demand{withColumns(cpuOnly, 0, 1, 2)},
			want:    []int{0, 1, 2},
		},
		{
			name:    "capacity in a dimension none of the demands needs does not count",
			columns: []Column{r5, r5WithGPU},
			demands: []Demand{withColumns(cpuOnly, 0, 1)},
			want:    []int{0},
		},
		{
			name:    "a pricier column with a GPU stays for a demand that needs one",
			columns: []Column{r5, {Price: 0.3, Capacity: r5WithGPU.Capacity}},
			demands: []Demand{withColumns(cpuOnly, 0, 1), withColumns(demand(1000, 1, 1, 1), 1)},
			want:    []int{0, 1},
		},
		{
			name:    "an equally priced one with a GPU serves both demands alone",
			columns: []Column{r5, r5WithGPU},
			demands: []Demand{withColumns(cpuOnly, 0, 1), withColumns(demand(1000, 1, 1, 1), 1)},
			want:    []int{1},
		},
		{
			name:    "of identical columns the one serving more demands stays",
			columns: []Column{c5, c5},
			demands: []Demand{withColumns(cpuOnly, 0, 1), withColumns(cpuOnly, 1)},
			want:    []int{1},
		},
		{
			name:    "a better column serving fewer demands stays beside a worse one serving more",
			columns: []Column{{Price: 0.1, Capacity: c5.Capacity}, c5},
			demands: []Demand{withColumns(cpuOnly, 0, 1), withColumns(cpuOnly, 1)},
			want:    []int{0, 1},
		},
		{
			name:    "columns no demand may use are dropped",
			columns: []Column{c5, m5},
			demands: []Demand{withColumns(cpuOnly, 1)},
			want:    []int{1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, survivors(tt.columns, tt.demands)); diff != "" {
				t.Errorf("kept columns mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func withColumns(d Demand, columns ...int) Demand {
	d.Columns = columns
	return d
}
