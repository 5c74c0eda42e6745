package packing

// numbering gives distinct strings dense numbers from 0, in the order they are first seen,
// so that caches keyed by them can be slices indexed by number. (unique.Handle interns too,
// but its handles are no indices.)
type numbering map[string]int

// of is the number of s, given it now if it has none.
func (n numbering) of(s string) int {
	id, ok := n[s]
	if !ok {
		id = len(n)
		n[s] = id
	}
	return id
}
