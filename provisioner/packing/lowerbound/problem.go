package lowerbound

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// builder collects the demands the LP prices (positive amount, no zero-price column) and the
// columns each may use.
type builder struct {
	columns int
	dims    int
	// demands is the caller's index of each demand the LP prices.
	demands []int
	// amounts are the demands' scaled amounts.
	amounts [][]float64
	// cols are the columns each demand may use, all priced and providing what it needs.
	cols [][]int
}

func newBuilder(columns, dims int) *builder {
	return &builder{columns: columns, dims: dims}
}

func (b *builder) addDemand(index int, amount []float64, cols []int) {
	b.demands = append(b.demands, index)
	b.amounts = append(b.amounts, amount)
	b.cols = append(b.cols, cols)
}

// problem is the relaxation reduced to what its optimum depends on: per priced column, what one
// dollar of it provides, grouped by the set of demands it may serve.
type problem struct {
	dims    int
	amounts [][]float64
	cols    []column
	classes []class
}

// column is a caller's column as the LP sees it.
type column struct {
	index int
	price float64
	// kappa is the scaled capacity per unit of price, in every dimension.
	kappa []float64
	class int
}

// class is a set of demands that some columns, and only they, may all serve.
type class struct {
	set     []uint64
	demands []int
	// dims are the dimensions some of the demands need: the only ones that constrain how the
	// class's columns are filled.
	dims []int
	// front is the class's Pareto front while columns are offered.
	front []column
	// cols index problem.cols, once reduced.
	cols []int
}

// problem groups the columns by the demands they may serve, normalises them per dollar and
// drops the dominated ones.
func (b *builder) problem(columns []Column, scale []float64) *problem {
	p := &problem{dims: b.dims, amounts: b.amounts}
	words := (len(b.demands) + 63) / 64
	sets := make([]uint64, b.columns*words)
	for i, cols := range b.cols {
		for _, c := range cols {
			sets[c*words+i/64] |= 1 << (i % 64)
		}
	}
	byKey := map[string]int{}
	key := make([]byte, 8*words)
	kappa := make([]float64, b.dims)
	for c := range b.columns {
		set := sets[c*words : (c+1)*words]
		if isEmpty(set) {
			continue
		}
		for w, v := range set {
			binary.LittleEndian.PutUint64(key[8*w:], v)
		}
		k, ok := byKey[string(key)]
		if !ok {
			k = len(p.classes)
			byKey[string(key)] = k
			p.classes = append(p.classes, p.newClass(set))
		}
		price := columns[c].Price
		for r, capacity := range columns[c].Capacity {
			kappa[r] = capacity / (scale[r] * price)
		}
		p.classes[k].offer(c, price, kappa)
	}
	p.reduce()
	return p
}

func (p *problem) newClass(set []uint64) class {
	cl := class{set: slices.Clone(set)}
	need := make([]bool, p.dims)
	for w, v := range set {
		for v != 0 {
			i := 64*w + bits.TrailingZeros64(v)
			v &= v - 1
			cl.demands = append(cl.demands, i)
			for r, a := range p.amounts[i] {
				need[r] = need[r] || a > 0
			}
		}
	}
	for r, n := range need {
		if n {
			cl.dims = append(cl.dims, r)
		}
	}
	return cl
}

// offer adds a column to the class's Pareto front on the class's dimensions, unless a member
// covers it; members it covers leave. A column can only be dominated by one that may serve at
// least the same demands and buys at least as much per dollar in every dimension they need:
// whatever a dollar of the first holds, a dollar of the second holds too. Of identical columns
// the first offered stays. The front stays small on real catalogs (a few columns per class), so
// checking every offer against it is cheap and needs no sorting.
func (cl *class) offer(index int, price float64, kappa []float64) {
	for _, f := range cl.front {
		if covers(f.kappa, kappa, cl.dims) {
			return
		}
	}
	kept := cl.front[:0]
	for _, f := range cl.front {
		if !covers(kappa, f.kappa, cl.dims) {
			kept = append(kept, f)
		}
	}
	kept = append(kept, column{index: index, price: price, kappa: slices.Clone(kappa)})
	cl.front = kept
}

// reduce drops the front members of each class that a front member of a class with strictly
// more demands dominates on the first class's dimensions (so that of identical columns, the
// one that may serve more demands wins), and lays the survivors out in problem.cols. Looking
// at fronts is enough: whatever dominates a column is, or is dominated by, a front member of
// its own class.
func (p *problem) reduce() {
	var supers []int
	for k := range p.classes {
		cl := &p.classes[k]
		supers = supers[:0]
		for o := range p.classes {
			if len(p.classes[o].demands) > len(cl.demands) && strictSubset(cl.set, p.classes[o].set) {
				supers = append(supers, o)
			}
		}
		for _, col := range cl.front {
			if p.dominatedByAny(col, cl.dims, supers) {
				continue
			}
			col.class = k
			cl.cols = append(cl.cols, len(p.cols))
			p.cols = append(p.cols, col)
		}
	}
	for k := range p.classes {
		p.classes[k].front = nil
	}
}

// dominatedByAny reports whether a front member of one of the classes covers col on dims.
func (p *problem) dominatedByAny(col column, dims, classes []int) bool {
	for _, k := range classes {
		for _, f := range p.classes[k].front {
			if covers(f.kappa, col.kappa, dims) {
				return true
			}
		}
	}
	return false
}

// covers reports whether a ≥ b in every one of dims.
func covers(a, b []float64, dims []int) bool {
	for _, r := range dims {
		if a[r] < b[r] {
			return false
		}
	}
	return true
}

func isEmpty(set []uint64) bool {
	for _, v := range set {
		if v != 0 {
			return false
		}
	}
	return true
}

// strictSubset reports whether a ⊊ b.
func strictSubset(a, b []uint64) bool {
	equal := true
	for w := range a {
		if a[w]&^b[w] != 0 {
			return false
		}
		equal = equal && a[w] == b[w]
	}
	return !equal
}
