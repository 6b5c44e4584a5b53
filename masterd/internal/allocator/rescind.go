package allocator

import (
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
