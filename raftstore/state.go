package raftstore

import (
	"encoding/json"
	"sort"
	"time"

	"github.com/allot/allot/masterd/api"
)

// MaxAuditEntries is how many audit entries the state keeps; older ones are
// dropped as new ones arrive.
const MaxAuditEntries = 10000

// RolePolicy is the configured weight and lending limit of a role.
type RolePolicy struct {
	Role   string  `json:"role"`
	Weight float64 `json:"weight"`
	// LendingLimit nil is no cap, empty is lend nothing (store version 2).
	// MarshalJSON omits it only when nil (lending.go).
	LendingLimit api.Resources `json:"lending_limit"`
	Version      uint64        `json:"version"`
}

// AgentRecord is an admitted agent in the registry.
type AgentRecord struct {
	ID           string        `json:"id"`
	Name         string        `json:"name"`
	Hostname     string        `json:"hostname"`
	Resources    api.Resources `json:"resources"`
	Capabilities []string      `json:"capabilities,omitempty"`
	AdmittedAt   time.Time     `json:"admitted_at"`
	Version      uint64        `json:"version"`
}

// FrameworkRecord is a subscribed framework in the registry.
type FrameworkRecord struct {
	ID                     string   `json:"id"`
	Name                   string   `json:"name"`
	Principal              string   `json:"principal,omitempty"`
	Roles                  []string `json:"roles"`
	Capabilities           []string `json:"capabilities,omitempty"`
	FailoverTimeoutSeconds float64  `json:"failover_timeout_seconds,omitempty"`
	// RegisteredAt is when the framework first subscribed; re-subscriptions
	// keep it.
	RegisteredAt time.Time `json:"registered_at"`
	Version      uint64    `json:"version"`
}

// ServerRecord is a Raft server's addresses.
type ServerRecord struct {
	ID          string `json:"id"`
	RaftAddress string `json:"raft_address"`
	APIAddress  string `json:"api_address"`
	Version     uint64 `json:"version"`
}

// State is the replicated state. Objects stored in it are never modified in
// place (every change stores a new value with new maps), so a shallow copy of
// the maps is a consistent snapshot and readers may keep what they read.
type State struct {
	quotas map[string]api.Quota
	// quotasBelow counts, for every role path, the quotas strictly below it,
	// so that a write to a leaf role need not scan every quota for children.
	quotasBelow      map[string]int
	roles            map[string]RolePolicy
	reservations     map[string]api.Reservation
	rateLimits       map[rateLimitKey]api.RateLimit
	rateLimitDefault *api.RateLimitDefault
	agents           map[string]AgentRecord     // by id
	agentIDs         map[string]string          // name → id
	frameworks       map[string]FrameworkRecord // by id
	servers          map[string]ServerRecord
	aclPolicies      map[string]api.ACLPolicy
	aclTokens        map[string]aclToken // by accessor
	aclBootstrapped  bool
	audit            []api.AuditEntry // oldest first
	index            uint64
	rulesVersion     uint32 // see RulesVersion
}

// NewState returns an empty state.
func NewState() *State {
	return &State{
		quotas:       map[string]api.Quota{},
		quotasBelow:  map[string]int{},
		roles:        map[string]RolePolicy{},
		reservations: map[string]api.Reservation{},
		rateLimits:   map[rateLimitKey]api.RateLimit{},
		agents:       map[string]AgentRecord{},
		agentIDs:     map[string]string{},
		frameworks:   map[string]FrameworkRecord{},
		servers:      map[string]ServerRecord{},
		aclPolicies:  map[string]api.ACLPolicy{},
		aclTokens:    map[string]aclToken{},
	}
}

// clone returns a copy that later changes to s do not affect.
func (s *State) clone() *State {
	c := &State{
		quotas:           cloneMap(s.quotas),
		quotasBelow:      cloneMap(s.quotasBelow),
		roles:            cloneMap(s.roles),
		reservations:     cloneMap(s.reservations),
		rateLimits:       cloneMap(s.rateLimits),
		rateLimitDefault: s.rateLimitDefault,
		agents:           cloneMap(s.agents),
		agentIDs:         cloneMap(s.agentIDs),
		frameworks:       cloneMap(s.frameworks),
		servers:          cloneMap(s.servers),
		aclPolicies:      cloneMap(s.aclPolicies),
		aclTokens:        cloneMap(s.aclTokens),
		aclBootstrapped:  s.aclBootstrapped,
		audit:            s.audit[:len(s.audit):len(s.audit)],
		index:            s.index,
		rulesVersion:     s.rulesVersion,
	}
	return c
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// putQuota stores q, keeping quotasBelow current.
func (s *State) putQuota(q api.Quota) {
	if _, existed := s.quotas[q.Role]; !existed {
		for p, ok := api.ParentRole(q.Role); ok; p, ok = api.ParentRole(p) {
			s.quotasBelow[p]++
		}
	}
	s.quotas[q.Role] = q
}

// deleteQuota removes role's quota, keeping quotasBelow current.
func (s *State) deleteQuota(role string) {
	if _, existed := s.quotas[role]; !existed {
		return
	}
	delete(s.quotas, role)
	for p, ok := api.ParentRole(role); ok; p, ok = api.ParentRole(p) {
		if s.quotasBelow[p]--; s.quotasBelow[p] == 0 {
			delete(s.quotasBelow, p)
		}
	}
}

// Index is the Raft index of the last command applied.
func (s *State) Index() uint64 { return s.index }

// Quota returns the quota of role.
func (s *State) Quota(role string) (api.Quota, bool) {
	q, ok := s.quotas[role]
	return q, ok
}

// Quotas returns every quota, sorted by role.
func (s *State) Quotas() []api.Quota {
	out := make([]api.Quota, 0, len(s.quotas))
	for _, k := range sortedKeys(s.quotas) {
		out = append(out, s.quotas[k])
	}
	return out
}

// RolePolicy returns a role's configured policy, or the default policy with
// version 0 when it was never configured.
func (s *State) RolePolicy(role string) (RolePolicy, bool) {
	p, ok := s.roles[role]
	if !ok {
		return RolePolicy{Role: role, Weight: api.DefaultWeight}, false
	}
	return p, true
}

// RolePolicies returns every configured role policy, sorted by role.
func (s *State) RolePolicies() []RolePolicy {
	out := make([]RolePolicy, 0, len(s.roles))
	for _, k := range sortedKeys(s.roles) {
		out = append(out, s.roles[k])
	}
	return out
}

// Reservation returns one reservation, with its status.
func (s *State) Reservation(name string) (api.Reservation, bool) {
	r, ok := s.reservations[name]
	if ok {
		r.Status = s.reservationStatuses(r.Agent)[name]
	}
	return r, ok
}

// Reservations returns every reservation, sorted by name, with its status.
func (s *State) Reservations() []api.Reservation {
	statuses := map[string]map[string]string{} // agent → reservation → status
	out := make([]api.Reservation, 0, len(s.reservations))
	for _, k := range sortedKeys(s.reservations) {
		r := s.reservations[k]
		if statuses[r.Agent] == nil {
			statuses[r.Agent] = s.reservationStatuses(r.Agent)
		}
		r.Status = statuses[r.Agent][r.Name]
		out = append(out, r)
	}
	return out
}

// reservationStatuses derives the status of an agent's reservations: they
// claim the agent's resources in order (oldest change first), each one that
// still fits is active and the others are pending — all of them while the
// agent is not admitted (a reservation forced before its node exists).
//
// The status is derived when read, never stored: it follows agents being
// admitted, resized, renamed or removed without a write of its own, and a
// replica that replays the log cannot disagree about it.
func (s *State) reservationStatuses(agent string) map[string]string {
	free := api.Resources{}
	if a, ok := s.AgentByName(agent); ok {
		free = a.Resources.Clone()
	}
	out := map[string]string{}
	for _, r := range s.reservationsOn(agent) {
		out[r.Name] = api.ReservationPending
		if free.Contains(r.Resources) {
			out[r.Name] = api.ReservationActive
			free.Subtract(r.Resources)
		}
	}
	return out
}

// rateLimitKey names a rate limit: a principal's own (label "") or that of
// the principal's frameworks with one label (store version 3).
type rateLimitKey struct{ principal, label string }

// RateLimit returns one principal's own limit (not a labeled one).
func (s *State) RateLimit(principal string) (api.RateLimit, bool) {
	return s.LabeledRateLimit(principal, "")
}

// LabeledRateLimit returns the limit of principal's frameworks labeled
// label; label "" is the principal's own limit.
func (s *State) LabeledRateLimit(principal, label string) (api.RateLimit, bool) {
	r, ok := s.rateLimits[rateLimitKey{principal, label}]
	return r, ok
}

// RateLimits returns every limit, the principals' own and the labeled ones
// (Label set), sorted by principal, then label (a principal's own first).
func (s *State) RateLimits() []api.RateLimit {
	out := make([]api.RateLimit, 0, len(s.rateLimits))
	for _, l := range s.rateLimits {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Principal != out[j].Principal {
			return out[i].Principal < out[j].Principal
		}
		return out[i].Label < out[j].Label
	})
	return out
}

// RateLimitDefault returns the aggregate default limit, if one is set.
func (s *State) RateLimitDefault() (api.RateLimitDefault, bool) {
	if s.rateLimitDefault == nil {
		return api.RateLimitDefault{}, false
	}
	return *s.rateLimitDefault, true
}

// Agent returns an admitted agent by id.
func (s *State) Agent(id string) (AgentRecord, bool) {
	a, ok := s.agents[id]
	return a, ok
}

// AgentByName returns an admitted agent by name.
func (s *State) AgentByName(name string) (AgentRecord, bool) {
	id, ok := s.agentIDs[name]
	if !ok {
		return AgentRecord{}, false
	}
	return s.agents[id], true
}

// Agents returns every admitted agent, sorted by name.
func (s *State) Agents() []AgentRecord {
	out := make([]AgentRecord, 0, len(s.agents))
	for _, name := range sortedKeys(s.agentIDs) {
		out = append(out, s.agents[s.agentIDs[name]])
	}
	return out
}

// AgentCapacity is the sum of every admitted agent's resources.
func (s *State) AgentCapacity() api.Resources {
	// Sum in a fixed order: float addition is not associative, and replicas
	// must reach the same capacity decisions.
	total := api.Resources{}
	for _, id := range sortedKeys(s.agents) {
		total.Add(s.agents[id].Resources)
	}
	return total
}

// Framework returns a registered framework by id.
func (s *State) Framework(id string) (FrameworkRecord, bool) {
	f, ok := s.frameworks[id]
	return f, ok
}

// Frameworks returns every registered framework, sorted by id.
func (s *State) Frameworks() []FrameworkRecord {
	out := make([]FrameworkRecord, 0, len(s.frameworks))
	for _, k := range sortedKeys(s.frameworks) {
		out = append(out, s.frameworks[k])
	}
	return out
}

// Server returns a Raft server's addresses.
func (s *State) Server(id string) (ServerRecord, bool) {
	r, ok := s.servers[id]
	return r, ok
}

// Servers returns every known server, sorted by id.
func (s *State) Servers() []ServerRecord {
	out := make([]ServerRecord, 0, len(s.servers))
	for _, k := range sortedKeys(s.servers) {
		out = append(out, s.servers[k])
	}
	return out
}

// Audit returns up to limit audit entries with an index above after, oldest first.
func (s *State) Audit(after uint64, limit int) []api.AuditEntry {
	i := sort.Search(len(s.audit), func(i int) bool { return s.audit[i].Index > after })
	end := len(s.audit)
	if limit > 0 && end-i > limit {
		end = i + limit
	}
	return append([]api.AuditEntry(nil), s.audit[i:end]...)
}

func (s *State) appendAudit(index uint64, m *WriteMeta, action, object string, before, after any) {
	s.audit = append(s.audit, api.AuditEntry{
		Index:     index,
		Time:      m.Time,
		Principal: m.Principal,
		Action:    action,
		Object:    object,
		Before:    auditJSON(before),
		After:     auditJSON(after),
	})
	if len(s.audit) > MaxAuditEntries {
		s.audit = s.audit[len(s.audit)-MaxAuditEntries:]
	}
}

// auditJSON renders an object for the audit trail; encoding/json sorts map
// keys, so every replica writes the same bytes.
func auditJSON(v any) json.RawMessage {
	if v == nil {
		return json.RawMessage("null")
	}
	b, err := json.Marshal(v)
	if err != nil {
		// Every audited value is a plain struct of strings and numbers.
		panic("audit: " + err.Error())
	}
	return b
}
