package agent

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// borrowers are candidates started one minute apart, the first the oldest.
func borrowers(held ...api.Resources) []evictionCandidate {
	out := make([]evictionCandidate, len(held))
	for i, h := range held {
		out[i] = evictionCandidate{ContainerID: fmt.Sprintf("c%d", i), Held: h, StartedAt: epoch.Add(time.Duration(i) * time.Minute)}
	}
	return out
}

func cpus(n float64) api.Resources { return api.Resources{"cpus": n} }

func TestChooseEvictions(t *testing.T) {
	for name, c := range map[string]struct {
		need       api.Resources
		candidates []evictionCandidate
		want       []int
		ok         bool
	}{
		"nothing needed":                   {need: nil, candidates: borrowers(cpus(1)), want: nil, ok: true},
		"need zero or negative":            {need: api.Resources{"cpus": 0, "mem": -5}, candidates: borrowers(cpus(1)), want: nil, ok: true},
		"youngest of equals":               {need: cpus(1), candidates: borrowers(cpus(1), cpus(1), cpus(1)), want: []int{2}, ok: true},
		"one big beats several small":      {need: cpus(3), candidates: borrowers(cpus(4), cpus(1), cpus(1), cpus(1)), want: []int{0}, ok: true},
		"youngest pair of the fewest":      {need: cpus(2), candidates: borrowers(cpus(1), cpus(1), cpus(1)), want: []int{1, 2}, ok: true},
		"exact fit":                        {need: cpus(1.5), candidates: borrowers(cpus(0.5), cpus(1), cpus(0.5)), want: []int{1, 2}, ok: true},
		"fixed point sums":                 {need: cpus(0.3), candidates: borrowers(cpus(0.1), cpus(0.1), cpus(0.1)), want: []int{0, 1, 2}, ok: true},
		"a youngster too small is skipped": {need: cpus(2), candidates: borrowers(cpus(2), cpus(0.5)), want: []int{0}, ok: true},
		"two kinds, one task each": {
			need:       api.Resources{"cpus": 1, "mem": 512},
			candidates: borrowers(api.Resources{"cpus": 2, "mem": 64}, api.Resources{"cpus": 0.1, "mem": 1024}, api.Resources{"cpus": 0.1, "mem": 64}),
			want:       []int{0, 1}, ok: true,
		},
		"one task covering both kinds": {
			need:       api.Resources{"cpus": 1, "mem": 512},
			candidates: borrowers(api.Resources{"cpus": 2, "mem": 64}, api.Resources{"cpus": 0.1, "mem": 1024}, api.Resources{"cpus": 1, "mem": 512}),
			want:       []int{2}, ok: true,
		},
		"not enough: every holder of the lacking kind": {
			need:       api.Resources{"cpus": 4},
			candidates: borrowers(api.Resources{"cpus": 1, "mem": 10}, api.Resources{"mem": 100}, api.Resources{"cpus": 2}),
			want:       []int{0, 2}, ok: false,
		},
		"no candidates": {need: cpus(1), candidates: nil, want: nil, ok: false},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := chooseEvictions(c.need, c.candidates)
			if ok != c.ok || !slices.Equal(got, c.want) {
				t.Errorf("chooseEvictions(%v) = %v, %v; want %v, %v", c.need, got, ok, c.want, c.ok)
			}
		})
	}
}

func TestShortfall(t *testing.T) {
	total := api.Resources{"cpus": 4, "mem": 1024}
	for name, c := range map[string]struct {
		staying, want api.Resources
	}{
		"fits":            {staying: api.Resources{"cpus": 4, "mem": 1000}, want: nil},
		"cpus over":       {staying: api.Resources{"cpus": 4.5, "mem": 1000}, want: api.Resources{"cpus": 0.5}},
		"unknown kind":    {staying: api.Resources{"gpus": 1}, want: api.Resources{"gpus": 1}},
		"float residue":   {staying: api.Resources{"cpus": 0.1 + 0.2 + 3.7}, want: nil},
		"both kinds over": {staying: api.Resources{"cpus": 5, "mem": 2048}, want: api.Resources{"cpus": 1, "mem": 1024}},
	} {
		if got := shortfall(total, c.staying); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: shortfall = %v, want %v", name, got, c.want)
		}
	}
}

// Property: on random borrowers and needs (seeded; the seed is logged), the
// chosen set covers the need whenever all candidates do, no task in it
// could be spared, it has the fewest tasks possible, and among sets of that
// size it is the one that takes the youngest tasks first.
func TestChooseEvictionsProperties(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for round := range 3000 {
		n := rng.IntN(9)
		held := make([]api.Resources, n)
		for i := range held {
			held[i] = api.Resources{"cpus": float64(rng.IntN(8)) / 4, "mem": float64(rng.IntN(6) * 64)}
		}
		candidates := borrowers(held...)
		rng.Shuffle(len(candidates), func(i, j int) { candidates[i], candidates[j] = candidates[j], candidates[i] })
		need := api.Resources{"cpus": float64(rng.IntN(12)) / 4, "mem": float64(rng.IntN(12) * 64)}
		got, ok := chooseEvictions(need, candidates)
		where := fmt.Sprintf("round %d (seed %d): need %v from %v: chose %v", round, seed, need, candidates, got)

		all := sumOf(candidates, allIndices(n))
		if ok != (shortfall(all, need) == nil) {
			t.Fatalf("%s: ok %v, but all candidates hold %v", where, ok, all)
		}
		if !ok {
			continue
		}
		if s := shortfall(sumOf(candidates, got), need); s != nil {
			t.Fatalf("%s: frees too little, short %v", where, s)
		}
		for i := range got {
			if shortfall(sumOf(candidates, slices.Delete(slices.Clone(got), i, i+1)), need) == nil {
				t.Fatalf("%s: over-evicts: %s could be spared", where, candidates[got[i]].ContainerID)
			}
		}
		if best := bruteForceFewest(need, candidates); !slices.Equal(best, got) {
			t.Fatalf("%s: want %v (fewest tasks, youngest first)", where, best)
		}
	}
}

// Property: the greedy fallback (for agents with more borrowers than the
// exact search's budget) covers and never over-evicts either.
func TestGreedyCoveringProperties(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for round := range 2000 {
		n := 1 + rng.IntN(60)
		held := make([]api.Resources, n)
		for i := range held {
			held[i] = api.Resources{"cpus": float64(rng.IntN(8)) / 8, "mem": float64(rng.IntN(8) * 32)}
		}
		candidates := borrowers(held...)
		all := sumOf(candidates, allIndices(n))
		need := api.Resources{"cpus": all["cpus"] * rng.Float64(), "mem": all["mem"] * rng.Float64()}.Normalized()
		kinds := need.Names()
		want := vector(need, kinds)
		vecs := make([][]float64, n)
		for i, c := range candidates {
			vecs[i] = vector(c.Held, kinds)
		}
		order := allIndices(n)
		slices.Reverse(order) // youngest first
		got := greedyCovering(want, vecs, order)
		where := fmt.Sprintf("round %d (seed %d): need %v, chose %v", round, seed, need, got)
		if s := shortfall(sumOf(candidates, got), need); s != nil {
			t.Fatalf("%s: frees too little, short %v", where, s)
		}
		for i := range got {
			if shortfall(sumOf(candidates, slices.Delete(slices.Clone(got), i, i+1)), need) == nil {
				t.Fatalf("%s: over-evicts: %d could be spared", where, got[i])
			}
		}
	}
}

// Many borrowers: the exact search gives up within its budget and the
// answer is still a minimal cover, quickly.
func TestChooseEvictionsManyBorrowers(t *testing.T) {
	held := make([]api.Resources, 200)
	for i := range held {
		held[i] = api.Resources{"cpus": 0.1, "mem": 16}
	}
	got, ok := chooseEvictions(api.Resources{"cpus": 5, "mem": 800}, borrowers(held...))
	if !ok || len(got) != 50 {
		t.Fatalf("chose %d tasks (ok %v), want 50", len(got), ok)
	}
	for _, i := range got {
		if i < 150 {
			t.Fatalf("chose %d: want the 50 youngest", i)
		}
	}
}

func allIndices(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func sumOf(candidates []evictionCandidate, set []int) api.Resources {
	sum := api.Resources{}
	for _, i := range set {
		sum.Add(candidates[i].Held)
	}
	return sum
}

// bruteForceFewest is the specification: of all covering subsets, those
// with the fewest tasks; of those, the one whose tasks, youngest first,
// compare first (younger first, position by position).
func bruteForceFewest(need api.Resources, candidates []evictionCandidate) []int {
	var best []int
	var bestKey []time.Time
	found := false
	for mask := 0; mask < 1<<len(candidates); mask++ {
		var set []int
		for i := range candidates {
			if mask&(1<<i) != 0 {
				set = append(set, i)
			}
		}
		if shortfall(sumOf(candidates, set), need) != nil {
			continue
		}
		key := make([]time.Time, len(set))
		for i, j := range set {
			key[i] = candidates[j].StartedAt
		}
		slices.SortFunc(key, func(a, b time.Time) int { return b.Compare(a) })
		better := !found || len(set) < len(best) ||
			len(set) == len(best) && slices.CompareFunc(key, bestKey, func(a, b time.Time) int { return b.Compare(a) }) < 0
		if better {
			best, bestKey, found = set, key, true
		}
	}
	return best
}
