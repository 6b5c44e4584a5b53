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

// apply checks c against the state and, when it passes, changes the state and
// records the change in the audit trail. It must stay deterministic.
func (s *State) apply(index uint64, c Command) Result {
	s.index = index
	obj, e := s.Check(c)
	if e != nil {
		return Result{Index: index, Err: e}
	}
	m := c.meta()
	action := c.Type().String()
	switch c := c.(type) {
	case *QuotaSet:
		q := obj.(api.Quota)
		before, existed := s.quotas[c.Role]
		q.Version = index
		s.putQuota(q)
		s.appendAudit(index, m, action, "quota/"+c.Role, orNil(before, existed), q)
		obj = q
	case *QuotaDelete:
		s.deleteQuota(c.Role)
		s.appendAudit(index, m, action, "quota/"+c.Role, obj, nil)
	case *RoleSet:
		p := obj.(RolePolicy)
		before, existed := s.roles[c.Role]
		p.Version = index
		s.roles[c.Role] = p
		s.appendAudit(index, m, action, "role/"+c.Role, orNil(before, existed), p)
		obj = p
	case *RoleDelete:
		delete(s.roles, c.Role)
		s.appendAudit(index, m, action, "role/"+c.Role, obj, nil)
	case *ReservationSet:
		r := obj.(api.Reservation)
		before, existed := s.Reservation(c.Name)
		r.Version = index
		r.Status = "" // derived when read: see reservationStatuses
		s.reservations[c.Name] = r
		r, _ = s.Reservation(c.Name)
		s.appendAudit(index, m, action, "reservation/"+c.Name, orNil(before, existed), r)
		obj = r
	case *ReservationDelete:
		delete(s.reservations, c.Name)
		s.appendAudit(index, m, action, "reservation/"+c.Name, obj, nil)
	case *RateLimitSet:
		l := obj.(api.RateLimit)
		before, existed := s.rateLimits[c.Principal]
		l.Version = index
		s.rateLimits[c.Principal] = l
		s.appendAudit(index, m, action, "ratelimit/"+c.Principal, orNil(before, existed), l)
		obj = l
	case *RateLimitDelete:
		delete(s.rateLimits, c.Principal)
		s.appendAudit(index, m, action, "ratelimit/"+c.Principal, obj, nil)
	case *RateLimitDefaultSet:
		d := obj.(api.RateLimitDefault)
		before := s.rateLimitDefault
		d.Version = index
		s.rateLimitDefault = &d
		s.appendAudit(index, m, action, "ratelimit_default", ptrOrNil(before), d)
		obj = d
	case *RateLimitDefaultDelete:
		s.rateLimitDefault = nil
		s.appendAudit(index, m, action, "ratelimit_default", obj, nil)
	case *RateLimitConfigReplace:
		before := s.rateLimitConfig()
		s.rateLimits = make(map[string]api.RateLimit, len(c.Limits))
		for _, l := range c.Limits {
			s.rateLimits[l.Principal] = api.RateLimit{Principal: l.Principal, QPS: l.QPS, Burst: l.Burst, Capacity: l.Capacity, Version: index}
		}
		s.rateLimitDefault = nil
		if d := c.Default; d != nil {
			s.rateLimitDefault = &api.RateLimitDefault{QPS: d.QPS, Burst: d.Burst, Capacity: d.Capacity, Version: index}
		}
		after := s.rateLimitConfig()
		s.appendAudit(index, m, action, "ratelimits", before, after)
		obj = after
	case *AgentAdmit:
		a := obj.(AgentRecord)
		before, existed := s.AgentByName(c.Name)
		if existed && before.ID != a.ID {
			delete(s.agents, before.ID)
		}
		// An agent that comes back under another name gives up the old one
		// and no longer backs the reservations that name it.
		renamed, wasRenamed := s.agents[a.ID]
		if wasRenamed && renamed.Name != a.Name {
			delete(s.agentIDs, renamed.Name)
		}
		a.Version = index
		s.agents[a.ID] = a
		s.agentIDs[a.Name] = a.ID
		s.appendAudit(index, m, action, "agent/"+a.Name, orNil(before, existed), a)
		obj = a
	case *AgentRemove:
		a := obj.(AgentRecord)
		delete(s.agents, a.ID)
		delete(s.agentIDs, a.Name)
		s.appendAudit(index, m, action, "agent/"+a.Name, a, nil)
	case *ServerSet:
		rec := obj.(ServerRecord)
		before, existed := s.servers[c.ID]
		if existed && before.RaftAddress == rec.RaftAddress && before.APIAddress == rec.APIAddress {
			return Result{Index: index, Object: before}
		}
		rec.Version = index
		s.servers[c.ID] = rec
		s.appendAudit(index, m, action, "server/"+c.ID, orNil(before, existed), rec)
		obj = rec
	case *ServerRemove:
		delete(s.servers, c.ID)
		s.appendAudit(index, m, action, "server/"+c.ID, obj, nil)
	case *FrameworkSet:
		f := obj.(FrameworkRecord)
		before, existed := s.frameworks[c.ID]
		f.Version = index
		s.frameworks[c.ID] = f
		s.appendAudit(index, m, action, "framework/"+c.ID, orNil(before, existed), f)
		obj = f
	case *FrameworkRemove:
		delete(s.frameworks, c.ID)
		s.appendAudit(index, m, action, "framework/"+c.ID, obj, nil)
	}
	return Result{Index: index, Object: obj}
}

// RateLimitConfig returns the whole configuration in the Mesos format.
func (s *State) RateLimitConfig() api.RateLimitConfig { return s.rateLimitConfig() }

func (s *State) rateLimitConfig() api.RateLimitConfig {
	var current RateLimitConfigReplace
	for _, l := range s.RateLimits() {
		current.Limits = append(current.Limits, RateLimitSet{Principal: l.Principal, QPS: l.QPS, Burst: l.Burst, Capacity: l.Capacity})
	}
	if d := s.rateLimitDefault; d != nil {
		current.Default = &RateLimitDefaultSet{QPS: d.QPS, Burst: d.Burst, Capacity: d.Capacity}
	}
	return current.Config()
}

// Config is the configuration c stores, in the Mesos format.
func (c *RateLimitConfigReplace) Config() api.RateLimitConfig {
	cfg := api.RateLimitConfig{Limits: []api.RateLimitConfigLimit{}}
	for _, l := range c.Limits {
		burst, capacity := l.Burst, l.Capacity
		cfg.Limits = append(cfg.Limits, api.RateLimitConfigLimit{Principal: l.Principal, QPS: l.QPS, Burst: &burst, Capacity: &capacity})
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
