package allocator

import (
	"math"
	"testing"

	"github.com/allot/allot/masterd/api"
)

// res parses "cpus:4;mem:1024"; "" is empty.
func res(t testing.TB, s string) api.Resources {
	t.Helper()
	r, err := api.ParseResources(s)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return r
}

// sameResources compares ignoring zero entries and rounding noise.
func sameResources(a, b api.Resources) bool {
	for k, v := range a {
		if math.Abs(v-b[k]) > 1e-6 {
			return false
		}
	}
	for k, v := range b {
		if math.Abs(v-a[k]) > 1e-6 {
			return false
		}
	}
	return true
}

// covers reports whether a holds at least b of everything, with rounding
// noise forgiven.
func covers(a, b api.Resources) bool {
	for k, v := range b {
		if a[k] < v-1e-6 {
			return false
		}
	}
	return true
}

func sumPieces(pieces []Piece) api.Resources {
	out := api.Resources{}
	for _, p := range pieces {
		out.Add(p.Resources)
	}
	return out
}

func clamp0(r api.Resources) api.Resources {
	out := api.Resources{}
	for k, v := range r {
		if v > 0 {
			out[k] = v
		}
	}
	return out
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
