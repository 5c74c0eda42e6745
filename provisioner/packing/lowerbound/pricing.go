package lowerbound

import (
	"fmt"
	"math"
)

// candidate is a pattern worth more than a dollar at the current prices.
type candidate struct {
	col   int
	value float64
	g     []float64
}

// pricer holds the pricing's buffers, set up once per class and pass.
type pricer struct {
	pk packer
	// act are the class's demands with a positive price, rows the dimensions they need.
	act  []int
	rows []int
	u    []float64
	a    []float64
	// bound[r] is the largest price per unit of row r among act: one dollar of a column holds
	// at most κ_r·bound[r] worth in row r alone, so min_r κ_r·bound[r] bounds its value.
	bound []float64
	kappa []float64
	g     []float64
}

// price returns the most a dollar of any column is worth at prices u, or 0 if none is worth
// more than a dollar, and the patterns worth more than 1+valueTolerance, at most cap(best) of
// them, most valuable first. Columns whose bound says they are worth at most a dollar are
// skipped: near the optimum, most of them.
func (p *problem) price(u []float64, pr *pricer, best []candidate) (float64, []candidate, error) {
	worth := 0.0
	for k := range p.classes {
		cl := &p.classes[k]
		if !pr.prepare(cl, u, p.amounts) {
			continue
		}
		for _, c := range cl.cols {
			kappa := p.cols[c].kappa
			bound := math.Inf(1)
			for r, d := range pr.rows {
				pr.kappa[r] = kappa[d]
				if !math.IsInf(pr.bound[r], 1) {
					bound = math.Min(bound, kappa[d]*pr.bound[r])
				}
			}
			if bound <= 1 {
				continue
			}
			v, ok := pr.pk.solve(pr.u, pr.a, pr.kappa, pr.g)
			if !ok {
				return 0, nil, fmt.Errorf("%w: pricing column %d", ErrNotConverged, p.cols[c].index)
			}
			worth = math.Max(worth, v)
			if v > 1+valueTolerance {
				best = pr.offer(best, c, v, len(u))
			}
		}
	}
	return worth, best, nil
}

// prepare sets the buffers up for class cl, and reports false if none of its demands has a
// positive price, so that its columns are worth nothing.
func (pr *pricer) prepare(cl *class, u []float64, amounts [][]float64) bool {
	pr.act = pr.act[:0]
	for _, i := range cl.demands {
		if u[i] > 0 {
			pr.act = append(pr.act, i)
		}
	}
	if len(pr.act) == 0 {
		return false
	}
	pr.rows = pr.rows[:0]
	for _, r := range cl.dims {
		for _, i := range pr.act {
			if amounts[i][r] > 0 {
				pr.rows = append(pr.rows, r)
				break
			}
		}
	}
	n, m := len(pr.act), len(pr.rows)
	pr.u = resize(pr.u, n)
	pr.a = resize(pr.a, n*m)
	pr.bound = resize(pr.bound, m)
	pr.kappa = resize(pr.kappa, m)
	pr.g = resize(pr.g, n)
	clear(pr.bound)
	for j, i := range pr.act {
		pr.u[j] = u[i]
		for r, d := range pr.rows {
			a := amounts[i][d]
			pr.a[j*m+r] = a
			if a == 0 {
				pr.bound[r] = math.Inf(1)
			} else {
				pr.bound[r] = math.Max(pr.bound[r], u[i]/a)
			}
		}
	}
	return true
}

// offer adds the pattern in pr.g for column c, worth v, to best if it is among the cap(best)
// most valuable, keeping best sorted by decreasing value.
func (pr *pricer) offer(best []candidate, c int, v float64, m int) []candidate {
	if len(best) == cap(best) {
		if v <= best[len(best)-1].value {
			return best
		}
		best = best[:len(best)-1]
	}
	best = best[:len(best)+1]
	e := &best[len(best)-1]
	e.col, e.value = c, v
	e.g = resize(e.g, m)
	clear(e.g)
	for j, i := range pr.act {
		e.g[i] = pr.g[j]
	}
	for k := len(best) - 1; k > 0 && best[k].value > best[k-1].value; k-- {
		best[k], best[k-1] = best[k-1], best[k]
	}
	return best
}
