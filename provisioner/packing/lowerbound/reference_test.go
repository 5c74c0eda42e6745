package lowerbound

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
)

// referenceTolerance is gonum's simplex tolerance on reduced costs.
const referenceTolerance = 1e-10

// standardForm accumulates an LP  min cᵀx s.t. Ax = b, x ≥ 0  column by column.
type standardForm struct {
	rows int
	cost []float64
	cols [][]float64
	b    []float64
}

func (s *standardForm) add(cost float64, col map[int]float64) {
	dense := make([]float64, s.rows)
	for i, v := range col {
		dense[i] = v
	}
	s.cost = append(s.cost, cost)
	s.cols = append(s.cols, dense)
}

// solve solves the LP with gonum. gonum's simplex can stop on a singular basis when a problem
// is degenerate; the variables are then reordered, which changes its pivots and not the LP,
// and it is tried again.
func (s *standardForm) solve() (float64, error) {
	rng := rand.New(rand.NewPCG(uint64(s.rows), uint64(len(s.cols))))
	order := make([]int, len(s.cols))
	for i := range order {
		order[i] = i
	}
	var err error
	for range 10 {
		a := mat.NewDense(s.rows, len(s.cols), nil)
		cost := make([]float64, len(s.cols))
		for j, o := range order {
			cost[j] = s.cost[o]
			for i, v := range s.cols[o] {
				a.Set(i, j, v)
			}
		}
		var opt float64
		opt, _, err = lp.Simplex(cost, a, s.b, referenceTolerance, nil)
		if err == nil || errors.Is(err, lp.ErrInfeasible) || errors.Is(err, lp.ErrUnbounded) {
			return opt, err
		}
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	return 0, err
}

// referenceSolve solves Solve's LP as stated, unreduced, with gonum: variables x_c, f_{d,c}
// and a slack per capacity row; rows Σ_d Amount_{d,r}·f_{d,c} − Capacity_{c,r}·x_c + s = 0
// and Σ_c f_{d,c} = 1.
func referenceSolve(columns []Column, demands []Demand) (float64, error) {
	dims := len(columns[0].Capacity)
	row := func(c, r int) int { return c*dims + r }
	s := &standardForm{rows: len(columns)*dims + len(demands)}
	s.b = make([]float64, s.rows)
	for c, col := range columns {
		entries := map[int]float64{}
		for r, k := range col.Capacity {
			if k > 0 {
				entries[row(c, r)] = -k
			}
		}
		if len(entries) > 0 {
			s.add(col.Price, entries)
		}
		for r := range dims {
			s.add(0, map[int]float64{row(c, r): 1})
		}
	}
	for d, dem := range demands {
		eq := len(columns)*dims + d
		s.b[eq] = 1
		seen := map[int]bool{}
		for _, c := range dem.Columns {
			if seen[c] {
				continue
			}
			seen[c] = true
			entries := map[int]float64{eq: 1}
			for r, a := range dem.Amount {
				if a > 0 {
					entries[row(c, r)] = a
				}
			}
			s.add(0, entries)
		}
	}
	return s.solve()
}

// referenceCover solves ResourcePrices's covering LP with gonum: variables x_c and a surplus
// per dimension; rows Σ_c Capacity_{c,r}·x_c − t_r = amount_r.
func referenceCover(columns []Column, amount []float64) (float64, error) {
	s := &standardForm{rows: len(amount), b: amount}
	for _, col := range columns {
		entries := map[int]float64{}
		for r, k := range col.Capacity {
			if k > 0 {
				entries[r] = k
			}
		}
		if len(entries) > 0 {
			s.add(col.Price, entries)
		}
	}
	for r := range amount {
		s.add(0, map[int]float64{r: -1})
	}
	return s.solve()
}

// referenceWorth returns the most one node of column c can hold at the demands' prices:
// max Σ_d prices_d·g_d s.t. Σ_d g_d·Amount_d ≤ Capacity_c over the demands allowing c. The
// prices are dual feasible when it is at most the column's price.
func referenceWorth(columns []Column, demands []Demand, prices []float64, c int) (float64, error) {
	dims := len(columns[c].Capacity)
	s := &standardForm{rows: dims, b: columns[c].Capacity}
	for d, dem := range demands {
		allowed := false
		for _, a := range dem.Columns {
			allowed = allowed || a == c
		}
		if !allowed || prices[d] == 0 {
			continue
		}
		entries := map[int]float64{}
		for r, a := range dem.Amount {
			if a > 0 {
				entries[r] = a
			}
		}
		s.add(-prices[d], entries)
	}
	for r := range dims {
		s.add(0, map[int]float64{r: 1})
	}
	worth, err := s.solve()
	return -worth, err
}

// referenceFeasible reports whether the demands can be split over the columns so that nodes
// hold them: the primal half of Solve's result.
func referenceFeasible(columns []Column, demands []Demand, nodes []float64) error {
	dims := len(columns[0].Capacity)
	row := func(c, r int) int { return c*dims + r }
	s := &standardForm{rows: len(columns)*dims + len(demands)}
	s.b = make([]float64, s.rows)
	for c, col := range columns {
		for r, k := range col.Capacity {
			// Room for rounding: the split is computed to 1e-9.
			s.b[row(c, r)] = k*nodes[c]*(1+1e-7) + 1e-9
			s.add(0, map[int]float64{row(c, r): 1})
		}
	}
	for d, dem := range demands {
		eq := len(columns)*dims + d
		s.b[eq] = 1
		seen := map[int]bool{}
		for _, c := range dem.Columns {
			if !seen[c] {
				seen[c] = true
				entries := map[int]float64{eq: 1}
				for r, a := range dem.Amount {
					if a > 0 {
						entries[row(c, r)] = a
					}
				}
				s.add(0, entries)
			}
		}
	}
	_, err := s.solve()
	return err
}

// size bounds a random instance.
type size struct{ columns, demands, dims int }

var (
	small  = size{columns: 10, demands: 5, dims: 4}
	larger = size{columns: 30, demands: 8, dims: 5}
)

// randomInstance draws an instance with the structures the reduction looks for: zero
// capacities, scaled and identical copies of columns, zero prices, demands needing nothing.
func randomInstance(rng *rand.Rand, sz size) ([]Column, []Demand) {
	dims := 1 + rng.IntN(sz.dims)
	columns := make([]Column, 1+rng.IntN(sz.columns))
	for c := range columns {
		if c > 0 && rng.IntN(5) == 0 {
			src := columns[rng.IntN(c)]
			f := []float64{1, 1, 2, 0.5, 3}[rng.IntN(5)]
			columns[c] = Column{Price: src.Price * f, Capacity: make([]float64, dims)}
			for r, k := range src.Capacity {
				columns[c].Capacity[r] = k * f
			}
			continue
		}
		col := Column{Price: 0.1 + 5*rng.Float64(), Capacity: make([]float64, dims)}
		if rng.IntN(25) == 0 {
			col.Price = 0
		}
		for r := range dims {
			if rng.IntN(6) > 0 {
				col.Capacity[r] = 1 + 9*rng.Float64()
			}
		}
		col.Capacity[rng.IntN(dims)] = 1 + 9*rng.Float64()
		columns[c] = col
	}
	demands := make([]Demand, 1+rng.IntN(sz.demands))
	for d := range demands {
		dem := Demand{Amount: make([]float64, dims)}
		if rng.IntN(15) > 0 {
			for r := range dims {
				if rng.IntN(5) > 0 {
					dem.Amount[r] = 0.5 + 20*rng.Float64()
				}
			}
		}
		for c := range columns {
			if rng.IntN(3) > 0 {
				dem.Columns = append(dem.Columns, c)
			}
		}
		if len(dem.Columns) == 0 {
			dem.Columns = []int{rng.IntN(len(columns))}
		}
		demands[d] = dem
	}
	return columns, demands
}

func relativeError(got, want float64) float64 {
	return math.Abs(got-want) / math.Max(math.Abs(want), 1e-9)
}

func TestSolveAgreesWithUnreducedReference(t *testing.T) {
	tests := []struct {
		name      string
		size      size
		instances int
	}{
		{name: "small instances", size: small, instances: 400},
		{name: "larger instances", size: larger, instances: 20},
	}
	for n, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(n)))
			feasible := 0
			for i := range tt.instances {
				columns, demands := randomInstance(rng, tt.size)
				if compareWithReference(t, i, columns, demands) {
					feasible++
				}
			}
			if feasible < tt.instances/2 {
				t.Errorf("only %d of %d random instances were feasible", feasible, tt.instances)
			}
		})
	}
}

// compareWithReference checks Solve against the reference on one instance and reports whether
// it was feasible.
func compareWithReference(t *testing.T, n int, columns []Column, demands []Demand) bool {
	t.Helper()
	got, err := Solve(columns, demands)
	want, refErr := referenceSolve(columns, demands)
	if refErr != nil {
		if !errors.Is(refErr, lp.ErrInfeasible) {
			t.Fatalf("instance %d: reference: %v", n, refErr)
		}
		if !IsInfeasibleError(err) {
			t.Errorf("instance %d: reference is infeasible, Solve returned %+v, %v", n, got, err)
		}
		return false
	}
	if err != nil {
		t.Errorf("instance %d: Solve: %v", n, err)
		return true
	}
	if e := relativeError(got.Cost, want); e > 1e-6 {
		t.Errorf("instance %d: cost %v, reference %v (relative error %.2g)", n, got.Cost, want, e)
	}
	checkCertificates(t, n, columns, demands, got)
	return true
}

// checkCertificates checks both halves of a result independently: its nodes cost Cost and can
// hold the demands (primal), its demand prices sum to Cost and no column holds more than its
// price's worth at them (dual).
func checkCertificates(t *testing.T, n int, columns []Column, demands []Demand, got Result) {
	t.Helper()
	price, sum := 0.0, 0.0
	for c, x := range got.Nodes {
		price += columns[c].Price * x
	}
	for _, u := range got.DemandPrices {
		if u < 0 {
			t.Errorf("instance %d: negative demand price in %v", n, got.DemandPrices)
		}
		sum += u
	}
	if e := relativeError(price, got.Cost); e > 1e-6 {
		t.Errorf("instance %d: nodes %v cost %v, want %v", n, got.Nodes, price, got.Cost)
	}
	if e := relativeError(sum, got.Cost); e > 1e-9 {
		t.Errorf("instance %d: demand prices %v sum to %v, want %v", n, got.DemandPrices, sum, got.Cost)
	}
	if err := referenceFeasible(columns, demands, got.Nodes); err != nil {
		t.Errorf("instance %d: nodes %v cannot hold the demands: %v", n, got.Nodes, err)
	}
	for c, col := range columns {
		worth, err := referenceWorth(columns, demands, got.DemandPrices, c)
		if err != nil {
			t.Fatalf("instance %d: worth of column %d: %v", n, c, err)
		}
		if worth > col.Price*(1+1e-9)+1e-12 {
			t.Errorf("instance %d: column %d holds %v at demand prices %v, more than its price %v",
				n, c, worth, got.DemandPrices, col.Price)
		}
	}
}

func TestResourcePricesAgreeWithUnreducedReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for n := range 400 {
		columns, demands := randomInstance(rng, small)
		amount := demands[0].Amount
		got, err := ResourcePrices(columns, amount)
		want, refErr := referenceCover(columns, amount)
		if refErr != nil {
			if !errors.Is(refErr, lp.ErrInfeasible) {
				t.Fatalf("instance %d: reference: %v", n, refErr)
			}
			if !IsInfeasibleError(err) {
				t.Errorf("instance %d: reference is infeasible, ResourcePrices returned %v, %v", n, got, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("instance %d: ResourcePrices: %v", n, err)
			continue
		}
		value := 0.0
		for r, l := range got {
			value += l * amount[r]
			if l < 0 || (amount[r] == 0 && l != 0) {
				t.Errorf("instance %d: prices %v for amount %v", n, got, amount)
			}
		}
		if e := relativeError(value, want); e > 1e-6 {
			t.Errorf("instance %d: prices %v value the amount at %v, reference optimum %v", n, got, value, want)
		}
		for c, col := range columns {
			worth := 0.0
			for r, k := range col.Capacity {
				worth += got[r] * k
			}
			if worth > col.Price*(1+1e-9)+1e-12 {
				t.Errorf("instance %d: column %d is worth %v at prices %v, more than its price %v", n, c, worth, got, col.Price)
			}
		}
	}
}
