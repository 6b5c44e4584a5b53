package allocator

import (
	"fmt"
	"math"

	"github.com/allot/allot/masterd/api"
)

// milli is the fixed point every scalar is kept in. api.Resources are rounded
// to 0.001, so integer thousandths add, subtract and compare exactly: an agent
// is either over-allocated or it is not, with no float tolerance to argue about.
const milli = 1000

// unlimited stands for "no limit" in a room computation; it is larger than any
// amount a validated resource map can hold (1e15 * milli < 2^63).
const unlimited = math.MaxInt64

// vec holds one amount per resource kind, indexed by the kind's id. Kinds are
// interned as they appear, so a vec made before a kind existed is shorter than
// one made after: every read goes through get, which treats the missing tail as
// zero, and every write grows the vec first.
type vec []int64

func (v vec) get(k int) int64 {
	if k < len(v) {
		return v[k]
	}
	return 0
}

func (v *vec) grow(n int) {
	if len(*v) >= n {
		return
	}
	if cap(*v) >= n {
		w := (*v)[:n]
		clear(w[len(*v):])
		*v = w
		return
	}
	w := make(vec, n)
	copy(w, *v)
	*v = w
}

// addScaled adds sign*o to v.
func (v *vec) addScaled(o vec, sign int64) {
	v.grow(len(o))
	w := *v
	for k, x := range o {
		w[k] += sign * x
	}
}

func (v vec) isZero() bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

// contains reports whether v holds at least o of every kind o asks for. Kinds
// o does not ask for are ignored even when v is negative there (an agent that
// shrank under running tasks still has its other kinds to give).
func (v vec) contains(o vec) bool {
	for k, x := range o {
		if x > 0 && v.get(k) < x {
			return false
		}
	}
	return true
}

func (v vec) clone() vec {
	return append(vec(nil), v...)
}

// zeroed returns v resized to n entries, all zero, reusing its storage.
func (v vec) zeroed(n int) vec {
	if cap(v) < n {
		return make(vec, n)
	}
	v = v[:n]
	clear(v)
	return v
}

// kind returns the id of a resource name, interning it on first use.
func (a *Allocator) kind(name string) int {
	if k, ok := a.kindIDs[name]; ok {
		return k
	}
	k := len(a.kindNames)
	a.kindIDs[name] = k
	a.kindNames = append(a.kindNames, name)
	a.invTotal = append(a.invTotal, 0)
	return k
}

// toVec converts a resource map, rejecting values api.Resources.Validate would.
func (a *Allocator) toVec(r api.Resources, field string) (vec, error) {
	for name, x := range r {
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 || x > 1e15 {
			return nil, fmt.Errorf("%s: resource %q: value %v must be finite, non-negative and at most 1e15: %w", field, name, x, ErrInvalid)
		}
		if name == "" {
			return nil, fmt.Errorf("%s: empty resource name: %w", field, ErrInvalid)
		}
	}
	v := make(vec, 0, len(a.kindNames)+len(r))
	for name, x := range r {
		k := a.kind(name)
		v.grow(k + 1)
		v[k] = int64(math.Round(x * milli))
	}
	v.grow(len(a.kindNames))
	return v, nil
}

// toResources converts back, leaving zero amounts out.
func (a *Allocator) toResources(v vec) api.Resources {
	n := 0
	for _, x := range v {
		if x != 0 {
			n++
		}
	}
	out := make(api.Resources, n)
	for k, x := range v {
		if x != 0 {
			out[a.kindNames[k]] = float64(x) / milli
		}
	}
	return out
}

// allocatable reports whether an offer of v is worth making: it must hold at
// least one of the minimum sets (Mesos's min_allocatable_resources), so that
// frameworks are not flooded with offers of a few MiB of disk.
func (a *Allocator) allocatable(v vec) bool {
	if a.minAllocatable == nil {
		for _, x := range v {
			if x > 0 {
				return true
			}
		}
		return false
	}
	for _, min := range a.minAllocatable {
		if v.contains(min) {
			return true
		}
	}
	return false
}

// bitset holds one bit per framework slot.
type bitset []uint64

func (b *bitset) set(i int) {
	for len(*b) <= i/64 {
		*b = append(*b, 0)
	}
	(*b)[i/64] |= 1 << (i % 64)
}

func (b bitset) clear(i int) {
	if i/64 < len(b) {
		b[i/64] &^= 1 << (i % 64)
	}
}

func (b bitset) has(i int) bool {
	return i/64 < len(b) && b[i/64]&(1<<(i%64)) != 0
}

// subsetOf reports whether every bit of b is also set in o.
func (b bitset) subsetOf(o bitset) bool {
	for i, w := range b {
		var ow uint64
		if i < len(o) {
			ow = o[i]
		}
		if w&^ow != 0 {
			return false
		}
	}
	return true
}
