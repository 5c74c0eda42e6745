// Package lowerbound computes a lower bound on the hourly price of the capacity a batch of pods
// needs: the optimum of the linear-programming relaxation of the packing problem the planner
// solves, in which nodes may be bought, and pods split, fractionally. The ratio of a plan's price
// to this bound says how far the plan is from optimal; the dual prices say what each demand, and
// each unit of each resource, costs at the margin.
//
// The relaxation has a variable per (demand, column) pair and a constraint per (column,
// dimension) pair, far too many to solve densely at catalog scale (about 12,000 columns). It is
// solved in three steps:
//
//  1. Reduction. Demands that need nothing, or that a zero-price column can hold, cost nothing
//     and leave the LP. In the relaxation a column is worth only what one dollar of it buys, its
//     capacity per unit of price κ = Capacity/Price: nodes are fractional, so a 2-vCPU node at
//     $0.1 and a 96-vCPU node at $4.8 are the same column. A column is dropped when another that
//     may serve at least the same demands buys at least as much per dollar in every dimension
//     those demands use; identical columns collapse the same way. Linear prices make whole
//     families of sizes identical: a synthetic EC2-like catalog of 12,000 columns and 10
//     demands reduces to about 80. The reduction costs a pass over the columns against small
//     Pareto fronts, plus a comparison of every pair of distinct demand sets (a few dozen on
//     real catalogs; it would grow quadratically if every column had its own).
//  2. Column generation (Dantzig–Wolfe). Eliminating the node counts x, the relaxation is a
//     covering LP over patterns, a pattern being one dollar of a column filled with fractions
//     g_d of the demands it may serve (Σ_d g_d·Amount_d ≤ κ): minimise dollars spent subject to
//     every demand being covered once. The restricted master has one row per demand (at most
//     about 30) and is solved by a revised simplex with an explicit basis inverse, warm-started
//     as patterns arrive. A column prices out when its best pattern at the current demand
//     prices u is worth more than a dollar: a tiny LP with one row per dimension (packer).
//  3. Certification. At the end no column is worth more than a dollar at prices u (up to a
//     relative 1e-9), so u is dual feasible and Σ_d u_d is a lower bound by weak duality. It is
//     divided by the largest pattern value found, so the bound stays valid even where
//     tolerances let the simplex stop early.
//
// A general-purpose simplex was considered for step 2 and rejected: gonum's lp.Simplex refactors
// its basis from scratch at every pivot and returns no dual prices, which both the pricing and
// ResourcePrices need; the tests use it as the independent reference on the unreduced LP.
package lowerbound

import (
	"errors"
	"fmt"
	"math"
)

// Column is one way to buy capacity: an offering (instance type × zone × capacity type) with
// its hourly price and what one node of it provides per dimension (cpu millicores, memory bytes,
// pod slots, GPUs, ...). Dimensions are positional and the same for all columns and demands.
type Column struct {
	// Price of one node per hour. Must not be negative.
	Price float64
	// Capacity of one node per dimension. Must not be negative.
	Capacity []float64
}

// Demand is a set of pods that may only run on some columns (their node affinity, taints,
// arch, capacity type...).
type Demand struct {
	// Amount per dimension: the pods' summed requests. Must not be negative.
	Amount []float64
	// Columns the pods may use, as indices into the columns.
	Columns []int
}

// Result is the optimum of the relaxation.
type Result struct {
	// Cost is the optimum: a lower bound on the price of any integral plan.
	Cost float64
	// Nodes is the fractional number of nodes bought per column in an optimal solution; columns
	// the reduction dropped get none.
	Nodes []float64
	// DemandPrices are the dual prices of the demands: what each contributes to Cost at the
	// margin. They are non-negative and sum to Cost; demands that need nothing, or that fit on
	// zero-price columns, get 0.
	DemandPrices []float64
}

// ErrInvalidInput is wrapped by the errors returned for malformed inputs: mismatched numbers
// of dimensions, negative or non-finite numbers, column indices out of range.
var ErrInvalidInput = errors.New("invalid input")

// ErrNotConverged is wrapped by the error returned when the simplex reaches its iteration limit,
// which only numerical trouble should cause.
var ErrNotConverged = errors.New("linear program did not converge")

// InfeasibleError says a demand fits on none of the columns it allows, so no plan exists.
type InfeasibleError struct {
	// Demand is the index of the demand; 0 for ResourcePrices's single amount.
	Demand int
	// Dimension is a dimension the demand needs (positive amount) that its columns lack: the
	// one the most of them lack. -1 when the demand allows no column at all.
	Dimension int
	// Lacking is how many of the demand's columns lack Dimension.
	Lacking int
	// Columns is how many distinct columns the demand allows.
	Columns int
}

// Error says which demand fits nowhere and why.
func (e *InfeasibleError) Error() string {
	switch {
	case e.Dimension < 0:
		return fmt.Sprintf("demand %d allows no column", e.Demand)
	case e.Lacking == e.Columns:
		return fmt.Sprintf("demand %d needs dimension %d, which none of its %d columns provides",
			e.Demand, e.Dimension, e.Columns)
	default:
		return fmt.Sprintf("demand %d fits no column: each lacks a dimension it needs (dimension %d is missing from %d of its %d)",
			e.Demand, e.Dimension, e.Lacking, e.Columns)
	}
}

// IsInfeasibleError reports whether err is, or wraps, an InfeasibleError.
func IsInfeasibleError(err error) bool {
	var target *InfeasibleError
	return errors.As(err, &target)
}

// Solve returns the optimum of: minimise Σ_c Price_c·x_c subject to: each demand d is split
// fractionally over its allowed columns (f_{d,c} ≥ 0, Σ_c f_{d,c} = 1), and for every column c
// and dimension r: Σ_d f_{d,c}·Amount_{d,r} ≤ Capacity_{c,r}·x_c; x ≥ 0.
//
// Cost is exact to a relative 1e-9 and never above the true optimum by more than that. A demand
// with a positive amount in a dimension none of its columns provides, or with no columns, makes
// the problem infeasible: the error is an *InfeasibleError.
func Solve(columns []Column, demands []Demand) (Result, error) {
	dims, err := validate(columns, demands)
	if err != nil {
		return Result{}, err
	}
	res := Result{Nodes: make([]float64, len(columns)), DemandPrices: make([]float64, len(demands))}
	scale := make([]float64, dims)
	for _, d := range demands {
		for r, a := range d.Amount {
			scale[r] = math.Max(scale[r], a)
		}
	}
	for r := range scale {
		if scale[r] == 0 {
			scale[r] = 1
		}
	}

	b := newBuilder(len(columns), dims)
	freeLoad := map[int][]float64{}
	seen := make([]int, len(columns))
	for d, dem := range demands {
		cols, err := effectiveColumns(columns, d, dem, seen)
		if err != nil {
			return Result{}, err
		}
		if len(cols) == 0 {
			continue // needs nothing
		}
		if free := zeroPriceColumn(columns, cols); free >= 0 {
			load := freeLoad[free]
			if load == nil {
				load = make([]float64, dims)
				freeLoad[free] = load
			}
			for r, a := range dem.Amount {
				load[r] += a
			}
			continue
		}
		b.addDemand(d, scaled(dem.Amount, scale), cols)
	}
	for c, load := range freeLoad {
		res.Nodes[c] = nodesFor(load, columns[c].Capacity)
	}

	sol, err := b.problem(columns, scale).solve()
	if err != nil {
		return Result{}, err
	}
	res.Cost = sol.cost
	for i, d := range b.demands {
		res.DemandPrices[d] = sol.prices[i]
	}
	for c, x := range sol.nodes {
		res.Nodes[c] += x
	}
	return res, nil
}

// ResourcePrices returns the dual prices λ_r of the single-demand covering LP
// min Σ Price_c x_c s.t. Σ_c Capacity_{c,r} x_c ≥ amount_r, x ≥ 0 (equivalently
// max λ·amount s.t. λ·Capacity_c ≤ Price_c for all c, λ ≥ 0): the marginal cost per unit of
// each dimension. Dimensions with zero amount get price 0. When the optimal dual is not unique,
// one of the optimal ones is returned.
//
// The covering LP is Solve's relaxation with the amount split into one demand per dimension,
// each allowed everywhere: a column's node count is then the largest of its per-dimension
// loads, which a covering solution can always meet by spreading each dimension's cover over the
// columns in proportion to what they provide. So it shares Solve's reduction and solver, and
// λ_r is the price of dimension r's demand divided by its amount.
func ResourcePrices(columns []Column, amount []float64) ([]float64, error) {
	if _, err := validate(columns, []Demand{{Amount: amount}}); err != nil {
		return nil, err
	}
	dims := len(amount)
	prices := make([]float64, dims)
	b := newBuilder(len(columns), dims)
	scale := make([]float64, dims)
	for r, a := range amount {
		scale[r] = a
		if a == 0 {
			scale[r] = 1
			continue
		}
		var cols []int
		free := false
		for c, col := range columns {
			if col.Capacity[r] > 0 {
				cols = append(cols, c)
				free = free || col.Price == 0
			}
		}
		if len(cols) == 0 {
			return nil, &InfeasibleError{Demand: 0, Dimension: r, Lacking: len(columns), Columns: len(columns)}
		}
		if free {
			continue // a zero-price column covers it: its price is 0
		}
		unit := make([]float64, dims)
		unit[r] = 1
		b.addDemand(r, unit, cols)
	}
	sol, err := b.problem(columns, scale).solve()
	if err != nil {
		return nil, err
	}
	for i, r := range b.demands {
		prices[r] = sol.prices[i] / amount[r]
	}
	return prices, nil
}

// validate checks the inputs' shapes and numbers and returns the number of dimensions.
func validate(columns []Column, demands []Demand) (int, error) {
	dims := -1
	for c, col := range columns {
		if dims < 0 {
			dims = len(col.Capacity)
		}
		if len(col.Capacity) != dims {
			return 0, fmt.Errorf("%w: column %d has %d dimensions, want %d", ErrInvalidInput, c, len(col.Capacity), dims)
		}
		if !nonNegative(col.Price) {
			return 0, fmt.Errorf("%w: column %d has price %v", ErrInvalidInput, c, col.Price)
		}
		for r, k := range col.Capacity {
			if !nonNegative(k) {
				return 0, fmt.Errorf("%w: column %d has capacity %v in dimension %d", ErrInvalidInput, c, k, r)
			}
		}
	}
	for d, dem := range demands {
		if dims < 0 {
			dims = len(dem.Amount)
		}
		if len(dem.Amount) != dims {
			return 0, fmt.Errorf("%w: demand %d has %d dimensions, want %d", ErrInvalidInput, d, len(dem.Amount), dims)
		}
		for r, a := range dem.Amount {
			if !nonNegative(a) {
				return 0, fmt.Errorf("%w: demand %d has amount %v in dimension %d", ErrInvalidInput, d, a, r)
			}
		}
		for _, c := range dem.Columns {
			if c < 0 || c >= len(columns) {
				return 0, fmt.Errorf("%w: demand %d allows column %d of %d", ErrInvalidInput, d, c, len(columns))
			}
		}
	}
	return max(dims, 0), nil
}

func nonNegative(v float64) bool { return v >= 0 && !math.IsInf(v, 1) }

// effectiveColumns returns the distinct columns demand d may use that provide every dimension
// it needs, or nil if it needs nothing. It fails when the demand fits on no column. seen has a
// slot per column and must not hold d+1 on entry: it marks the columns seen.
func effectiveColumns(columns []Column, d int, dem Demand, seen []int) ([]int, error) {
	if len(dem.Columns) == 0 {
		return nil, &InfeasibleError{Demand: d, Dimension: -1}
	}
	var need []int
	for r, a := range dem.Amount {
		if a > 0 {
			need = append(need, r)
		}
	}
	if len(need) == 0 {
		return nil, nil
	}
	lacking := make([]int, len(need))
	cols := make([]int, 0, len(dem.Columns))
	distinct := 0
	for _, c := range dem.Columns {
		if seen[c] == d+1 {
			continue
		}
		seen[c] = d + 1
		distinct++
		fits := true
		for i, r := range need {
			if columns[c].Capacity[r] == 0 {
				lacking[i]++
				fits = false
			}
		}
		if fits {
			cols = append(cols, c)
		}
	}
	if len(cols) > 0 {
		return cols, nil
	}
	worst := 0
	for i := range need {
		if lacking[i] > lacking[worst] {
			worst = i
		}
	}
	return nil, &InfeasibleError{Demand: d, Dimension: need[worst], Lacking: lacking[worst], Columns: distinct}
}

// zeroPriceColumn returns one of cols whose price is zero, or -1.
func zeroPriceColumn(columns []Column, cols []int) int {
	for _, c := range cols {
		if columns[c].Price == 0 {
			return c
		}
	}
	return -1
}

// nodesFor returns how many nodes of the given capacity a load needs, fractionally.
func nodesFor(load, capacity []float64) float64 {
	n := 0.0
	for r, l := range load {
		if l > 0 {
			n = math.Max(n, l/capacity[r])
		}
	}
	return n
}

func scaled(v, scale []float64) []float64 {
	out := make([]float64, len(v))
	for r := range v {
		out[r] = v[r] / scale[r]
	}
	return out
}
