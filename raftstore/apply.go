package raftstore

import (
	"github.com/allot/allot/masterd/api"
)

// Result is what applying a command answers through ApplyFuture.Response().
type Result struct {
	Index uint64
	// Object is the stored object (for a delete, the object as it was).
	Object any
	// Err is a business rejection; nothing was changed.
	Err *api.Error
}

// apply judges c against the state and, when it passes, changes the state
// and records the change in the audit trail. It must stay deterministic:
// every replica, of every later release, replays the same entry to the same
// state (see versions.go).
func (s *State) apply(index uint64, c Command) Result {
	s.index = index
	rules := c.meta().rules()
	// A version 2 entry commits the cluster to version 2 even when it is
	// rejected: every replica has it in its log.
	if rules >= 2 {
		s.rulesVersion = max(s.rulesVersion, rules)
	}
	if rules < 2 {
		// Version 1 entries were proposed as the client sent them: judge
		// and normalize them as version 1 did.
		if e := c.validate(rules); e != nil {
			return Result{Index: index, Err: e}
		}
	}
	obj, e := s.check(c, rules)
	if e != nil {
		return Result{Index: index, Err: e}
	}
	return Result{Index: index, Object: registry[c.Type()].apply(s, index, c, obj, rules)}
}

// record adds the change c made to the audit trail.
func (s *State) record(index uint64, c Command, object string, before, after any) {
	s.appendAudit(index, c.meta(), c.Type().String(), object, before, after)
}

func (s *State) applyQuotaSet(index uint64, c *QuotaSet, q api.Quota, _ uint32) api.Quota {
	before, existed := s.quotas[c.Role]
	q.Version = index
	s.putQuota(q)
	s.record(index, c, "quota/"+c.Role, orNil(before, existed), q)
	return q
}

func (s *State) applyQuotaDelete(index uint64, c *QuotaDelete, old api.Quota, _ uint32) api.Quota {
	s.deleteQuota(c.Role)
	s.record(index, c, "quota/"+c.Role, old, nil)
	return old
}

func (s *State) applyRoleSet(index uint64, c *RoleSet, p RolePolicy, _ uint32) RolePolicy {
	before, existed := s.roles[c.Role]
	p.Version = index
	s.roles[c.Role] = p
	s.record(index, c, "role/"+c.Role, orNil(before, existed), p)
	return p
}

func (s *State) applyRoleDelete(index uint64, c *RoleDelete, old RolePolicy, _ uint32) RolePolicy {
	delete(s.roles, c.Role)
	s.record(index, c, "role/"+c.Role, old, nil)
	return old
}

func (s *State) applyReservationSet(index uint64, c *ReservationSet, r api.Reservation, _ uint32) api.Reservation {
	before, existed := s.Reservation(c.Name)
	r.Version = index
	r.Status = "" // derived when read: see reservationStatuses
	s.reservations[c.Name] = r
	r, _ = s.Reservation(c.Name)
	s.record(index, c, "reservation/"+c.Name, orNil(before, existed), r)
	return r
}

func (s *State) applyReservationDelete(index uint64, c *ReservationDelete, old api.Reservation, _ uint32) api.Reservation {
	delete(s.reservations, c.Name)
	s.record(index, c, "reservation/"+c.Name, old, nil)
	return old
}

func (s *State) applyRateLimitSet(index uint64, c *RateLimitSet, l api.RateLimit, _ uint32) api.RateLimit {
	key := rateLimitKey{c.Principal, c.Label}
	before, existed := s.rateLimits[key]
	l.Version = index
	s.rateLimits[key] = l
	s.record(index, c, rateLimitObject(c.Principal, c.Label), orNil(before, existed), l)
	return l
}

func (s *State) applyRateLimitDelete(index uint64, c *RateLimitDelete, old api.RateLimit, _ uint32) api.RateLimit {
	delete(s.rateLimits, rateLimitKey{c.Principal, c.Label})
	s.record(index, c, rateLimitObject(c.Principal, c.Label), old, nil)
	return old
}

// rateLimitObject names a limit in the audit trail, as its URL path does:
// ratelimit/spark, ratelimit/spark/labels/etl.
func rateLimitObject(principal, label string) string {
	if label == "" {
		return "ratelimit/" + principal
	}
	return "ratelimit/" + principal + "/labels/" + label
}

func (s *State) applyRateLimitDefaultSet(index uint64, c *RateLimitDefaultSet, d api.RateLimitDefault, _ uint32) api.RateLimitDefault {
	before := s.rateLimitDefault
	d.Version = index
	s.rateLimitDefault = &d
	s.record(index, c, "ratelimit_default", ptrOrNil(before), d)
	return d
}

func (s *State) applyRateLimitDefaultDelete(index uint64, c *RateLimitDefaultDelete, old api.RateLimitDefault, _ uint32) api.RateLimitDefault {
	s.rateLimitDefault = nil
	s.record(index, c, "ratelimit_default", old, nil)
	return old
}

// applyRateLimitConfigReplace answers the stored configuration in the Mesos
// format, not the command: that is what the API returns for it.
func (s *State) applyRateLimitConfigReplace(index uint64, c *RateLimitConfigReplace, _ *RateLimitConfigReplace, _ uint32) any {
	before := s.RateLimitConfig().WithoutVersions()
	s.rateLimits = make(map[rateLimitKey]api.RateLimit, len(c.Limits))
	for _, l := range c.Limits {
		s.rateLimits[rateLimitKey{l.Principal, l.Label}] = api.RateLimit{Principal: l.Principal, Label: l.Label,
			QPS: l.QPS, Burst: l.Burst, Capacity: l.Capacity, Version: index}
	}
	s.rateLimitDefault = nil
	if d := c.Default; d != nil {
		s.rateLimitDefault = &api.RateLimitDefault{QPS: d.QPS, Burst: d.Burst, Capacity: d.Capacity, Version: index}
	}
	after := s.RateLimitConfig()
	// The audit trail's copies carry no versions, as servers from before
	// versions were listed record them: every server records the same.
	s.record(index, c, "ratelimits", before, after.WithoutVersions())
	return after
}

func (s *State) applyAgentAdmit(index uint64, c *AgentAdmit, a AgentRecord, _ uint32) AgentRecord {
	before, existed := s.AgentByName(c.Name)
	if existed && before.ID != a.ID {
		delete(s.agents, before.ID)
	}
	// An agent that comes back under another name gives up the old one and
	// no longer backs the reservations that name it.
	renamed, wasRenamed := s.agents[a.ID]
	if wasRenamed && renamed.Name != a.Name {
		delete(s.agentIDs, renamed.Name)
	}
	a.Version = index
	s.agents[a.ID] = a
	s.agentIDs[a.Name] = a.ID
	s.record(index, c, "agent/"+a.Name, orNil(before, existed), a)
	return a
}

func (s *State) applyAgentRemove(index uint64, c *AgentRemove, a AgentRecord, _ uint32) AgentRecord {
	delete(s.agents, a.ID)
	delete(s.agentIDs, a.Name)
	s.record(index, c, "agent/"+a.Name, a, nil)
	return a
}

func (s *State) applyServerSet(index uint64, c *ServerSet, rec ServerRecord, _ uint32) ServerRecord {
	before, existed := s.servers[c.ID]
	if existed && before.RaftAddress == rec.RaftAddress && before.APIAddress == rec.APIAddress {
		return before
	}
	rec.Version = index
	s.servers[c.ID] = rec
	s.record(index, c, "server/"+c.ID, orNil(before, existed), rec)
	return rec
}

func (s *State) applyServerRemove(index uint64, c *ServerRemove, old ServerRecord, _ uint32) ServerRecord {
	delete(s.servers, c.ID)
	s.record(index, c, "server/"+c.ID, old, nil)
	return old
}

func (s *State) applyFrameworkSet(index uint64, c *FrameworkSet, f FrameworkRecord, _ uint32) FrameworkRecord {
	before, existed := s.frameworks[c.ID]
	f.Version = index
	s.frameworks[c.ID] = f
	s.record(index, c, "framework/"+c.ID, orNil(before, existed), f)
	return f
}

func (s *State) applyFrameworkRemove(index uint64, c *FrameworkRemove, old FrameworkRecord, _ uint32) FrameworkRecord {
	delete(s.frameworks, c.ID)
	s.record(index, c, "framework/"+c.ID, old, nil)
	return old
}

// RateLimitConfig is the stored configuration as the API answers it: in
// the Mesos format, with each limit's version.
func (s *State) RateLimitConfig() api.RateLimitConfig {
	var current RateLimitConfigReplace
	limits := s.RateLimits()
	for _, l := range limits {
		current.Limits = append(current.Limits, RateLimitSet{Principal: l.Principal, Label: l.Label, QPS: l.QPS, Burst: l.Burst, Capacity: l.Capacity})
	}
	if d := s.rateLimitDefault; d != nil {
		current.Default = &RateLimitDefaultSet{QPS: d.QPS, Burst: d.Burst, Capacity: d.Capacity}
	}
	cfg := current.Config()
	for i, l := range limits {
		cfg.Limits[i].Version = l.Version
	}
	return cfg
}

// Config is the configuration c stores, in the Mesos format.
func (c *RateLimitConfigReplace) Config() api.RateLimitConfig {
	cfg := api.RateLimitConfig{Limits: []api.RateLimitConfigLimit{}}
	for _, l := range c.Limits {
		burst, capacity := l.Burst, l.Capacity
		cfg.Limits = append(cfg.Limits, api.RateLimitConfigLimit{Principal: l.Principal, Label: l.Label, QPS: l.QPS, Burst: &burst, Capacity: &capacity})
	}
	if d := c.Default; d != nil {
		burst, capacity := d.Burst, d.Capacity
		cfg.AggregateDefaultQPS, cfg.AggregateDefaultBurst, cfg.AggregateDefaultCapacity = d.QPS, &burst, &capacity
	}
	return cfg
}

func orNil[T any](v T, ok bool) any {
	if !ok {
		return nil
	}
	return v
}

func ptrOrNil[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
