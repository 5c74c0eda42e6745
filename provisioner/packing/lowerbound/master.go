package lowerbound

import (
	"fmt"
	"math"
	"slices"
)

const (
	// valueTolerance: a pattern enters when it is worth more than 1+valueTolerance dollars per
	// dollar at the current prices. It bounds the relative error of the result.
	valueTolerance = 1e-9
	// poolTolerance is the same for patterns already generated; smaller than valueTolerance so
	// that a pattern the pricing returns is never one the pool already holds.
	poolTolerance = 1e-10
	// refactorEvery pivots the basis inverse is recomputed from scratch, bounding the
	// rounding errors the rank-one updates accumulate.
	refactorEvery = 50
	// maxPivots and maxPasses bound the work; only numerical trouble should reach them.
	maxPivots = 100_000
	maxPasses = 10_000
)

// solution is the optimum of a problem.
type solution struct {
	cost float64
	// prices are the demands' dual prices, summing to cost.
	prices []float64
	// nodes are the nodes bought per caller's column.
	nodes map[int]float64
}

// pattern is one dollar of a column filled with g_i units of each demand i.
type pattern struct {
	col int
	g   []float64
}

// master is the restricted master problem of the column generation,
//
//	min Σ_p λ_p  s.t.  Σ_p g_{p,i}·λ_p − s_i = 1 for every demand i,  λ, s ≥ 0,
//
// over the patterns generated so far, solved by a revised simplex that keeps the basis inverse
// explicitly (the basis is at most about 30 × 30). Variables 0..m-1 are the surplus variables
// s_i, variable m+p is pattern p of the pool. Patterns only ever join, so the current basis
// stays feasible and each solve starts where the last one stopped.
type master struct {
	m     int
	binv  []float64
	xb    []float64
	basis []int
	pool  []pattern
	u     []float64
	// a and w are scratch: an entering column and its image under B⁻¹.
	a []float64
	w []float64
	// bland switches to Bland's rule after a run of degenerate pivots, against cycling.
	bland      bool
	degenerate int
	since      int
}

// solve runs the column generation to optimality and certifies the bound.
func (p *problem) solve() (solution, error) {
	m := len(p.amounts)
	sol := solution{prices: make([]float64, m), nodes: map[int]float64{}}
	if m == 0 {
		return sol, nil
	}
	s := p.initialMaster()
	pr := &pricer{}
	best := make([]candidate, 0, max(m, 4))
	pivots := 0
	for passes := 0; ; {
		s.duals()
		if q := s.entering(); q >= 0 {
			if pivots++; pivots > maxPivots {
				return solution{}, fmt.Errorf("%w: %d pivots", ErrNotConverged, pivots)
			}
			if err := s.step(q); err != nil {
				return solution{}, err
			}
			continue
		}
		if err := s.refactor(); err != nil {
			return solution{}, err
		}
		s.duals()
		u := make([]float64, m)
		for i, v := range s.u {
			u[i] = math.Max(v, 0)
		}
		worth, cands, err := p.price(u, pr, best[:0])
		if err != nil {
			return solution{}, err
		}
		if len(cands) == 0 {
			return p.certified(s, u, worth), nil
		}
		if passes++; passes > maxPasses {
			return solution{}, fmt.Errorf("%w: %d pricing passes", ErrNotConverged, passes)
		}
		for _, c := range cands {
			s.pool = append(s.pool, pattern{col: c.col, g: slices.Clone(c.g)})
		}
		best = cands
	}
}

// initialMaster starts from the best single-demand pattern of every demand: a diagonal, feasible
// basis. Every demand has one, since it fits on at least one priced column and reduction keeps
// a column at least as good.
func (p *problem) initialMaster() *master {
	m := len(p.amounts)
	s := &master{
		m:     m,
		binv:  make([]float64, m*m),
		xb:    make([]float64, m),
		basis: make([]int, m),
		u:     make([]float64, m),
		a:     make([]float64, m),
		w:     make([]float64, m),
	}
	rate := make([]float64, m)
	col := make([]int, m)
	for _, cl := range p.classes {
		for _, i := range cl.demands {
			for _, c := range cl.cols {
				if v := singleRate(p.cols[c].kappa, p.amounts[i]); v > rate[i] {
					rate[i], col[i] = v, c
				}
			}
		}
	}
	for i := range m {
		g := make([]float64, m)
		g[i] = rate[i]
		s.pool = append(s.pool, pattern{col: col[i], g: g})
		s.basis[i] = m + i
		s.binv[i*m+i] = 1 / rate[i]
		s.xb[i] = 1 / rate[i]
	}
	return s
}

// singleRate returns how many units of a demand one dollar of a column holds on its own.
func singleRate(kappa, amount []float64) float64 {
	v := math.Inf(1)
	for r, a := range amount {
		if a > 0 {
			v = math.Min(v, kappa[r]/a)
		}
	}
	return v
}

// certified turns the final prices into the bound. worth is the most any dollar of any column
// is worth at prices u when that is more than a dollar (within valueTolerance, since the
// pricing found nothing better); dividing u by it makes u dual feasible even though tolerances
// stopped the simplex a little early, so the result is a lower bound by weak duality. The
// nodes are the master's primal solution.
func (p *problem) certified(s *master, u []float64, worth float64) solution {
	scale := math.Max(1, worth)
	sol := solution{prices: make([]float64, s.m), nodes: map[int]float64{}}
	for i, v := range u {
		sol.prices[i] = v / scale
		sol.cost += sol.prices[i]
	}
	for i, v := range s.basis {
		if v >= s.m && s.xb[i] > 0 {
			col := p.cols[s.pool[v-s.m].col]
			sol.nodes[col.index] += s.xb[i] / col.price
		}
	}
	return sol
}

// column writes variable v's constraint column into out.
func (s *master) column(v int, out []float64) {
	if v < s.m {
		clear(out)
		out[v] = -1
		return
	}
	copy(out, s.pool[v-s.m].g)
}

func (s *master) cost(v int) float64 {
	if v < s.m {
		return 0
	}
	return 1
}

// duals computes the demands' prices u = c_Bᵀ·B⁻¹.
func (s *master) duals() {
	m := s.m
	clear(s.u)
	for i, v := range s.basis {
		if c := s.cost(v); c != 0 {
			row := s.binv[i*m : (i+1)*m]
			for j := range m {
				s.u[j] += c * row[j]
			}
		}
	}
}

// entering returns the variable with the most negative reduced cost (with Bland's rule, the
// first with a negative one), or -1 when the pool holds none.
func (s *master) entering() int {
	maxU := 0.0
	for _, v := range s.u {
		maxU = math.Max(maxU, math.Abs(v))
	}
	q, best := -1, 0.0
	consider := func(v int, rc, tol float64) bool {
		if rc < -tol && (q < 0 || rc < best) {
			q, best = v, rc
			return s.bland
		}
		return false
	}
	for i, v := range s.u {
		if consider(i, v, poolTolerance*maxU) {
			return q
		}
	}
	for k, pat := range s.pool {
		rc := 1.0
		for i, g := range pat.g {
			rc -= s.u[i] * g
		}
		if consider(s.m+k, rc, poolTolerance) {
			return q
		}
	}
	return q
}

// step brings variable q into the basis.
func (s *master) step(q int) error {
	m := s.m
	s.column(q, s.a)
	maxW := 0.0
	for i := range m {
		row := s.binv[i*m : (i+1)*m]
		w := 0.0
		for j, a := range s.a {
			w += row[j] * a
		}
		s.w[i] = w
		maxW = math.Max(maxW, math.Abs(w))
	}
	l := s.leaving(maxW)
	if l < 0 {
		// No row limits the step: the LP would be unbounded, impossible as its cost is
		// non-negative, so the inverse has drifted.
		return fmt.Errorf("%w: no leaving variable", ErrNotConverged)
	}
	t := math.Max(s.xb[l], 0) / s.w[l]
	if t <= 0 {
		s.degenerate++
		s.bland = s.bland || s.degenerate > m
	} else {
		s.degenerate, s.bland = 0, false
	}
	s.pivot(l, q, t)
	if s.since++; s.since >= refactorEvery {
		return s.refactor()
	}
	return nil
}

// leaving returns the row whose variable leaves: the smallest ratio, ties broken by the larger
// pivot element, or with Bland's rule by the smaller variable.
func (s *master) leaving(maxW float64) int {
	l, best := -1, math.Inf(1)
	for i, w := range s.w {
		if w <= 1e-9*maxW {
			continue
		}
		t := math.Max(s.xb[i], 0) / w
		switch {
		case l < 0 || t < best*(1-1e-12):
			l, best = i, t
		case t <= best*(1+1e-12):
			if (s.bland && s.basis[i] < s.basis[l]) || (!s.bland && w > s.w[l]) {
				l, best = i, math.Min(t, best)
			}
		}
	}
	return l
}

func (s *master) pivot(l, q int, t float64) {
	m := s.m
	for i := range m {
		s.xb[i] -= t * s.w[i]
	}
	s.xb[l] = t
	pr := s.binv[l*m : (l+1)*m]
	inv := 1 / s.w[l]
	for j := range pr {
		pr[j] *= inv
	}
	for i := range m {
		if i == l || s.w[i] == 0 {
			continue
		}
		row, f := s.binv[i*m:(i+1)*m], s.w[i]
		for j := range row {
			row[j] -= f * pr[j]
		}
	}
	s.basis[l] = q
}

// refactor recomputes the basis inverse by Gauss–Jordan elimination with partial pivoting, and
// the basic values from it.
func (s *master) refactor() error {
	m := s.m
	aug := make([]float64, m*2*m)
	col := make([]float64, m)
	for j, v := range s.basis {
		s.column(v, col)
		for i := range m {
			aug[i*2*m+j] = col[i]
		}
	}
	for i := range m {
		aug[i*2*m+m+i] = 1
	}
	if !gaussJordan(aug, m) {
		return fmt.Errorf("%w: singular basis", ErrNotConverged)
	}
	for i := range m {
		copy(s.binv[i*m:(i+1)*m], aug[i*2*m+m:(i+1)*2*m])
		x := 0.0
		for _, b := range s.binv[i*m : (i+1)*m] {
			x += b
		}
		s.xb[i] = x
	}
	s.since = 0
	return nil
}

// gaussJordan reduces the m × 2m row-major matrix [B | I] to [I | B⁻¹], reporting false if B
// is singular.
func gaussJordan(aug []float64, m int) bool {
	w := 2 * m
	for k := range m {
		p := k
		for i := k + 1; i < m; i++ {
			if math.Abs(aug[i*w+k]) > math.Abs(aug[p*w+k]) {
				p = i
			}
		}
		if aug[p*w+k] == 0 {
			return false
		}
		if p != k {
			for j := range w {
				aug[k*w+j], aug[p*w+j] = aug[p*w+j], aug[k*w+j]
			}
		}
		pr := aug[k*w : (k+1)*w]
		inv := 1 / pr[k]
		for j := range pr {
			pr[j] *= inv
		}
		for i := range m {
			if i == k {
				continue
			}
			row := aug[i*w : (i+1)*w]
			if f := row[k]; f != 0 {
				for j := range row {
					row[j] -= f * pr[j]
				}
			}
		}
	}
	return true
}
