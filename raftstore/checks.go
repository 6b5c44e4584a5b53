package raftstore

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/allot/allot/masterd/api"
)

// Limits on user-supplied numbers that keep arithmetic meaningful.
const (
	maxWeight            = 1e6
	maxQPS               = 1e9
	maxBurstOrCapacity   = 1 << 24
	maxLimitsInConfig    = 100000
	maxFrameworkName     = 256
	shortfallDetailsName = "shortfalls"
)

func invalid(format string, args ...any) *api.Error {
	return api.Errorf(api.CodeInvalidArgument, format, args...)
}

func checkPrecondition(m *WriteMeta, exists bool, version uint64, object string) *api.Error {
	if m.IfNoneMatch && exists {
		return api.Errorf(api.CodePreconditionFailed, "%s already exists at version %d (If-None-Match: *)", object, version)
	}
	if m.IfMatch != 0 {
		if !exists {
			return api.Errorf(api.CodePreconditionFailed, "%s does not exist (If-Match: %d)", object, m.IfMatch)
		}
		if version != m.IfMatch {
			return api.Errorf(api.CodePreconditionFailed, "%s is at version %d, not %d (If-Match)", object, version, m.IfMatch)
		}
	}
	return nil
}

func validResources(field string, r api.Resources) (api.Resources, *api.Error) {
	if err := r.Validate(field); err != nil {
		return nil, invalid("%v", err)
	}
	return r.Normalized(), nil
}

// Check validates c, normalizing it in place, and judges it against s
// without changing anything. It returns the object the write would store
// (with its current version). The server calls it before proposing and for
// dry runs; Apply judges the write again against the state it lands on,
// but does not validate again what Check validated by the store version
// it stamps: change no field of c between the two.
func (s *State) Check(c Command) (any, *api.Error) {
	if e := c.validate(StoreVersion); e != nil {
		return nil, e
	}
	c.meta().validatedBy = StoreVersion
	return s.check(c, StoreVersion)
}

// check judges c against s by the rules of store version rules: the part of
// Check that Apply runs again.
func (s *State) check(c Command, rules uint32) (any, *api.Error) {
	spec, ok := registry[c.Type()]
	if !ok {
		return nil, api.Errorf(api.CodeInternal, "unknown command %T", c)
	}
	return spec.check(s, c, rules)
}

// --- quotas ---

// quotaView is the quota set as it would be after one write: the stored
// quotas with one role replaced or removed. It spares every write a copy of
// the whole map, and readers see the stored map unchanged.
type quotaView struct {
	stored  map[string]api.Quota
	below   map[string]int // State.quotasBelow of stored
	role    string
	value   api.Quota
	present bool // false: the write deletes role
}

func (v quotaView) get(role string) (api.Quota, bool) {
	if role == v.role {
		return v.value, v.present
	}
	q, ok := v.stored[role]
	return q, ok
}

func (v quotaView) each(fn func(role string, q api.Quota)) {
	for role, q := range v.stored {
		if role != v.role {
			fn(role, q)
		}
	}
	if v.present {
		fn(v.role, v.value)
	}
}

func (c *QuotaSet) validate(uint32) *api.Error {
	if err := api.ValidateRole(c.Role); err != nil {
		return invalid("%v", err)
	}
	var e *api.Error
	if c.Guarantees, e = validResources("guarantees", c.Guarantees); e != nil {
		return e
	}
	if c.Limits, e = validResources("limits", c.Limits); e != nil {
		return e
	}
	for _, name := range c.Guarantees.Names() {
		if limit, ok := c.Limits[name]; ok && c.Guarantees[name] > limit {
			return invalid("role %s: guarantee of %s (%s) exceeds its limit (%s)", c.Role, name, plain(c.Guarantees[name]), plain(limit))
		}
	}
	return nil
}

func (s *State) checkQuotaSet(c *QuotaSet, _ uint32) (api.Quota, *api.Error) {
	// Stored objects never share a map with the command (see State).
	guarantees, limits := c.Guarantees.Clone(), c.Limits.Clone()
	old, exists := s.quotas[c.Role]
	if e := checkPrecondition(&c.WriteMeta, exists, old.Version, "quota "+c.Role); e != nil {
		return api.Quota{}, e
	}
	q := api.Quota{Role: c.Role, Guarantees: guarantees, Limits: limits, Version: old.Version}
	next := quotaView{stored: s.quotas, below: s.quotasBelow, role: c.Role, value: q, present: true}
	if e := checkQuotaTree(next, c.Role); e != nil {
		return api.Quota{}, e
	}
	// With the hierarchy rules holding, the guaranteed total can only change
	// through this role's own guarantees: its children's fit inside them.
	if !c.Force && !(guarantees.IsZero() && old.Guarantees.IsZero()) {
		before := quotaView{stored: s.quotas, below: s.quotasBelow}
		if e := checkGuaranteeCapacity(before, next, s.AgentCapacity()); e != nil {
			return api.Quota{}, e
		}
	}
	return q, nil
}

func (s *State) checkQuotaDelete(c *QuotaDelete, _ uint32) (api.Quota, *api.Error) {
	old, exists := s.quotas[c.Role]
	if !exists {
		return api.Quota{}, api.Errorf(api.CodeNotFound, "role %s has no quota", c.Role)
	}
	if e := checkPrecondition(&c.WriteMeta, exists, old.Version, "quota "+c.Role); e != nil {
		return api.Quota{}, e
	}
	next := quotaView{stored: s.quotas, below: s.quotasBelow, role: c.Role}
	// The deleted role's children now count toward its nearest ancestor.
	if ancestor, ok := nearestQuotaAncestor(next, c.Role); ok {
		if e := checkQuotaNode(next, ancestor); e != nil {
			return api.Quota{}, e
		}
	}
	return old, nil
}

// nearestQuotaAncestor returns the closest ancestor of role that has a quota.
func nearestQuotaAncestor(quotas quotaView, role string) (string, bool) {
	for p, ok := api.ParentRole(role); ok; p, ok = api.ParentRole(p) {
		if _, has := quotas.get(p); has {
			return p, true
		}
	}
	return "", false
}

// quotaDescendants returns every role below parent that has a quota, sorted.
func quotaDescendants(quotas quotaView, parent string) []string {
	if quotas.below[parent] == 0 && !(quotas.present && api.IsDescendant(quotas.role, parent)) {
		return nil
	}
	var descendants []string
	quotas.each(func(role string, _ api.Quota) {
		if api.IsDescendant(role, parent) {
			descendants = append(descendants, role)
		}
	})
	sort.Strings(descendants)
	return descendants
}

// checkQuotaTree checks the hierarchy rules around a changed role: against
// the roles below it, and against every ancestor with a quota.
func checkQuotaTree(quotas quotaView, role string) *api.Error {
	if e := checkQuotaNode(quotas, role); e != nil {
		return e
	}
	for ancestor, ok := nearestQuotaAncestor(quotas, role); ok; ancestor, ok = nearestQuotaAncestor(quotas, ancestor) {
		if e := checkQuotaNode(quotas, ancestor); e != nil {
			return e
		}
	}
	return nil
}

// checkQuotaNode checks that no role below parent has a limit above parent's
// and that the guarantees of its children (the roles whose nearest quota
// ancestor it is) fit in parent's. Limits are compared with every descendant,
// not only the children: a role that leaves a resource unlimited is still
// bound by the limit above it, and must not lift that bound for its own
// children.
func checkQuotaNode(quotas quotaView, parent string) *api.Error {
	p, _ := quotas.get(parent)
	limited := p.Limits.Names()
	sum := api.Resources{}
	for _, role := range quotaDescendants(quotas, parent) {
		q, _ := quotas.get(role)
		for _, name := range limited {
			if limit, ok := q.Limits[name]; ok && limit > p.Limits[name] {
				return invalid("role %s: limit of %s (%s) exceeds the limit of role %s above it (%s)",
					role, name, plain(limit), parent, plain(p.Limits[name]))
			}
		}
		if ancestor, _ := nearestQuotaAncestor(quotas, role); ancestor == parent {
			sum.Add(q.Guarantees)
		}
	}
	for _, name := range sum.Names() {
		if sum[name] > p.Guarantees[name] {
			return invalid("role %s: the guarantees of its child roles add up to %s %s, more than its own guarantee of %s",
				parent, plain(sum[name]), name, plain(p.Guarantees[name]))
		}
	}
	return nil
}

// guaranteedTotal sums the guarantees of top-level quotas: a child's guarantee
// is part of its parent's. It sums whole thousandths, which is exact in any
// order, so replicas agree without sorting the roles.
func guaranteedTotal(quotas quotaView) api.Resources {
	milli := map[string]int64{}
	quotas.each(func(role string, q api.Quota) {
		if q.Guarantees.IsZero() {
			return
		}
		if _, ok := nearestQuotaAncestor(quotas, role); !ok {
			for name, v := range q.Guarantees {
				milli[name] += int64(math.Round(v * 1000))
			}
		}
	})
	total := make(api.Resources, len(milli))
	for name, m := range milli {
		total[name] = float64(m) / 1000
	}
	return total
}

// checkGuaranteeCapacity is the capacity heuristic: the guarantees must fit
// the admitted agents. Only resources whose guaranteed total the write raises
// are judged, so that lowering a guarantee on a shrunken cluster still works.
func checkGuaranteeCapacity(before, after quotaView, capacity api.Resources) *api.Error {
	old, next := guaranteedTotal(before), guaranteedTotal(after)
	// The write's own part of the total: its role's guarantee, when no
	// ancestor's guarantee already holds it.
	own := api.Resources{}
	if _, inside := nearestQuotaAncestor(after, after.role); after.present && !inside {
		own = after.value.Guarantees
	}
	var shortfalls []shortfall
	for _, name := range next.Names() {
		if next[name] > capacity[name] && next[name] > old[name] {
			shortfalls = append(shortfalls, shortfall{resource: name, request: own[name],
				others: api.RoundScalar(next[name] - own[name]), capacity: capacity[name]})
		}
	}
	if len(shortfalls) == 0 {
		return nil
	}
	return shortfallError("quota guarantees exceed the cluster's capacity", shortfalls,
		[3]string{"guaranteed to " + after.role, "to other roles", "the admitted agents have"}, "set force to store it anyway")
}

// --- roles ---

func (c *RoleSet) validate(rules uint32) *api.Error {
	if err := api.ValidateRole(c.Role); err != nil {
		return invalid("%v", err)
	}
	if math.IsNaN(c.Weight) || c.Weight <= 0 || c.Weight > maxWeight {
		return invalid("role %s: weight must be greater than 0 and at most %g", c.Role, float64(maxWeight))
	}
	if rules < 2 {
		// A version 1 entry keeps meaning what it did (the leader proposes
		// no empty one under version 1: see neededVersion).
		c.LendingLimit = emptyLendingLimitIsNone(c.LendingLimit)
	}
	if c.LendingLimit != nil {
		// Normalized never returns nil: an empty limit, lend nothing, stays.
		var e *api.Error
		if c.LendingLimit, e = validResources("lending_limit", c.LendingLimit); e != nil {
			return e
		}
	}
	return nil
}

// neededVersion: an empty lending limit (lend nothing) needs version 2,
// since a version 1 server stores it as none (no cap), the opposite.
func (c *RoleSet) neededVersion() (uint32, string) {
	if c.LendingLimit != nil && len(c.LendingLimit) == 0 {
		return 2, "an empty lending_limit (lend nothing)"
	}
	return 1, ""
}

func (s *State) checkRoleSet(c *RoleSet, _ uint32) (RolePolicy, *api.Error) {
	old, exists := s.roles[c.Role]
	if e := checkPrecondition(&c.WriteMeta, exists, old.Version, "role "+c.Role); e != nil {
		return RolePolicy{}, e
	}
	return RolePolicy{Role: c.Role, Weight: c.Weight, LendingLimit: c.LendingLimit.Clone(), Version: old.Version}, nil
}

func (s *State) checkRoleDelete(c *RoleDelete, _ uint32) (RolePolicy, *api.Error) {
	old, exists := s.roles[c.Role]
	if !exists {
		return RolePolicy{}, api.Errorf(api.CodeNotFound, "role %s has no configured weight or lending limit", c.Role)
	}
	if e := checkPrecondition(&c.WriteMeta, exists, old.Version, "role "+c.Role); e != nil {
		return RolePolicy{}, e
	}
	return old, nil
}

// --- reservations ---

func (c *ReservationSet) validate(uint32) *api.Error {
	if err := api.ValidateName("reservation name", c.Name); err != nil {
		return invalid("%v", err)
	}
	if err := api.ValidateName("agent", c.Agent); err != nil {
		return invalid("%v", err)
	}
	if err := api.ValidateRole(c.Role); err != nil {
		return invalid("%v", err)
	}
	var e *api.Error
	if c.Resources, e = validResources("resources", c.Resources); e != nil {
		return e
	}
	if c.Resources.IsZero() {
		return invalid("reservation %s reserves nothing: resources must name at least one amount above 0", c.Name)
	}
	return nil
}

func (s *State) checkReservationSet(c *ReservationSet, _ uint32) (api.Reservation, *api.Error) {
	resources := c.Resources.Clone()
	old, exists := s.reservations[c.Name]
	if e := checkPrecondition(&c.WriteMeta, exists, old.Version, "reservation "+c.Name); e != nil {
		return api.Reservation{}, e
	}
	r := api.Reservation{Name: c.Name, Agent: c.Agent, Role: c.Role, Resources: resources, Version: old.Version, Status: api.ReservationActive}
	agent, ok := s.AgentByName(c.Agent)
	if !ok {
		// Forced, it is stored pending until the agent is admitted (a node
		// provisioned from Terraform before it exists); reservationStatuses
		// makes it active then, if it fits.
		if !c.Force {
			return api.Reservation{}, api.Errorf(api.CodeConflict,
				"agent %s is not admitted (see GET /v1/agents): set force to store reservation %s as pending until it is", c.Agent, c.Name).
				WithDetails(map[string]any{"agent": c.Agent, "reason": "agent_not_admitted"})
		}
		r.Status = api.ReservationPending
		return r, nil
	}
	reserved := api.Resources{}
	for _, other := range s.reservationsOn(c.Agent) {
		if other.Name != c.Name {
			reserved.Add(other.Resources)
		}
	}
	needed := reserved.Clone().Add(resources)
	var shortfalls []shortfall
	for _, name := range resources.Names() {
		if needed[name] > agent.Resources[name] {
			shortfalls = append(shortfalls, shortfall{resource: name, request: resources[name],
				others: reserved[name], capacity: agent.Resources[name]})
		}
	}
	if len(shortfalls) > 0 {
		if !c.Force {
			return api.Reservation{}, shortfallError("reservation "+c.Name+" does not fit on agent "+c.Agent, shortfalls,
				[3]string{"reserved by it", "by other reservations", "the agent has"}, "set force to store it as pending")
		}
		r.Status = api.ReservationPending
	}
	return r, nil
}

func (s *State) checkReservationDelete(c *ReservationDelete, _ uint32) (api.Reservation, *api.Error) {
	old, exists := s.Reservation(c.Name)
	if !exists {
		return api.Reservation{}, api.Errorf(api.CodeNotFound, "reservation %s does not exist", c.Name)
	}
	if e := checkPrecondition(&c.WriteMeta, exists, old.Version, "reservation "+c.Name); e != nil {
		return api.Reservation{}, e
	}
	return old, nil
}

// reservationsOn returns the reservations of an agent in the order they claim
// its resources: oldest change first, then by name.
func (s *State) reservationsOn(agent string) []api.Reservation {
	var out []api.Reservation
	for _, r := range s.reservations {
		if r.Agent == agent {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Version != out[j].Version {
			return out[i].Version < out[j].Version
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// --- rate limits ---

// RateLimitDelete's label, when set, is checked: a delete of a name no
// limit could have is a bad request, not a missing limit.
func (c *RateLimitDelete) validate(uint32) *api.Error {
	if c.Label == "" {
		return nil // as before labels: looked up in the state
	}
	return validRateLimitKey(c.Principal, c.Label)
}

// checkRateLimitValues validates a limit whose defaults have been filled in.
func checkRateLimitValues(what string, qps *float64, burst, capacity int) *api.Error {
	if qps != nil {
		if math.IsNaN(*qps) || math.IsInf(*qps, 0) || *qps <= 0 || *qps > maxQPS {
			return invalid("%s: qps must be greater than 0 and at most %g, or absent to count without throttling", what, float64(maxQPS))
		}
		if burst < 1 || burst > maxBurstOrCapacity {
			return invalid("%s: burst must be between 1 and %d", what, maxBurstOrCapacity)
		}
	} else if burst < 0 || burst > maxBurstOrCapacity {
		return invalid("%s: burst must be between 0 and %d", what, maxBurstOrCapacity)
	}
	if capacity < 0 || capacity > maxBurstOrCapacity {
		return invalid("%s: capacity must be between 0 and %d", what, maxBurstOrCapacity)
	}
	return nil
}

// FillRateLimitDefaults applies the documented defaults: burst max(1, ceil(qps))
// and capacity DefaultRateLimitCapacity.
func FillRateLimitDefaults(qps *float64, burst, capacity *int) (*float64, int, int) {
	b, c := 0, api.DefaultRateLimitCapacity
	if burst != nil {
		b = *burst
	} else if qps != nil && !math.IsNaN(*qps) && *qps > 0 && *qps <= maxQPS {
		// Capped so that a valid qps never gets a default burst the check
		// rejects (maxQPS is above maxBurstOrCapacity).
		b = min(max(1, int(math.Ceil(*qps))), maxBurstOrCapacity)
	}
	if capacity != nil {
		c = *capacity
	}
	return qps, b, c
}

// rateLimitName names a limit in messages: "rate limit spark", "rate limit
// spark (label etl)".
func rateLimitName(principal, label string) string {
	if label == "" {
		return "rate limit " + principal
	}
	return "rate limit " + principal + " (label " + label + ")"
}

// validRateLimitKey checks a limit's principal and, when set, its label.
func validRateLimitKey(principal, label string) *api.Error {
	if err := api.ValidateName("principal", principal); err != nil {
		return invalid("%v", err)
	}
	if label != "" {
		if err := api.ValidateName("label", label); err != nil {
			return invalid("%v", err)
		}
	}
	return nil
}

// labelsNeedVersion3 is the neededVersion of a rate-limit command: a
// version 2 server would drop the label and store the limit as the
// principal's own.
func labelsNeedVersion3(labeled bool) (uint32, string) {
	if labeled {
		return 3, "a label"
	}
	return 1, ""
}

func (c *RateLimitSet) validate(uint32) *api.Error {
	if e := validRateLimitKey(c.Principal, c.Label); e != nil {
		return e
	}
	return checkRateLimitValues(rateLimitName(c.Principal, c.Label), c.QPS, c.Burst, c.Capacity)
}

func (c *RateLimitSet) neededVersion() (uint32, string) { return labelsNeedVersion3(c.Label != "") }

func (s *State) checkRateLimitSet(c *RateLimitSet, _ uint32) (api.RateLimit, *api.Error) {
	old, exists := s.rateLimits[rateLimitKey{c.Principal, c.Label}]
	if e := checkPrecondition(&c.WriteMeta, exists, old.Version, rateLimitName(c.Principal, c.Label)); e != nil {
		return api.RateLimit{}, e
	}
	return api.RateLimit{Principal: c.Principal, Label: c.Label, QPS: c.QPS, Burst: c.Burst, Capacity: c.Capacity, Version: old.Version}, nil
}

func (c *RateLimitDelete) neededVersion() (uint32, string) { return labelsNeedVersion3(c.Label != "") }

func (s *State) checkRateLimitDelete(c *RateLimitDelete, _ uint32) (api.RateLimit, *api.Error) {
	old, exists := s.rateLimits[rateLimitKey{c.Principal, c.Label}]
	if !exists {
		if c.Label != "" {
			return api.RateLimit{}, api.Errorf(api.CodeNotFound, "principal %s has no rate limit for label %s", c.Principal, c.Label)
		}
		return api.RateLimit{}, api.Errorf(api.CodeNotFound, "principal %s has no rate limit", c.Principal)
	}
	if e := checkPrecondition(&c.WriteMeta, exists, old.Version, rateLimitName(c.Principal, c.Label)); e != nil {
		return api.RateLimit{}, e
	}
	return old, nil
}

func (c *RateLimitDefaultSet) validate(uint32) *api.Error {
	return checkRateLimitValues("default rate limit", c.QPS, c.Burst, c.Capacity)
}

func (s *State) checkRateLimitDefaultSet(c *RateLimitDefaultSet, _ uint32) (api.RateLimitDefault, *api.Error) {
	old, exists := s.RateLimitDefault()
	if e := checkPrecondition(&c.WriteMeta, exists, old.Version, "default rate limit"); e != nil {
		return api.RateLimitDefault{}, e
	}
	return api.RateLimitDefault{QPS: c.QPS, Burst: c.Burst, Capacity: c.Capacity, Version: old.Version}, nil
}

func (s *State) checkRateLimitDefaultDelete(c *RateLimitDefaultDelete, _ uint32) (api.RateLimitDefault, *api.Error) {
	old, exists := s.RateLimitDefault()
	if !exists {
		return api.RateLimitDefault{}, api.Errorf(api.CodeNotFound, "no default rate limit is set")
	}
	if e := checkPrecondition(&c.WriteMeta, exists, old.Version, "default rate limit"); e != nil {
		return api.RateLimitDefault{}, e
	}
	return old, nil
}

func (c *RateLimitConfigReplace) validate(uint32) *api.Error {
	if len(c.Limits) > maxLimitsInConfig {
		return invalid("rate limits: at most %d principals", maxLimitsInConfig)
	}
	seen := make(map[rateLimitKey]bool, len(c.Limits))
	for i := range c.Limits {
		l := &c.Limits[i]
		if err := api.ValidateName("principal", l.Principal); err != nil {
			return invalid("limits[%d]: %v", i, err)
		}
		what := l.Principal
		if l.Label != "" {
			if err := api.ValidateName("label", l.Label); err != nil {
				return invalid("limits[%d]: %v", i, err)
			}
			what += ", label " + l.Label
		}
		key := rateLimitKey{l.Principal, l.Label}
		if seen[key] && l.Label != "" {
			return invalid("limits[%d]: principal %s with label %s appears more than once", i, l.Principal, l.Label)
		}
		if seen[key] {
			return invalid("limits[%d]: principal %s appears more than once", i, l.Principal)
		}
		seen[key] = true
		if e := checkRateLimitValues("limits["+fmt.Sprint(i)+"] ("+what+")", l.QPS, l.Burst, l.Capacity); e != nil {
			return e
		}
	}
	if d := c.Default; d != nil {
		return checkRateLimitValues("aggregate default", d.QPS, d.Burst, d.Capacity)
	}
	return nil
}

// neededVersion: any labeled limit needs version 3.
func (c *RateLimitConfigReplace) neededVersion() (uint32, string) {
	return labelsNeedVersion3(slices.ContainsFunc(c.Limits, func(l RateLimitSet) bool { return l.Label != "" }))
}

// checkRateLimitConfigReplace has nothing to judge against the state: the
// configuration replaces whatever is there.
func (s *State) checkRateLimitConfigReplace(c *RateLimitConfigReplace, _ uint32) (*RateLimitConfigReplace, *api.Error) {
	return c, nil
}

// --- agents and servers ---

func (c *AgentAdmit) validate(uint32) *api.Error {
	if err := api.ValidateName("agent id", c.ID); err != nil {
		return invalid("%v", err)
	}
	if err := api.ValidateName("agent name", c.Name); err != nil {
		return invalid("%v", err)
	}
	var e *api.Error
	c.Resources, e = validResources("resources", c.Resources)
	return e
}

func (s *State) checkAgentAdmit(c *AgentAdmit, _ uint32) (AgentRecord, *api.Error) {
	rec := AgentRecord{ID: c.ID, Name: c.Name, Hostname: c.Hostname, Resources: c.Resources.Clone(),
		Capabilities: append([]string(nil), c.Capabilities...), AdmittedAt: c.Time}
	if old, ok := s.AgentByName(c.Name); ok {
		rec.AdmittedAt = old.AdmittedAt
		rec.Version = old.Version
	}
	return rec, nil
}

func (s *State) checkAgentRemove(c *AgentRemove, _ uint32) (AgentRecord, *api.Error) {
	old, ok := s.agents[c.ID]
	if !ok {
		return AgentRecord{}, api.Errorf(api.CodeNotFound, "agent %s is not admitted", c.ID)
	}
	return old, nil
}

func (c *ServerSet) validate(uint32) *api.Error {
	if c.ID == "" || c.RaftAddress == "" || c.APIAddress == "" {
		return invalid("a server needs id, raft_address and api_address")
	}
	return nil
}

func (s *State) checkServerSet(c *ServerSet, _ uint32) (ServerRecord, *api.Error) {
	old := s.servers[c.ID]
	return ServerRecord{ID: c.ID, RaftAddress: c.RaftAddress, APIAddress: c.APIAddress, Version: old.Version}, nil
}

func (s *State) checkServerRemove(c *ServerRemove, _ uint32) (ServerRecord, *api.Error) {
	old, ok := s.servers[c.ID]
	if !ok {
		return ServerRecord{}, api.Errorf(api.CodeNotFound, "server %s is not known", c.ID)
	}
	return old, nil
}

// --- frameworks ---

// frameworkCapabilities are the capabilities the allocator acts on; any other
// is refused so that a misspelt one does not silently do nothing.
var frameworkCapabilities = map[string]bool{api.CapabilityRevocableResources: true}

// maxFrameworkRoles bounds the roles of one framework: each is a node in
// the allocator's role tree.
const maxFrameworkRoles = 128

func (c *FrameworkSet) validate(uint32) *api.Error {
	if err := api.ValidateName("framework id", c.ID); err != nil {
		return invalid("%v", err)
	}
	if c.Name == "" {
		return invalid("framework %s: name must not be empty", c.ID)
	}
	if len(c.Name) > maxFrameworkName {
		return invalid("framework %s: name is longer than %d bytes", c.ID, maxFrameworkName)
	}
	if c.Principal != "" {
		// The principal is a rate-limit key: the same syntax as there.
		if err := api.ValidateName("principal", c.Principal); err != nil {
			return invalid("framework %s: %v", c.ID, err)
		}
	}
	if len(c.Roles) == 0 {
		return invalid("framework %s: roles must name at least one role (%q for the default role)", c.ID, api.DefaultRole)
	}
	if len(c.Roles) > maxFrameworkRoles {
		return invalid("framework %s: at most %d roles, not %d", c.ID, maxFrameworkRoles, len(c.Roles))
	}
	seen := make(map[string]bool, len(c.Roles))
	for i, role := range c.Roles {
		if role != api.DefaultRole {
			if err := api.ValidateRole(role); err != nil {
				return invalid("framework %s: roles[%d]: %v", c.ID, i, err)
			}
		}
		if seen[role] {
			return invalid("framework %s: role %s appears more than once in roles", c.ID, role)
		}
		seen[role] = true
	}
	for i, capability := range c.Capabilities {
		if !frameworkCapabilities[capability] {
			return invalid("framework %s: capabilities[%d]: unknown capability %q (known: %s)",
				c.ID, i, capability, api.CapabilityRevocableResources)
		}
		if slices.Contains(c.Capabilities[:i], capability) {
			return invalid("framework %s: capability %s appears more than once", c.ID, capability)
		}
	}
	if t := c.FailoverTimeoutSeconds; math.IsNaN(t) || math.IsInf(t, 0) || t < 0 {
		return invalid("framework %s: failover_timeout_seconds must be a finite number of seconds, 0 or more", c.ID)
	}
	return nil
}

func (s *State) checkFrameworkSet(c *FrameworkSet, _ uint32) (FrameworkRecord, *api.Error) {
	rec := FrameworkRecord{ID: c.ID, Name: c.Name, Principal: c.Principal, Roles: append([]string(nil), c.Roles...),
		Capabilities: append([]string(nil), c.Capabilities...), FailoverTimeoutSeconds: c.FailoverTimeoutSeconds,
		RegisteredAt: c.Time}
	if old, ok := s.frameworks[c.ID]; ok {
		rec.RegisteredAt = old.RegisteredAt
		rec.Version = old.Version
	}
	return rec, nil
}

func (s *State) checkFrameworkRemove(c *FrameworkRemove, _ uint32) (FrameworkRecord, *api.Error) {
	old, ok := s.frameworks[c.ID]
	if !ok {
		return FrameworkRecord{}, api.Errorf(api.CodeNotFound, "framework %s is not registered", c.ID)
	}
	return old, nil
}

// Commands with no input rules: what they name is looked up in the state.
func (c *QuotaDelete) validate(uint32) *api.Error            { return nil }
func (c *RoleDelete) validate(uint32) *api.Error             { return nil }
func (c *ReservationDelete) validate(uint32) *api.Error      { return nil }
func (c *RateLimitDefaultDelete) validate(uint32) *api.Error { return nil }
func (c *AgentRemove) validate(uint32) *api.Error            { return nil }
func (c *ServerRemove) validate(uint32) *api.Error           { return nil }
func (c *FrameworkRemove) validate(uint32) *api.Error        { return nil }
