package lowerbound

import "math"

// packer finds the most valuable way to fill one dollar of a column, the pricing problem of the
// column generation:
//
//	max Σ_j u_j·g_j  s.t.  Σ_j g_j·a_{j,r} ≤ κ_r for every row r,  g ≥ 0,
//
// where u are the demands' prices, a their amounts and κ what the dollar provides. It is a
// dense tableau simplex: the problems are tiny (a row per dimension, a variable per demand).
// κ ≥ 0, so the origin is a feasible start and no phase one is needed. Dantzig's rule picks the
// entering variable until a pivot is degenerate, then Bland's rule, which cannot cycle, takes
// over. Its buffers are reused from one call to the next.
type packer struct {
	tab   []float64
	rc    []float64
	basis []int
}

const (
	// pivotTolerance is the smallest tableau entry pivoted on; the amounts are scaled to at
	// most 1, so entries are of order 1.
	pivotTolerance = 1e-11
	// reducedCostTolerance, relative to the largest price, is the smallest improvement a
	// variable must promise to enter.
	reducedCostTolerance = 1e-12
)

// solve returns the optimum and writes an optimal g into g (len n). a holds the amounts row by
// row of variables: a[j*m+r], with m = len(kappa). ok is false if the iteration limit was hit,
// which only numerical trouble should cause.
func (pk *packer) solve(u, a, kappa, g []float64) (value float64, ok bool) {
	n, m := len(u), len(kappa)
	w := n + m + 1
	pk.tab = resize(pk.tab, m*w)
	pk.rc = resize(pk.rc, n+m)
	if cap(pk.basis) < m {
		pk.basis = make([]int, m)
	}
	pk.basis = pk.basis[:m]
	tab, rc, basis := pk.tab, pk.rc, pk.basis
	clear(tab)
	for r := range m {
		row := tab[r*w : (r+1)*w]
		for j := range n {
			row[j] = a[j*m+r]
		}
		row[n+r] = 1
		row[w-1] = kappa[r]
		basis[r] = n + r
	}
	maxU := 0.0
	for j := range n {
		rc[j] = u[j]
		maxU = math.Max(maxU, u[j])
	}
	clear(rc[n:])
	eps := reducedCostTolerance * maxU

	bland := false
	for range 20 * (n + m + 1) {
		q := enteringColumn(rc, eps, bland)
		if q < 0 {
			return pk.optimum(u, g, w), true
		}
		l := -1
		best := math.Inf(1)
		for r := range m {
			if e := tab[r*w+q]; e > pivotTolerance {
				t := math.Max(tab[r*w+w-1], 0) / e
				if t < best || (l >= 0 && t == best && basis[r] < basis[l]) {
					best, l = t, r
				}
			}
		}
		if l < 0 {
			return 0, false // unbounded: impossible, every demand needs some row
		}
		if best == 0 {
			bland = true
		}
		pk.pivot(l, q, w)
	}
	return 0, false
}

// enteringColumn returns the variable to enter the basis (largest reduced cost, or with bland
// the first improving one), or -1 at the optimum.
func enteringColumn(rc []float64, eps float64, bland bool) int {
	q := -1
	for j, v := range rc {
		if v > eps && (q < 0 || v > rc[q]) {
			q = j
			if bland {
				break
			}
		}
	}
	return q
}

func (pk *packer) pivot(l, q, w int) {
	tab, rc := pk.tab, pk.rc
	m := len(pk.basis)
	pr := tab[l*w : (l+1)*w]
	inv := 1 / pr[q]
	for j := range pr {
		pr[j] *= inv
	}
	pr[q] = 1
	for r := range m {
		if r == l {
			continue
		}
		row := tab[r*w : (r+1)*w]
		if f := row[q]; f != 0 {
			for j := range row {
				row[j] -= f * pr[j]
			}
			row[q] = 0
		}
	}
	if f := rc[q]; f != 0 {
		for j := range rc {
			rc[j] -= f * pr[j]
		}
		rc[q] = 0
	}
	pk.basis[l] = q
}

func (pk *packer) optimum(u, g []float64, w int) float64 {
	clear(g)
	value := 0.0
	for r, j := range pk.basis {
		if j < len(u) {
			x := math.Max(pk.tab[r*w+w-1], 0)
			g[j] = x
			value += u[j] * x
		}
	}
	return value
}

func resize(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}
