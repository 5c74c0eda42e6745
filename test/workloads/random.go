package workloads

import (
	"math/bits"
	"sort"
)

// pythonRandom reproduces CPython's random.Random (the MT19937 Mersenne Twister, seeded and
// drawn from exactly as CPython does), so that the workloads stay the ones the project's
// figures were measured on, first made by a Python generator.
type pythonRandom struct {
	state [mtN]uint32
	index int
}

const (
	mtN         = 624
	mtM         = 397
	mtMatrixA   = 0x9908b0df
	mtUpperMask = 0x80000000
	mtLowerMask = 0x7fffffff
)

// newPythonRandom returns the generator of random.Random(seed). CPython seeds from the
// seed's absolute value, split into 32-bit words, least significant first.
func newPythonRandom(seed int64) *pythonRandom {
	n := uint64(seed)
	if seed < 0 {
		n = -n
	}
	key := []uint32{uint32(n)}
	if hi := uint32(n >> 32); hi != 0 {
		key = append(key, hi)
	}
	r := &pythonRandom{}
	r.initByArray(key)
	return r
}

// initGenrand is MT19937's init_genrand.
func (r *pythonRandom) initGenrand(s uint32) {
	r.state[0] = s
	for i := 1; i < mtN; i++ {
		r.state[i] = 1812433253*(r.state[i-1]^(r.state[i-1]>>30)) + uint32(i)
	}
	r.index = mtN
}

// initByArray is MT19937's init_by_array.
func (r *pythonRandom) initByArray(key []uint32) {
	r.initGenrand(19650218)
	mt := &r.state
	i, j := 1, 0
	for k := max(mtN, len(key)); k > 0; k-- {
		mt[i] = (mt[i] ^ ((mt[i-1] ^ (mt[i-1] >> 30)) * 1664525)) + key[j] + uint32(j)
		i++
		j++
		if i >= mtN {
			mt[0] = mt[mtN-1]
			i = 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k := mtN - 1; k > 0; k-- {
		mt[i] = (mt[i] ^ ((mt[i-1] ^ (mt[i-1] >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= mtN {
			mt[0] = mt[mtN-1]
			i = 1
		}
	}
	mt[0] = 0x80000000
}

// genrand32 is MT19937's genrand_uint32: the next 32 random bits.
func (r *pythonRandom) genrand32() uint32 {
	if r.index >= mtN {
		r.twist()
	}
	y := r.state[r.index]
	r.index++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

// twist is MT19937's regeneration of the whole state, in place.
func (r *pythonRandom) twist() {
	mt := &r.state
	for kk := range mtN {
		y := (mt[kk] & mtUpperMask) | (mt[(kk+1)%mtN] & mtLowerMask)
		mt[kk] = mt[(kk+mtM)%mtN] ^ (y >> 1) ^ (y&1)*mtMatrixA
	}
	r.index = 0
}

// random is random.random(): a float in [0, 1) of 53 random bits, from two draws.
func (r *pythonRandom) random() float64 {
	a, b := r.genrand32()>>5, r.genrand32()>>6
	return (float64(a)*67108864 + float64(b)) / 9007199254740992
}

// getrandbits is random.getrandbits(k) for k up to 64: whole 32-bit draws fill the low
// words first, and the last draw gives its top bits.
func (r *pythonRandom) getrandbits(k int) uint64 {
	var out uint64
	for shift := 0; k > 0; shift += 32 {
		w := r.genrand32()
		if k < 32 {
			w >>= 32 - k
		}
		out |= uint64(w) << shift
		k -= 32
	}
	return out
}

// below is random._randbelow(n) for n > 0: getrandbits of n's bit length until the
// draw is below n.
func (r *pythonRandom) below(n int) int {
	k := bits.Len(uint(n))
	v := r.getrandbits(k)
	for v >= uint64(n) {
		v = r.getrandbits(k)
	}
	return int(v)
}

// choice is random.choice(seq).
func choice[T any](r *pythonRandom, seq []T) T {
	return seq[r.below(len(seq))]
}

// weightedChoice is random.choices(population, weights)[0]: a bisection of the cumulative
// weights at random() times their total.
func weightedChoice[T any](r *pythonRandom, population []T, weights []int) T {
	cum := make([]float64, len(weights))
	total := 0
	for i, w := range weights {
		total += w
		cum[i] = float64(total)
	}
	x := r.random() * cum[len(cum)-1]
	// bisect_right(cum, x, 0, len(cum)-1): the first cumulative weight above x.
	return population[sort.Search(len(cum)-1, func(i int) bool { return cum[i] > x })]
}
