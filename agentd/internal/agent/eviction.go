package agent

import (
	"slices"
	"time"

	"github.com/allot/allot/masterd/api"
)

// Eviction for lenders (the seed "oversubscription for reservation", option
// 1: the agent computes the set). A role's idle reservation is lent to other
// frameworks as revocable, not throttleable resources; when the role launches
// on it again, the agent makes room by evicting just enough of the borrowers:
//
//	total ≥ occupied + occupiedRevocable + evicting
//
// total is the agent's resources; occupied what non-revocable tasks hold
// (the new ones included); occupiedRevocable what the running borrowers
// hold; evicting what tasks being killed hold until they are gone. The
// functions here are the pure part of that decision; the agent gathers the
// figures and kills (agent.go, admission).

// evictionCandidate is a running task on lent resources: what it holds of
// the agent's total and when it started.
type evictionCandidate struct {
	ContainerID string
	Held        api.Resources
	StartedAt   time.Time
}

// shortfall is how much of each kind staying needs beyond total: the
// positive part of staying − total, nil when staying fits.
func shortfall(total, staying api.Resources) api.Resources {
	var out api.Resources
	for kind, v := range staying {
		if over := api.RoundScalar(v - total[kind]); over > 0 {
			if out == nil {
				out = api.Resources{}
			}
			out[kind] = over
		}
	}
	return out
}

// exactSearchBudget bounds the subsets chooseEvictions tries when it looks
// for the fewest tasks; past it, a greedy choice (still minimal) is taken.
// Agents with more borrowers than this search allows are rare, and the
// greedy set is never over-evicting, only possibly one task larger.
const exactSearchBudget = 200_000

// chooseEvictions picks the candidates to evict so that what they hold
// covers need (each kind of it). The set is minimal — without any one of
// its tasks it would not cover need — and, within exactSearchBudget, has
// the fewest tasks possible; among sets of that size the youngest tasks go
// first. ok is false when even all candidates do not cover need; chosen is
// then every candidate holding some kind need lacks (the lender still gets
// what can be freed). Indices are into candidates, in ascending order.
func chooseEvictions(need api.Resources, candidates []evictionCandidate) (chosen []int, ok bool) {
	need = positive(need)
	if len(need) == 0 {
		return nil, true
	}
	all := api.Resources{}
	for _, c := range candidates {
		all.Add(c.Held)
	}
	if shortfall(all, need) != nil {
		for i, c := range candidates {
			if holdsAny(c.Held, need) {
				chosen = append(chosen, i)
			}
		}
		return chosen, false
	}
	// Youngest first: a lexicographic walk over this order prefers them.
	order := make([]int, len(candidates))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return candidates[b].StartedAt.Compare(candidates[a].StartedAt)
	})
	kinds := need.Names()
	want := vector(need, kinds)
	held := make([][]float64, len(candidates))
	for i, c := range candidates {
		held[i] = vector(c.Held, kinds)
	}
	set, found := fewestCovering(want, held, order)
	if !found {
		set = greedyCovering(want, held, order)
	}
	slices.Sort(set)
	return set, true
}

// The searches below add resources as vectors over need's kinds: a
// combination costs a few float additions, not a map.

func vector(r api.Resources, kinds []string) []float64 {
	v := make([]float64, len(kinds))
	for i, k := range kinds {
		v[i] = r[k]
	}
	return v
}

// covers reports whether sum holds want in every kind. Values are
// multiples of 0.001 (api.RoundScalar); the tolerance only absorbs the
// float error of adding them.
func covers(sum, want []float64) bool {
	for i := range want {
		if sum[i] < want[i]-1e-6 {
			return false
		}
	}
	return true
}

// fewestCovering tries sets of 1, 2, … tasks, each size's combinations in
// youngest-first lexicographic order, and returns the first that covers
// want; found is false when the budget ran out first. The smallest cover is
// minimal: a cover without one of its tasks would be smaller still.
func fewestCovering(want []float64, held [][]float64, order []int) (set []int, found bool) {
	budget := exactSearchBudget
	n := len(order)
	sum := make([]float64, len(want))
	for k := 1; k <= n; k++ {
		idx := make([]int, k) // positions in order
		for i := range idx {
			idx[i] = i
		}
		for {
			if budget--; budget < 0 {
				return nil, false
			}
			clear(sum)
			for _, p := range idx {
				for j, v := range held[order[p]] {
					sum[j] += v
				}
			}
			if covers(sum, want) {
				for _, p := range idx {
					set = append(set, order[p])
				}
				return set, true
			}
			// Next combination of k positions out of n.
			i := k - 1
			for i >= 0 && idx[i] == n-k+i {
				i--
			}
			if i < 0 {
				break
			}
			idx[i]++
			for j := i + 1; j < k; j++ {
				idx[j] = idx[j-1] + 1
			}
		}
	}
	return nil, false
}

// greedyCovering takes the youngest tasks that free something still
// lacking until want is covered, then gives back every task the others
// cover without, oldest first: the set is minimal.
func greedyCovering(want []float64, held [][]float64, order []int) []int {
	var set []int
	sum := make([]float64, len(want))
	for _, i := range order {
		if covers(sum, want) {
			break
		}
		useful := false
		for j, v := range held[i] {
			if v > 0 && sum[j] < want[j]-1e-6 {
				useful = true
			}
		}
		if !useful {
			continue
		}
		set = append(set, i)
		for j, v := range held[i] {
			sum[j] += v
		}
	}
	without := make([]float64, len(want))
	for p := len(set) - 1; p >= 0; p-- { // set is youngest first: the end is the oldest
		for j := range sum {
			without[j] = sum[j] - held[set[p]][j]
		}
		if covers(without, want) {
			copy(sum, without)
			set = slices.Delete(set, p, p+1)
		}
	}
	return set
}

// positive drops the kinds of r that are not above zero.
func positive(r api.Resources) api.Resources {
	out := api.Resources{}
	for k, v := range r {
		if v > 0 {
			out[k] = v
		}
	}
	return out
}

// holdsAny reports whether held has some of a kind need names.
func holdsAny(held, need api.Resources) bool {
	for k, v := range need {
		if v > 0 && held[k] > 0 {
			return true
		}
	}
	return false
}
