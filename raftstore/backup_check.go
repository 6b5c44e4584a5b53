package raftstore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/allot/allot/masterd/api"
)

// checkBackupState refuses a backup's state that no sequence of writes
// could have made, and normalizes what the writes would have normalized
// (a null resource map reads as {}). A backup is a file people keep, copy
// and may edit; its checksum proves it arrived as written, not that what
// it holds is sound. Restored, an object the API would never store (a
// negative quota, a role named "a//b", a token naming no policy that
// exists) would sit in every server's state and every snapshot after, and
// a version past the backup's index would let an If-Match written before
// the restore match a later write. So every object is judged by the rules
// of the store version its state was written under, as its write was.
func checkBackupState(s *State) error {
	rules := s.RulesVersion()
	for key, q := range s.quotas {
		c := QuotaSet{Role: q.Role, Guarantees: q.Guarantees, Limits: q.Limits}
		if err := judge("quota "+key, q.Version, s.index, c.validate(rules)); err != nil {
			return err
		}
		q.Guarantees, q.Limits = c.Guarantees, c.Limits
		s.quotas[key] = q
	}
	all := quotaView{stored: s.quotas, below: s.quotasBelow}
	for _, role := range sortedKeys(s.quotas) {
		if e := checkQuotaNode(all, role); e != nil {
			return fmt.Errorf("quota %s: %s", role, e.Message)
		}
	}
	for key, r := range s.roles {
		c := RoleSet{Role: r.Role, Weight: r.Weight, LendingLimit: r.LendingLimit}
		if err := judge("role "+key, r.Version, s.index, c.validate(rules)); err != nil {
			return err
		}
		r.LendingLimit = c.LendingLimit
		s.roles[key] = r
	}
	for key, r := range s.reservations {
		c := ReservationSet{Name: r.Name, Agent: r.Agent, Role: r.Role, Resources: r.Resources}
		if err := judge("reservation "+key, r.Version, s.index, c.validate(rules)); err != nil {
			return err
		}
		r.Resources = c.Resources
		s.reservations[key] = r
	}
	for _, l := range s.rateLimits {
		c := RateLimitSet{Principal: l.Principal, Label: l.Label, QPS: l.QPS, Burst: l.Burst, Capacity: l.Capacity}
		if err := judge(rateLimitName(l.Principal, l.Label), l.Version, s.index, c.validate(rules)); err != nil {
			return err
		}
	}
	if d := s.rateLimitDefault; d != nil {
		c := RateLimitDefaultSet{QPS: d.QPS, Burst: d.Burst, Capacity: d.Capacity}
		if err := judge("the default rate limit", d.Version, s.index, c.validate(rules)); err != nil {
			return err
		}
	}
	if err := checkBackupAgents(s, rules); err != nil {
		return err
	}
	for key, f := range s.frameworks {
		c := FrameworkSet{ID: f.ID, Name: f.Name, Principal: f.Principal, Roles: f.Roles,
			Capabilities: f.Capabilities, FailoverTimeoutSeconds: f.FailoverTimeoutSeconds}
		if err := judge("framework "+key, f.Version, s.index, c.validate(rules)); err != nil {
			return err
		}
	}
	if err := checkBackupACL(s, rules); err != nil {
		return err
	}
	return checkBackupAudit(s)
}

// checkBackupAgents judges the agents, and that the name index agrees
// with the records (two records of one name would make one unreachable).
func checkBackupAgents(s *State, rules uint32) error {
	for key, a := range s.agents {
		c := AgentAdmit{ID: a.ID, Name: a.Name, Hostname: a.Hostname, Resources: a.Resources, Capabilities: a.Capabilities}
		if err := judge("agent "+key, a.Version, s.index, c.validate(rules)); err != nil {
			return err
		}
		if id := s.agentIDs[a.Name]; id != a.ID {
			return fmt.Errorf("agents %s and %s have the same name %s", id, a.ID, a.Name)
		}
		a.Resources = c.Resources
		s.agents[key] = a
	}
	if len(s.agentIDs) != len(s.agents) {
		return fmt.Errorf("it lists %d agent names for %d agents: an agent id appears twice", len(s.agentIDs), len(s.agents))
	}
	return nil
}

// checkBackupACL judges the policies and tokens: a token needs the hash of
// its secret and names only policies that exist (deleting a policy takes
// it off every token).
func checkBackupACL(s *State, rules uint32) error {
	for key, p := range s.aclPolicies {
		c := ACLPolicySet{Name: p.Name, Description: p.Description, Rules: p.Rules}
		if err := judge("ACL policy "+key, p.Version, s.index, c.validate(rules)); err != nil {
			return err
		}
	}
	for key, t := range s.aclTokens {
		c := ACLTokenSet{Accessor: t.token.Accessor, Description: t.token.Description, Policies: t.token.Policies,
			Principal: t.token.Principal, Management: t.token.Management}
		if err := judge("ACL token "+key, t.token.Version, s.index, c.validate(rules)); err != nil {
			return err
		}
		if t.hash.IsZero() {
			return fmt.Errorf("ACL token %s has no secret hash", key)
		}
		for _, p := range t.token.Policies {
			if _, ok := s.aclPolicies[p]; !ok {
				return fmt.Errorf("ACL token %s names policy %s, which the backup does not hold", key, p)
			}
		}
	}
	return nil
}

// checkBackupAudit: the trail is read by index (GET /v1/audit?after=N),
// so its entries must be in order, none past the state's index.
func checkBackupAudit(s *State) error {
	var last uint64
	for i, e := range s.audit {
		if e.Index <= last || e.Index > s.index {
			return fmt.Errorf("audit entry %d has index %d: entries must be in increasing order, none above the backup's index %d",
				i, e.Index, s.index)
		}
		last = e.Index
	}
	return nil
}

// judge words a refused object, or one whose version is past the index
// the backup reflects.
func judge(what string, version, index uint64, e *api.Error) error {
	switch {
	case e != nil && strings.HasPrefix(e.Message, what):
		return errors.New(e.Message) // it names the object already
	case e != nil:
		return fmt.Errorf("%s: %s", what, e.Message)
	}
	if version > index {
		return fmt.Errorf("%s is at version %d, past the backup's index %d", what, version, index)
	}
	return nil
}
