package lowerbound

import (
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"
)

// Offerings shaped like c5, m5 and r5 xlarge: cpu millicores, memory bytes, pod slots, GPUs.
var (
	c5 = Column{Price: 0.17, Capacity: []float64{4000, 8 * gib, 58, 0}}
	m5 = Column{Price: 0.2, Capacity: []float64{4000, 16 * gib, 58, 0}}
	r5 = Column{Price: 0.25, Capacity: []float64{4000, 32 * gib, 58, 0}}
	p3 = Column{Price: 3.06, Capacity: []float64{8000, 61 * gib, 58, 1}}
)

// approx compares floats to a relative 1e-9, the solver's precision.
var approx = cmpopts.EquateApprox(1e-9, 1e-12)

func demand(cpu, memGiB, pods, gpus float64, columns ...int) Demand {
	return Demand{Amount: []float64{cpu, memGiB * gib, pods, gpus}, Columns: columns}
}

// Demands whose optimum mixes c5 and r5: X has c5's shape and fills it exactly, Y is memory
// heavy. Two thirds of X joins Y on r5, using the cpu that Y leaves idle there, until r5's
// cpu and memory are both full: 2/3 c5 and 7/3 r5 nodes, 0.17·2/3 + 0.25·7/3 = 2.09/3. The
// dual prices follow from those two patterns being worth exactly their price: X fills half a
// c5, so it costs 0.34; a r5 node holds 2/7 X and 3/7 Y, so Y costs (0.25 − 0.34·2/7)·7/3.
var (
	mixX = func(columns ...int) Demand { return demand(8000, 16, 10, 0, columns...) }
	mixY = func(columns ...int) Demand { return demand(4000, 64, 10, 0, columns...) }
)

func TestSolve(t *testing.T) {
	c5Double := Column{Price: 2 * c5.Price, Capacity: []float64{8000, 16 * gib, 116, 0}}
	c5Pricier := Column{Price: 0.19, Capacity: c5.Capacity}
	r5Smaller := Column{Price: r5.Price, Capacity: []float64{4000, 30 * gib, 58, 0}}
	free := Column{Price: 0, Capacity: m5.Capacity}
	tests := []struct {
		name    string
		columns []Column
		demands []Demand
		// want.DemandPrices nil means the optimal prices are not unique and are not compared.
		want Result
	}{
		{
			name:    "one demand on one column pays its price times its largest share",
			columns: []Column{m5},
			demands: []Demand{demand(6000, 8, 10, 0, 0)},
			want:    Result{Cost: 0.3, Nodes: []float64{1.5}, DemandPrices: []float64{0.3}},
		},
		{
			name:    "a single demand goes to the column cheapest for what it needs most",
			columns: []Column{c5, r5},
			demands: []Demand{demand(2000, 24, 4, 0, 0, 1)},
			want:    Result{Cost: 0.1875, Nodes: []float64{0, 0.75}, DemandPrices: []float64{0.1875}},
		},
		{
			name:    "a cpu-heavy and a memory-heavy demand are cheapest on a mix of columns",
			columns: []Column{c5, r5},
			demands: []Demand{mixX(0, 1), mixY(0, 1)},
			want: Result{
				Cost:         2.09 / 3,
				Nodes:        []float64{2.0 / 3, 7.0 / 3},
				DemandPrices: []float64{0.34, 1.07 / 3},
			},
		},
		{
			name:    "dominated and duplicate columns change nothing",
			columns: []Column{c5, r5, c5Double, c5Pricier, r5Smaller, p3},
			demands: []Demand{mixX(0, 1, 2, 3, 4, 5), mixY(0, 1, 2, 3, 4, 5)},
			want: Result{
				Cost:         2.09 / 3,
				Nodes:        []float64{2.0 / 3, 7.0 / 3, 0, 0, 0, 0},
				DemandPrices: []float64{0.34, 1.07 / 3},
			},
		},
		{
			name:    "demands restricted to disjoint columns pay separately",
			columns: []Column{c5, r5},
			demands: []Demand{demand(6000, 4, 10, 0, 0), demand(1000, 48, 10, 0, 1)},
			want: Result{
				Cost:         0.255 + 0.375,
				Nodes:        []float64{1.5, 1.5},
				DemandPrices: []float64{0.255, 0.375},
			},
		},
		{
			name:    "complementary demands share a column for less than they cost apart",
			columns: []Column{m5},
			// Apart: 0.8 and 0.875 nodes. Together they fill exactly one.
			demands: []Demand{demand(3200, 2, 10, 0, 0), demand(800, 14, 10, 0, 0)},
			want:    Result{Cost: 0.2, Nodes: []float64{1}},
		},
		{
			name:    "pod slots can be what binds",
			columns: []Column{m5},
			demands: []Demand{demand(1000, 1, 116, 0, 0)},
			want:    Result{Cost: 0.4, Nodes: []float64{2}, DemandPrices: []float64{0.4}},
		},
		{
			name:    "a column lacking a dimension the demand needs is not used",
			columns: []Column{m5, p3},
			demands: []Demand{demand(1000, 1, 1, 1, 0, 1)},
			want:    Result{Cost: 3.06, Nodes: []float64{0, 1}, DemandPrices: []float64{3.06}},
		},
		{
			name:    "a zero-price column holds what may use it for free",
			columns: []Column{m5, free},
			demands: []Demand{demand(6000, 8, 10, 0, 0, 1), demand(2000, 4, 10, 0, 0)},
			want:    Result{Cost: 0.1, Nodes: []float64{0.5, 1.5}, DemandPrices: []float64{0, 0.1}},
		},
		{
			name:    "a demand needing nothing costs nothing",
			columns: []Column{m5},
			demands: []Demand{demand(0, 0, 0, 0, 0)},
			want:    Result{Cost: 0, Nodes: []float64{0}, DemandPrices: []float64{0}},
		},
		{
			name:    "no demands cost nothing",
			columns: []Column{m5},
			want:    Result{Cost: 0, Nodes: []float64{0}, DemandPrices: []float64{}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Solve(tt.columns, tt.demands)
			require.NoError(t, err)
			opts := cmp.Options{approx}
			if tt.want.DemandPrices == nil {
				opts = append(opts, cmpopts.IgnoreFields(Result{}, "DemandPrices"))
			}
			if diff := cmp.Diff(tt.want, got, opts...); diff != "" {
				t.Errorf("Solve() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSolveSharingIsCheaperThanSeparate(t *testing.T) {
	x, y := demand(3200, 2, 10, 0, 0), demand(800, 14, 10, 0, 0)
	together, err := Solve([]Column{m5}, []Demand{x, y})
	require.NoError(t, err)
	alone := 0.0
	for _, d := range []Demand{x, y} {
		res, err := Solve([]Column{m5}, []Demand{d})
		require.NoError(t, err)
		alone += res.Cost
	}
	if diff := cmp.Diff([]float64{0.2, 0.335}, []float64{together.Cost, alone}, approx); diff != "" {
		t.Errorf("costs together and apart mismatch (-want +got):\n%s", diff)
	}
}

func TestSolveInfeasible(t *testing.T) {
	gpuNoMemory := Column{Price: 1, Capacity: []float64{4000, 0, 58, 1}}
	tests := []struct {
		name    string
		columns []Column
		demands []Demand
		want    *InfeasibleError
		message string
	}{
		{
			name:    "a demand that allows no column",
			columns: []Column{m5},
			demands: []Demand{demand(1000, 1, 1, 0, 0), demand(1000, 1, 1, 0)},
			want:    &InfeasibleError{Demand: 1, Dimension: -1},
			message: "demand 1 allows no column",
		},
		{
			name:    "a demand that needs nothing still needs a column",
			columns: []Column{m5},
			demands: []Demand{demand(0, 0, 0, 0)},
			want:    &InfeasibleError{Demand: 0, Dimension: -1},
			message: "demand 0 allows no column",
		},
		{
			name:    "a demand needing a GPU none of its columns has",
			columns: []Column{c5, r5, p3},
			demands: []Demand{demand(1000, 1, 1, 1, 0, 1, 1, 0)},
			want:    &InfeasibleError{Demand: 0, Dimension: 3, Lacking: 2, Columns: 2},
			message: "demand 0 needs dimension 3, which none of its 2 columns provides",
		},
		{
			name:    "a demand whose columns each lack a different dimension",
			columns: []Column{m5, gpuNoMemory},
			demands: []Demand{demand(1000, 1, 1, 0, 0, 1), demand(1000, 1, 1, 1, 0, 1)},
			want:    &InfeasibleError{Demand: 1, Dimension: 1, Lacking: 1, Columns: 2},
			message: "demand 1 fits no column: each lacks a dimension it needs (dimension 1 is missing from 1 of its 2)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Solve(tt.columns, tt.demands)
			var got *InfeasibleError
			require.ErrorAs(t, err, &got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("error mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.message, err.Error()); diff != "" {
				t.Errorf("message mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSolveRejectsInvalidInput(t *testing.T) {
	tests := []struct {
		name    string
		columns []Column
		demands []Demand
	}{
		{
			name:    "columns with different numbers of dimensions",
			columns: []Column{m5, {Price: 1, Capacity: []float64{1, 2}}},
		},
		{
			name:    "a demand with a different number of dimensions",
			columns: []Column{m5},
			demands: []Demand{{Amount: []float64{1, 2}, Columns: []int{0}}},
		},
		{
			name:    "a negative price",
			columns: []Column{{Price: -1, Capacity: m5.Capacity}},
		},
		{
			name:    "a capacity that is not a number",
			columns: []Column{{Price: 1, Capacity: []float64{math.NaN(), 1, 1, 0}}},
		},
		{
			name:    "an infinite amount",
			columns: []Column{m5},
			demands: []Demand{demand(math.Inf(1), 1, 1, 0, 0)},
		},
		{
			name:    "a column index out of range",
			columns: []Column{m5},
			demands: []Demand{demand(1, 1, 1, 0, 0, 1)},
		},
		{
			name:    "a negative column index",
			columns: []Column{m5},
			demands: []Demand{demand(1, 1, 1, 0, -1)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Solve(tt.columns, tt.demands)
			require.ErrorIs(t, err, ErrInvalidInput)
		})
	}
}

func TestResourcePrices(t *testing.T) {
	// Prices linear in vCPU and memory: $0.03 per vCPU and $0.005 per GiB.
	linear := func(vcpu, memGiB float64) Column {
		return Column{Price: 0.03*vcpu + 0.005*memGiB, Capacity: []float64{1000 * vcpu, memGiB * gib, 29, 0}}
	}
	tests := []struct {
		name    string
		columns []Column
		amount  []float64
		// want is per vCPU, GiB, pod and GPU.
		want []float64
	}{
		{
			name:    "linear prices are recovered when the amount's shape lies between the columns'",
			columns: []Column{linear(2, 4), linear(2, 8), linear(2, 16), linear(8, 64)},
			amount:  demand(10000, 50, 20, 0).Amount,
			want:    []float64{0.03, 0.005, 0, 0},
		},
		{
			name:    "the scarcest dimension carries the whole price",
			columns: []Column{m5},
			amount:  demand(8000, 8, 10, 0).Amount,
			want:    []float64{0.05, 0, 0, 0},
		},
		{
			name:    "pod slots carry the price when they bind",
			columns: []Column{m5},
			amount:  demand(1000, 1, 116, 0).Amount,
			want:    []float64{0, 0, 0.2 / 58, 0},
		},
		{
			name:    "a zero-price column makes what it provides free",
			columns: []Column{m5, {Price: 0, Capacity: []float64{0, 64 * gib, 0, 0}}},
			amount:  demand(8000, 100, 10, 0).Amount,
			want:    []float64{0.05, 0, 0, 0},
		},
		{
			name:    "dimensions with no amount get no price",
			columns: []Column{m5},
			amount:  demand(0, 0, 0, 0).Amount,
			want:    []float64{0, 0, 0, 0},
		},
	}
	perUnit := []float64{1000, gib, 1, 1}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResourcePrices(tt.columns, tt.amount)
			require.NoError(t, err)
			for r := range got {
				got[r] *= perUnit[r]
			}
			if diff := cmp.Diff(tt.want, got, approx); diff != "" {
				t.Errorf("ResourcePrices() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResourcePricesErrors(t *testing.T) {
	_, err := ResourcePrices([]Column{c5, r5}, demand(1000, 1, 1, 1).Amount)
	var infeasible *InfeasibleError
	require.ErrorAs(t, err, &infeasible)
	if diff := cmp.Diff(&InfeasibleError{Demand: 0, Dimension: 3, Lacking: 2, Columns: 2}, infeasible); diff != "" {
		t.Errorf("error mismatch (-want +got):\n%s", diff)
	}

	_, err = ResourcePrices([]Column{c5}, []float64{1, 2})
	if !errors.Is(err, ErrInvalidInput) {
		t.Errorf("ResourcePrices() with mismatched dimensions returned %v, want ErrInvalidInput", err)
	}
}

func TestSolveManyProportionalDemandsCostTheirSum(t *testing.T) {
	// Splitting demands into proportional parts allowed on the same columns changes nothing:
	// 70 parts each of the mixed pair still cost 2.09/3. With 140 demands the demand sets span
	// more than one machine word.
	const parts = 70
	var demands []Demand
	for range parts {
		for _, d := range []Demand{mixX(0, 1), mixY(0, 1)} {
			for r := range d.Amount {
				d.Amount[r] /= parts
			}
			demands = append(demands, d)
		}
	}
	got, err := Solve([]Column{c5, r5}, demands)
	require.NoError(t, err)
	want := Result{Cost: 2.09 / 3, Nodes: []float64{2.0 / 3, 7.0 / 3}}
	if diff := cmp.Diff(want, got, approx, cmpopts.IgnoreFields(Result{}, "DemandPrices")); diff != "" {
		t.Errorf("Solve() mismatch (-want +got):\n%s", diff)
	}
}
