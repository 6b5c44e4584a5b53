package allocator

import (
	"maps"
	"math"
	"slices"

	"github.com/allot/allot/masterd/api"
)

// RescindForQuota picks the outstanding offers to rescind when a guarantee is
// set, so that resources sitting in offers can go to the role (the rules of
// Mesos's quota handler):
//   - rescind at least as many unreserved resources as request names
//     (reservations are not considered, as in the capacity heuristic);
//   - once one offer of an agent is rescinded, rescind all of that agent's
//     offers, so the role gets one large offer rather than crumbs;
//   - rescind offers from at least as many agents as the role has
//     frameworks, so each of them can get an offer.
//
// Agents are taken in the order their first offer appears in outstanding. It
// returns indices into outstanding, ascending.
func RescindForQuota(outstanding []Offer, request api.Resources, frameworksInRole int) []int {
	byAgent := map[string][]int{}
	var agents []string
	for i, o := range outstanding {
		if _, ok := byAgent[o.AgentID]; !ok {
			agents = append(agents, o.AgentID)
		}
		byAgent[o.AgentID] = append(byAgent[o.AgentID], i)
	}
	rescinded := api.Resources{}
	var out []int
	done := func(nAgents int) bool {
		return nAgents >= frameworksInRole && rescinded.Contains(request)
	}
	for n, id := range agents {
		if done(n) {
			break
		}
		for _, i := range byAgent[id] {
			out = append(out, i)
			for _, p := range outstanding[i].Pieces {
				if p.Role == api.DefaultRole && !p.Revocable {
					rescinded.Add(p.Resources)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// RescindRevocable picks the outstanding offers to rescind for an over-lent
// agent: whole offers of over's agent holding revocable resources of over's
// kind and lender (any lender when over.Role is empty), as few as cover
// over.Resources (only those pieces count); among as few, the earliest in
// outstanding. When even all of them do not
// cover it, it picks all of them: the rest is held by tasks, which the agent
// evicts. It returns indices into outstanding, ascending.
func RescindRevocable(outstanding []Offer, over Overlent) []int {
	need := toMilli(over.Resources, nil)
	var cands []int
	var values []map[string]int64
	for i, o := range outstanding {
		if o.AgentID != over.AgentID {
			continue
		}
		v := map[string]int64{}
		for _, p := range o.Pieces {
			if p.Revocable && p.Throttleable == over.Throttleable && (over.Role == "" || p.Role == over.Role) {
				v = toMilli(p.Resources, v)
			}
		}
		if !coversAny(v, need) {
			continue
		}
		cands = append(cands, i)
		values = append(values, v)
	}
	if len(need) == 0 || len(cands) == 0 {
		return nil
	}
	covers := func(set []int) bool {
		for name, x := range need {
			var got int64
			for _, j := range set {
				got += values[j][name]
			}
			if got < x {
				return false
			}
		}
		return true
	}
	all := make([]int, len(cands))
	for j := range all {
		all[j] = j
	}
	if !covers(all) {
		return cands
	}
	var picked []int
	if len(cands) <= exactRescindLimit {
		// Few offers (one per framework role and kind on an agent in a
		// cycle): try every set, smallest first, in lexicographic order.
		for k := 1; k <= len(cands) && picked == nil; k++ {
			picked = firstCover(len(cands), k, covers)
		}
	} else {
		picked = greedyCover(values, need, covers)
	}
	out := make([]int, len(picked))
	for i, j := range picked {
		out[i] = cands[j]
	}
	slices.Sort(out)
	return out
}

// exactRescindLimit bounds the exhaustive search (2^n sets) of
// RescindRevocable; past it a greedy pick is pruned instead.
const exactRescindLimit = 16

// firstCover returns the first k-subset of 0..n-1, in lexicographic order,
// that covers, or nil.
func firstCover(n, k int, covers func([]int) bool) []int {
	set := make([]int, k)
	for i := range set {
		set[i] = i
	}
	for {
		if covers(set) {
			return set
		}
		i := k - 1
		for i >= 0 && set[i] == n-k+i {
			i--
		}
		if i < 0 {
			return nil
		}
		set[i]++
		for j := i + 1; j < k; j++ {
			set[j] = set[j-1] + 1
		}
	}
}

// greedyCover picks, while need is not covered, the offer covering the
// largest fraction of what is still needed, then drops any pick the others
// cover without.
func greedyCover(values []map[string]int64, need map[string]int64, covers func([]int) bool) []int {
	left := maps.Clone(need)
	used := make([]bool, len(values))
	var picked []int
	for !covers(picked) {
		best, bestGain := -1, 0.0
		for j, v := range values {
			if used[j] {
				continue
			}
			var gain float64
			for name, x := range left {
				if x > 0 {
					gain += float64(min(x, v[name])) / float64(need[name])
				}
			}
			if gain > bestGain {
				best, bestGain = j, gain
			}
		}
		used[best] = true
		picked = append(picked, best)
		for name := range left {
			left[name] -= values[best][name]
		}
	}
	for i := 0; i < len(picked); {
		without := slices.Delete(slices.Clone(picked), i, i+1)
		if covers(without) {
			picked = without
			continue
		}
		i++
	}
	return picked
}

// toMilli adds r's positive amounts, in thousandths, to into.
func toMilli(r api.Resources, into map[string]int64) map[string]int64 {
	if into == nil {
		into = map[string]int64{}
	}
	for name, x := range r {
		if x > 0 {
			into[name] += int64(math.Round(x * milli))
		}
	}
	return into
}

// coversAny reports whether v holds some of a kind need asks for.
func coversAny(v, need map[string]int64) bool {
	for name := range need {
		if v[name] > 0 {
			return true
		}
	}
	return false
}
