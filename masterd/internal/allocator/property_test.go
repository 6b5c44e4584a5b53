package allocator

import (
	"flag"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
)

// sim plays the leader around an allocator: it keeps its own books of what is
// offered and running (from the offers it received and what it did with
// them), drives random events, and after every cycle checks the allocator's
// decisions against those books alone.
type sim struct {
	t   *testing.T
	a   *Allocator
	rng *rand.Rand
	now time.Time

	kinds      []string
	roles      []string
	agents     map[string]*simAgent
	frameworks map[string]*simFramework
	quotas     map[string][2]api.Resources // guarantees, limits
	lending    map[string]api.Resources    // lending limits; absent: no cap
	offers     []Offer
	tasks      []Offer // launched, one per accepted part
	filters    map[[2]string]simFilter
	nextID     int
	last       string // the last event, for failure messages
	seen       *revocableSeen
}

type simAgent struct {
	total    api.Resources
	reserved map[string]api.Resources
	slack    api.Resources
	active   bool
}

type simFramework struct {
	roles      []string
	suppressed map[string]bool
	active     bool
	revocable  bool // takes revocable resources
}

// simFilter is a decline the allocator must honour: binding only when, at
// the time of the decline, nothing more than refused was free on the agent,
// and only until something there is freed.
type simFilter struct {
	until   time.Time
	binding bool
}

func newSim(t *testing.T, seed int64) *sim {
	rng := rand.New(rand.NewSource(seed))
	s := &sim{
		t:          t,
		a:          New(Options{Seed: uint64(seed)}),
		rng:        rng,
		now:        t0,
		kinds:      []string{"cpus", "mem", "disk"},
		agents:     map[string]*simAgent{},
		frameworks: map[string]*simFramework{},
		quotas:     map[string][2]api.Resources{},
		lending:    map[string]api.Resources{},
		filters:    map[[2]string]simFilter{},
	}
	if rng.Intn(4) == 0 {
		s.kinds = append(s.kinds, "gpus")
	}
	s.roles = []string{"a", "b", "c", "a/x", "a/y", "a/x/deep", "b/z", "*"}
	for i := 0; i < 3+rng.Intn(25); i++ {
		s.addAgent()
	}
	for i := 0; i < 2+rng.Intn(8); i++ {
		s.addFramework()
	}
	for i := 0; i < rng.Intn(5); i++ {
		s.setQuota()
	}
	for i := 0; i < rng.Intn(3); i++ {
		s.setLendingLimit()
	}
	for i := 0; i < rng.Intn(len(s.agents)); i++ {
		s.setSlack()
	}
	return s
}

func (s *sim) id(prefix string) string {
	s.nextID++
	return fmt.Sprintf("%s%d", prefix, s.nextID)
}

func (s *sim) randomResources(scale float64) api.Resources {
	r := api.Resources{}
	for _, k := range s.kinds {
		if s.rng.Intn(5) == 0 {
			continue
		}
		r[k] = api.RoundScalar(s.rng.Float64() * scale * map[string]float64{"cpus": 16, "mem": 4096, "disk": 10000, "gpus": 4}[k])
	}
	return r
}

func (s *sim) policyRole() string {
	for {
		if r := s.roles[s.rng.Intn(len(s.roles))]; r != api.DefaultRole {
			return r
		}
	}
}

func (s *sim) randomReservations(total api.Resources) map[string]api.Resources {
	out := map[string]api.Resources{}
	if s.rng.Intn(3) != 0 {
		return out
	}
	left := total.Clone()
	for i := 0; i < 1+s.rng.Intn(2); i++ {
		r := api.Resources{}
		for _, k := range left.Names() {
			r[k] = api.RoundScalar(left[k] * s.rng.Float64() * 0.5)
		}
		left.Subtract(r)
		out[s.policyRole()] = r
	}
	return out
}

func (s *sim) addAgent() {
	id := s.id("n")
	total := s.randomResources(1)
	reserved := s.randomReservations(total)
	must(s.t, s.a.AddAgent(id, id, total, reserved))
	s.agents[id] = &simAgent{total: total, reserved: reserved, active: true}
}

func (s *sim) addFramework() {
	id := s.id("f")
	var roles []string
	for _, r := range s.rng.Perm(len(s.roles))[:1+s.rng.Intn(2)] {
		roles = append(roles, s.roles[r])
	}
	revocable := s.rng.Intn(2) == 0
	must(s.t, s.a.AddFramework(s.frameworkInfo(id, roles, nil, revocable)))
	s.frameworks[id] = &simFramework{roles: roles, suppressed: map[string]bool{}, active: true, revocable: revocable}
}

func (s *sim) frameworkInfo(id string, roles []string, suppressed map[string]bool, revocable bool) Framework {
	f := Framework{ID: id, Principal: id, Roles: roles}
	for _, r := range roles {
		if suppressed[r] {
			f.SuppressedRoles = append(f.SuppressedRoles, r)
		}
	}
	if revocable {
		f.Capabilities = []string{CapabilityRevocableResources}
	}
	return f
}

// setLendingLimit sets or removes a role's lending limit: none, lend
// nothing, or a random cap on some kinds.
func (s *sim) setLendingLimit() {
	role := s.policyRole()
	var limit api.Resources
	switch s.rng.Intn(4) {
	case 0:
	case 1:
		limit = api.Resources{}
	default:
		limit = s.randomResources(float64(len(s.agents)) / 8)
	}
	must(s.t, s.a.SetLendingLimit(role, limit))
	if limit == nil {
		delete(s.lending, role)
	} else {
		s.lending[role] = limit
	}
}

// setSlack has an agent's estimator report a new estimate, sometimes none.
func (s *sim) setSlack() {
	id := s.randomAgent()
	slack := api.Resources{}
	if s.rng.Intn(3) != 0 {
		slack = s.randomResources(0.5)
	}
	must(s.t, s.a.UpdateSlack(id, slack))
	s.agents[id].slack = slack
}

func (s *sim) setQuota() {
	role := s.policyRole()
	g, l := api.Resources{}, api.Resources{}
	for _, k := range s.kinds {
		scale := map[string]float64{"cpus": 16, "mem": 4096, "disk": 10000, "gpus": 4}[k] * float64(len(s.agents)) / 4
		if s.rng.Intn(2) == 0 {
			g[k] = api.RoundScalar(s.rng.Float64() * scale)
		}
		if s.rng.Intn(2) == 0 {
			l[k] = api.RoundScalar(g[k] + s.rng.Float64()*scale)
		}
	}
	must(s.t, s.a.SetQuota(role, g, l))
	s.quotas[role] = [2]api.Resources{g, l}
}

// inSubtree reports whether role is ancestor or one of its descendants.
func inSubtree(role, ancestor string) bool {
	return role == ancestor || api.IsDescendant(role, ancestor)
}

func (s *sim) allAllocations() []Offer {
	return append(slices.Clone(s.offers), s.tasks...)
}

// ledger sums the sim's books once, so checks do not rescan them.
type ledger struct {
	pool  map[[2]string]api.Resources // agent, pool ("*" or a reservation's role)
	agent map[string]api.Resources
	role  map[string]api.Resources // the role's own allocations
	// Revocable, apart: by agent and lender ("*": usage slack), by lender,
	// by borrowing role, by agent; loansUsed is the part tasks hold.
	loans     map[[2]string]api.Resources
	loansUsed map[[2]string]api.Resources
	lent      map[string]api.Resources
	borrowed  map[string]api.Resources
	revAgent  map[string]api.Resources
}

func (s *sim) ledger() *ledger {
	l := &ledger{
		pool: map[[2]string]api.Resources{}, agent: map[string]api.Resources{}, role: map[string]api.Resources{},
		loans: map[[2]string]api.Resources{}, loansUsed: map[[2]string]api.Resources{}, lent: map[string]api.Resources{},
		borrowed: map[string]api.Resources{}, revAgent: map[string]api.Resources{},
	}
	for i, o := range s.allAllocations() {
		for _, p := range o.Pieces {
			key := [2]string{o.AgentID, p.Role}
			if p.Revocable {
				l.loans[key] = l.loans[key].Add(p.Resources)
				if i >= len(s.offers) {
					l.loansUsed[key] = l.loansUsed[key].Add(p.Resources)
				}
				if p.Role != api.DefaultRole {
					l.lent[p.Role] = l.lent[p.Role].Add(p.Resources)
				}
				l.borrowed[o.Role] = l.borrowed[o.Role].Add(p.Resources)
				l.revAgent[o.AgentID] = l.revAgent[o.AgentID].Add(p.Resources)
				continue
			}
			l.pool[key] = l.pool[key].Add(p.Resources)
			l.agent[o.AgentID] = l.agent[o.AgentID].Add(p.Resources)
			l.role[o.Role] = l.role[o.Role].Add(p.Resources)
		}
	}
	return l
}

func (l *ledger) loan(agent, lender string) api.Resources {
	return l.loans[[2]string{agent, lender}].Clone().Add(nil)
}

// lenders are the roles with loans on the agent, sorted.
func (l *ledger) lenders(agent string) []string {
	var out []string
	for key := range l.loans {
		if key[0] == agent && key[1] != api.DefaultRole {
			out = append(out, key[1])
		}
	}
	slices.Sort(out)
	return out
}

func (l *ledger) poolAllocated(agent, pool string) api.Resources {
	return l.pool[[2]string{agent, pool}].Clone().Add(nil)
}

func (l *ledger) agentAllocated(agent string) api.Resources {
	return l.agent[agent].Clone().Add(nil)
}

// consumed is a role's quota consumption from the sim's books alone.
func (s *sim) consumed(l *ledger, role string) api.Resources {
	out := api.Resources{}
	for r, v := range l.role {
		if inSubtree(r, role) {
			out.Add(v)
		}
	}
	for id, ag := range s.agents {
		for r, amount := range ag.reserved {
			if !inSubtree(r, role) {
				continue
			}
			out.Add(clamp0(amount.Clone().Subtract(l.poolAllocated(id, r))))
		}
	}
	return out
}

// knownRoles are every role the sim named, with their ancestors.
func (s *sim) knownRoles() []string {
	set := map[string]bool{}
	for _, r := range s.roles {
		for {
			set[r] = true
			p, ok := api.ParentRole(r)
			if !ok {
				break
			}
			r = p
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// headroom computes, from the definitions, what unmet guarantees are still
// owed (a subtree needs the larger of its own unmet guarantee and what its
// children need) and what unreserved resources are free on active agents.
func (s *sim) headroom(l *ledger) (required, available api.Resources) {
	roles := s.knownRoles()
	var need func(role string) api.Resources
	need = func(role string) api.Resources {
		children := api.Resources{}
		for _, r := range roles {
			if p, ok := api.ParentRole(r); ok && p == role {
				children.Add(need(r))
			}
		}
		out := children.Clone()
		if q, ok := s.quotas[role]; ok {
			unmet := clamp0(q[0].Clone().Subtract(s.consumed(l, role)))
			for k, v := range unmet {
				out[k] = max(out[k], v)
			}
		}
		return out
	}
	required = api.Resources{}
	for _, r := range roles {
		if _, ok := api.ParentRole(r); !ok {
			required.Add(need(r))
		}
	}
	available = api.Resources{}
	for id, ag := range s.agents {
		if !ag.active {
			continue
		}
		free := ag.total.Clone().Subtract(l.agentAllocated(id))
		unres := s.unreservedPool(l, id)
		for _, k := range s.kinds {
			available[k] = api.RoundScalar(available[k] + max(0, min(unres[k], free[k])))
		}
	}
	return clamp0(required), clamp0(available)
}

// unreservedPool is an agent's total less every reservation (or what is
// allocated from it, when more: a shrunk reservation's tasks still hold their
// resources) and less the unreserved allocations.
func (s *sim) unreservedPool(l *ledger, agent string) api.Resources {
	ag := s.agents[agent]
	pools := map[string]bool{}
	for r := range ag.reserved {
		pools[r] = true
	}
	for key := range l.pool {
		if key[0] == agent && key[1] != api.DefaultRole {
			pools[key[1]] = true
		}
	}
	unres := ag.total.Clone().Subtract(l.poolAllocated(agent, "*"))
	for r := range pools {
		amount, used := ag.reserved[r], l.poolAllocated(agent, r)
		for _, k := range s.kinds {
			unres[k] = api.RoundScalar(unres[k] - max(amount[k], used[k]))
		}
	}
	return unres
}

// cycle runs one allocation cycle and checks every invariant.
func (s *sim) cycle() {
	t := s.t
	l := s.ledger()
	before := map[string]api.Resources{}
	for _, r := range s.knownRoles() {
		before[r] = s.consumed(l, r)
	}
	reqBefore, availBefore := s.headroom(l)
	lBefore := l

	offers := s.a.Allocate(s.now)
	for _, o := range offers {
		f, ag := s.frameworks[o.FrameworkID], s.agents[o.AgentID]
		switch {
		case f == nil || ag == nil:
			t.Fatalf("offer to unknown framework or agent: %+v", o)
		case !f.active || !ag.active:
			t.Fatalf("offer to an inactive framework or agent: %+v", o)
		case !slices.Contains(f.roles, o.Role):
			t.Fatalf("offer for role %q the framework did not subscribe to (%v)", o.Role, f.roles)
		case f.suppressed[o.Role]:
			t.Fatalf("offer for suppressed role %q: %+v", o.Role, o)
		}
		if flt, ok := s.filters[[2]string{o.FrameworkID, o.AgentID}]; ok && flt.binding && s.now.Before(flt.until) {
			t.Fatalf("offer despite a filter until %v (now %v): %+v", flt.until, s.now, o)
		}
		s.checkRevocableOffer(o)
		for _, p := range o.Pieces {
			if !p.Revocable && p.Role != api.DefaultRole && !inSubtree(o.Role, p.Role) {
				t.Fatalf("role %q offered %q's reservation", o.Role, p.Role)
			}
		}
	}
	s.offers = append(s.offers, offers...)

	l = s.ledger()
	for id, ag := range s.agents {
		if got := l.agentAllocated(id); !covers(ag.total, got) {
			t.Fatalf("agent %s over-allocated: %v of %v", id, got, ag.total)
		}
		for r, amount := range ag.reserved {
			after, b := l.poolAllocated(id, r), lBefore.poolAllocated(id, r)
			for k, v := range after {
				if v > amount[k]+1e-6 && v > b[k]+1e-6 {
					t.Fatalf("agent %s: reservation of %s over-allocated: %v of %v (was %v)", id, r, after, amount, b)
				}
			}
		}
	}
	for _, r := range s.knownRoles() {
		after := s.consumed(l, r)
		if q, ok := s.quotas[r]; ok {
			for k, limit := range q[1] {
				// A limit lowered below consumption is past, but the cycle
				// must not push further.
				if after[k] > limit+1e-6 && after[k] > before[r][k]+1e-6 {
					t.Fatalf("role %s past its %s limit %v: %v (was %v)", r, k, limit, after[k], before[r][k])
				}
			}
		}
	}
	s.checkLending(lBefore, l)
	req, avail := s.headroom(l)
	for _, k := range s.kinds {
		shortBefore := min(0, availBefore[k]-reqBefore[k])
		if avail[k]-req[k] < shortBefore-1e-6 {
			t.Fatalf("%s: headroom %v available for %v required, before the cycle %v for %v",
				k, avail[k], req[k], availBefore[k], reqBefore[k])
		}
	}
	s.checkBooks("after the cycle")
	s.checkLiveness()
	s.checkReservedLiveness()
	s.checkRevocableLiveness()
}

// checkReservedLiveness: with no quota and no filter, a reservation with an
// allocatable part free was offered if a framework in its role's subtree
// could take it.
func (s *sim) checkReservedLiveness() {
	if len(s.quotas) > 0 {
		return
	}
	for _, f := range s.filters {
		if s.now.Before(f.until) {
			return
		}
	}
	l := s.ledger()
	for id, ag := range s.agents {
		if !ag.active {
			continue
		}
		free := s.free(l, id)
		for r, amount := range ag.reserved {
			idle := api.Resources{}
			for _, k := range s.kinds {
				idle[k] = max(0, min(amount[k]-l.poolAllocated(id, r)[k], free[k]))
			}
			if !allocatableRes(idle) {
				continue
			}
			for fid, f := range s.frameworks {
				for _, fr := range f.roles {
					if f.active && !f.suppressed[fr] && inSubtree(fr, r) {
						s.t.Fatalf("agent %s keeps %v of %s's reservation free though %s in %s could take it", id, idle, r, fid, fr)
					}
				}
			}
		}
	}
}

// checkBooks compares the allocator's figures with the sim's books.
func (s *sim) checkBooks(when string) {
	t := s.t
	t.Helper()
	if err := s.a.checkInternals(); err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	l := s.ledger()
	req, avail := s.headroom(l)
	c := s.a.Cluster()
	if !sameResources(c.HeadroomRequired, req) || !sameResources(c.HeadroomAvailable, avail) {
		t.Fatalf("%s: allocator headroom %v/%v, books %v/%v", when, c.HeadroomRequired, c.HeadroomAvailable, req, avail)
	}
	for _, r := range s.knownRoles() {
		if got, want := s.a.QuotaConsumed(r), s.consumed(l, r); !sameResources(got, want) {
			t.Fatalf("%s: role %s: allocator says consumed %v, books say %v", when, r, got, want)
		}
	}
	for id := range s.agents {
		st, _ := s.a.Agent(id)
		var offered, used api.Resources
		for _, o := range s.offers {
			if o.AgentID == id {
				offered = offered.Add(sumRegular(o.Pieces))
			}
		}
		for _, o := range s.tasks {
			if o.AgentID == id {
				used = used.Add(sumRegular(o.Pieces))
			}
		}
		if !sameResources(st.Offered, offered) || !sameResources(st.Allocated, used) {
			t.Fatalf("%s: agent %s: allocator says offered %v used %v, books %v %v", when, id, st.Offered, st.Allocated, offered, used)
		}
	}
	s.checkRevocableBooks(l, when)
}

// sumRegular sums the pieces that are not revocable.
func sumRegular(pieces []Piece) api.Resources {
	out := api.Resources{}
	for _, p := range pieces {
		if !p.Revocable {
			out.Add(p.Resources)
		}
	}
	return out
}

// checkLiveness: with no guarantees and no filters, an agent whose
// unreserved resources are free and allocatable was offered if any framework
// could take them (one in a role with no limit on its path).
func (s *sim) checkLiveness() {
	for _, f := range s.filters {
		if s.now.Before(f.until) {
			return
		}
	}
	for _, q := range s.quotas {
		if !q[0].IsZero() {
			return
		}
	}
	taker := false
	for _, f := range s.frameworks {
		if !f.active {
			continue
		}
		for _, r := range f.roles {
			limited := false
			for q, v := range s.quotas {
				if inSubtree(r, q) && len(v[1]) > 0 {
					limited = true
				}
			}
			if !f.suppressed[r] && !limited {
				taker = true
			}
		}
	}
	if !taker {
		return
	}
	l := s.ledger()
	for id, ag := range s.agents {
		if !ag.active {
			continue
		}
		free := ag.total.Clone().Subtract(l.agentAllocated(id))
		unres := s.unreservedPool(l, id)
		for k := range unres {
			unres[k] = max(0, min(unres[k], free[k]))
		}
		if covers(unres, api.Resources{"cpus": 0.01}) || covers(unres, api.Resources{"mem": 32}) {
			s.t.Fatalf("agent %s keeps %v unreserved free though a framework could take it", id, unres)
		}
	}
}

// freed marks filters on an agent as no longer binding: more may be free now.
func (s *sim) freed(agent string) {
	for key, f := range s.filters {
		if key[1] == agent {
			f.binding = false
			s.filters[key] = f
		}
	}
}

func (s *sim) dropFilters(framework string) {
	for key := range s.filters {
		if key[0] == framework {
			delete(s.filters, key)
		}
	}
}

// respond answers each outstanding offer: accept all or part, decline with
// or without a filter, or keep it.
func (s *sim) respond() {
	pending := s.offers
	var keep []Offer
	for i, o := range pending {
		// The books hold every offer but the one being answered.
		s.offers = append(slices.Clone(keep), pending[i+1:]...)
		n := s.rng.Intn(6)
		if o.Pieces[0].Revocable && s.rng.Intn(3) == 0 {
			n = 0 // revocable offers linger more, to be rescinded
		}
		switch n {
		case 0: // keep outstanding
			keep = append(keep, o)
		case 1, 2: // launch everything
			must(s.t, s.a.Launch(o.FrameworkID, o.AgentID, o.Role, o.Pieces))
			s.tasks = append(s.tasks, o)
		case 3: // launch half, hand back the rest
			var task, rest []Piece
			for _, p := range o.Pieces {
				half := api.Resources{}
				for k, v := range p.Resources {
					half[k] = api.RoundScalar(v / 2)
				}
				task = append(task, Piece{Role: p.Role, Revocable: p.Revocable, Throttleable: p.Throttleable, Resources: half})
				rest = append(rest, Piece{Role: p.Role, Revocable: p.Revocable, Throttleable: p.Throttleable, Resources: p.Resources.Clone().Subtract(half)})
			}
			must(s.t, s.a.Launch(o.FrameworkID, o.AgentID, o.Role, task))
			must(s.t, s.a.Recover(o.FrameworkID, o.AgentID, o.Role, rest))
			s.tasks = append(s.tasks, Offer{FrameworkID: o.FrameworkID, AgentID: o.AgentID, Role: o.Role, Pieces: task})
			s.freed(o.AgentID)
		default: // decline, maybe with a filter
			must(s.t, s.a.RecoverOffer(o))
			s.freed(o.AgentID)
			if s.rng.Intn(2) == 0 {
				refused := sumPieces(o.Pieces)
				until := s.now.Add(time.Duration(s.rng.Intn(30)) * time.Second)
				must(s.t, s.a.Decline(o.FrameworkID, o.AgentID, refused, until))
				ag := s.agents[o.AgentID]
				free := ag.total.Clone().Subtract(s.ledger().agentAllocated(o.AgentID))
				s.filters[[2]string{o.FrameworkID, o.AgentID}] = simFilter{until: until, binding: covers(refused, clamp0(free))}
			}
		}
	}
	s.offers = keep
}

// rescind hands back every outstanding offer matching drop, as the leader
// does when an agent or framework goes away.
func (s *sim) rescind(drop func(Offer) bool) {
	var keep []Offer
	for _, o := range s.offers {
		if drop(o) {
			must(s.t, s.a.RecoverOffer(o))
			s.freed(o.AgentID)
			continue
		}
		keep = append(keep, o)
	}
	s.offers = keep
}

func (s *sim) randomAgent() string {
	ids := slices.Sorted(maps.Keys(s.agents))
	return ids[s.rng.Intn(len(ids))]
}

func (s *sim) randomFramework() string {
	ids := slices.Sorted(maps.Keys(s.frameworks))
	return ids[s.rng.Intn(len(ids))]
}

// event applies one random change to the cluster.
func (s *sim) event() {
	n := s.rng.Intn(17)
	s.last = fmt.Sprint(n)
	switch n {
	case 0: // tasks end
		var keep []Offer
		for _, task := range s.tasks {
			if s.rng.Intn(3) == 0 {
				must(s.t, s.a.Release(task.FrameworkID, task.AgentID, task.Role, task.Pieces))
				s.freed(task.AgentID)
				continue
			}
			keep = append(keep, task)
		}
		s.tasks = keep
	case 1: // suppress or revive a role
		id := s.randomFramework()
		f := s.frameworks[id]
		r := f.roles[s.rng.Intn(len(f.roles))]
		if f.suppressed[r] {
			must(s.t, s.a.Revive(id, []string{r}))
			delete(f.suppressed, r)
			s.dropFilters(id)
		} else {
			must(s.t, s.a.Suppress(id, []string{r}))
			f.suppressed[r] = true
		}
	case 2: // an agent disconnects or comes back
		id := s.randomAgent()
		ag := s.agents[id]
		if ag.active {
			s.rescind(func(o Offer) bool { return o.AgentID == id })
			must(s.t, s.a.DeactivateAgent(id))
		} else {
			must(s.t, s.a.ActivateAgent(id))
		}
		ag.active = !ag.active
	case 3: // a framework disconnects or comes back
		id := s.randomFramework()
		f := s.frameworks[id]
		if f.active {
			s.rescind(func(o Offer) bool { return o.FrameworkID == id })
			must(s.t, s.a.DeactivateFramework(id))
			s.dropFilters(id)
		} else {
			must(s.t, s.a.ActivateFramework(id))
		}
		f.active = !f.active
	case 4: // an agent is lost and another joins, with tasks of its own
		if len(s.agents) > 2 {
			id := s.randomAgent()
			s.rescind(func(o Offer) bool { return o.AgentID == id })
			must(s.t, s.a.RemoveAgent(id))
			delete(s.agents, id)
			s.tasks = slices.DeleteFunc(s.tasks, func(o Offer) bool { return o.AgentID == id })
			for key := range s.filters {
				if key[1] == id {
					delete(s.filters, key)
				}
			}
		}
		s.addAgent()
		s.reportTasks()
	case 5: // reservations change
		id := s.randomAgent()
		ag := s.agents[id]
		ag.reserved = s.randomReservations(ag.total)
		must(s.t, s.a.UpdateAgentReservations(id, ag.reserved))
		s.freed(id)
	case 6: // quota set or removed
		if s.rng.Intn(3) == 0 && len(s.quotas) > 0 {
			role := slices.Sorted(maps.Keys(s.quotas))[0]
			s.a.RemoveQuota(role)
			delete(s.quotas, role)
		} else {
			s.setQuota()
		}
	case 7: // weight
		must(s.t, s.a.SetWeight(s.policyRole(), 0.5+s.rng.Float64()*3))
	case 8: // a framework leaves and another subscribes
		if len(s.frameworks) > 1 {
			id := s.randomFramework()
			must(s.t, s.a.RemoveFramework(id))
			delete(s.frameworks, id)
			for _, o := range s.allAllocations() {
				if o.FrameworkID == id {
					s.freed(o.AgentID)
				}
			}
			s.offers = slices.DeleteFunc(s.offers, func(o Offer) bool { return o.FrameworkID == id })
			s.tasks = slices.DeleteFunc(s.tasks, func(o Offer) bool { return o.FrameworkID == id })
			s.dropFilters(id)
		}
		s.addFramework()
	case 9: // an agent re-registers at another size
		id := s.randomAgent()
		ag := s.agents[id]
		total := s.randomResources(1)
		must(s.t, s.a.UpdateAgentTotal(id, total))
		// Over-allocation is only the allocator's fault if it offers more;
		// keep the books honest by growing the total to what is held.
		held := s.ledger().agentAllocated(id)
		for k, v := range held {
			if total[k] < v {
				total[k] = v
			}
		}
		must(s.t, s.a.UpdateAgentTotal(id, total))
		ag.total = total
		s.freed(id)
	case 14: // an estimator reports
		s.setSlack()
	case 15: // a lending limit changes
		s.setLendingLimit()
	case 16: // a framework re-subscribes, taking revocable resources or not
		id := s.randomFramework()
		f := s.frameworks[id]
		f.revocable = !f.revocable
		must(s.t, s.a.UpdateFramework(s.frameworkInfo(id, f.roles, f.suppressed, f.revocable)))
	default: // time passes
		s.now = s.now.Add(time.Duration(s.rng.Intn(20)) * time.Second)
	}
}

// reportTasks has the newest agent report a running task of some framework,
// as after a failover.
func (s *sim) reportTasks() {
	if s.rng.Intn(2) == 0 {
		return
	}
	id := fmt.Sprintf("n%d", s.nextID) // the agent just added
	ag := s.agents[id]
	fid := s.randomFramework()
	f := s.frameworks[fid]
	role := f.roles[0]
	pool := api.DefaultRole
	for _, r := range slices.Sorted(maps.Keys(ag.reserved)) {
		if inSubtree(role, r) {
			pool = r
		}
	}
	available := ag.total.Clone()
	if pool != api.DefaultRole {
		available = ag.reserved[pool].Clone()
	} else {
		for _, amount := range ag.reserved {
			available.Subtract(amount)
		}
	}
	task := api.Resources{}
	for _, k := range available.Names() {
		if v := available[k]; v > 0 {
			task[k] = api.RoundScalar(v * s.rng.Float64())
		}
	}
	pieces := []Piece{{Role: pool, Resources: task}}
	switch s.rng.Intn(4) {
	case 0: // a revocable task on usage slack
		pieces = []Piece{{Role: api.DefaultRole, Revocable: true, Throttleable: true, Resources: task}}
	case 1: // a revocable task on a lent reservation, however idle it is
		if lender := s.policyRole(); !inSubtree(role, lender) {
			pieces = []Piece{{Role: lender, Revocable: true, Resources: task}}
		}
	}
	must(s.t, s.a.AddUsed(fid, id, role, pieces))
	s.tasks = append(s.tasks, Offer{FrameworkID: fid, AgentID: id, Role: role, Pieces: pieces})
}

var propertySeeds = flag.Int("seeds", 100, "random clusters TestProperties plays")

func TestProperties(t *testing.T) {
	seeds, events := *propertySeeds, 50
	if testing.Short() {
		seeds = min(seeds, 20)
	}
	seen := &revocableSeen{}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			s := newSim(t, int64(seed))
			s.seen = seen
			for i := 0; i < events; i++ {
				for j := s.rng.Intn(3); j > 0; j-- {
					s.event()
					s.checkBooks(fmt.Sprintf("event %d.%d (%s)", i, j, s.last))
				}
				s.cycle()
				s.countRevocable()
				s.rescindOverlent()
				s.checkBooks(fmt.Sprintf("rescinds %d", i))
				s.respond()
				s.checkBooks(fmt.Sprintf("responses %d", i))
			}
		})
	}
	if seeds >= 20 {
		seen.check(t)
	}
}
