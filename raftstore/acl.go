package raftstore

import (
	"slices"

	"github.com/allot/allot/masterd/api"
)

// ACL state (store version 3): policies by name, tokens by accessor with the
// SHA-256 of their secret, and whether the cluster was bootstrapped. The
// secret itself never reaches the store; the hash is kept beside the token,
// never in it, so that nothing that shows a token (results, getters, the
// audit trail) can show the hash. Only ForEachACLToken, which the server's
// token resolver reads, and the snapshots give it out.

// Bounds on ACL input, so that one write cannot grow the state without limit.
const (
	maxACLDescription  = 1024
	maxACLRules        = 256
	maxACLRoleGlobs    = 128
	maxACLTokenPolices = 128
	// bootstrapPrincipal is the bootstrap token's principal.
	bootstrapPrincipal   = "bootstrap"
	bootstrapDescription = "Bootstrap token"
)

// aclToken is a stored token: the token as the API shows it (no secret) and
// the hash of its secret.
type aclToken struct {
	token api.ACLToken
	hash  SecretHash
}

func aclPolicyObject(name string) string    { return "acl_policy/" + name }
func aclTokenObject(accessor string) string { return "acl_token/" + accessor }

// ACLBootstrapped reports whether acl.bootstrap was applied: from then on
// every server enforces ACLs.
func (s *State) ACLBootstrapped() bool { return s.aclBootstrapped }

// ACLPolicy returns one policy.
func (s *State) ACLPolicy(name string) (api.ACLPolicy, bool) {
	p, ok := s.aclPolicies[name]
	return p, ok
}

// ACLPolicies returns every policy, sorted by name.
func (s *State) ACLPolicies() []api.ACLPolicy {
	out := make([]api.ACLPolicy, 0, len(s.aclPolicies))
	for _, k := range sortedKeys(s.aclPolicies) {
		out = append(out, s.aclPolicies[k])
	}
	return out
}

// ACLToken returns one token, without its secret or hash.
func (s *State) ACLToken(accessor string) (api.ACLToken, bool) {
	t, ok := s.aclTokens[accessor]
	return t.token, ok
}

// ACLTokens returns every token, sorted by accessor, without secrets or
// hashes.
func (s *State) ACLTokens() []api.ACLToken {
	out := make([]api.ACLToken, 0, len(s.aclTokens))
	for _, k := range sortedKeys(s.aclTokens) {
		out = append(out, s.aclTokens[k].token)
	}
	return out
}

// ForEachACLToken calls fn with every token, sorted by accessor, and the
// SHA-256 of its secret: what a resolver of bearer secrets needs.
func (s *State) ForEachACLToken(fn func(api.ACLToken, [32]byte)) {
	for _, k := range sortedKeys(s.aclTokens) {
		t := s.aclTokens[k]
		fn(t.token, t.hash)
	}
}

// --- validation: input rules, before the write is proposed ---

func validDescription(what, d string) *api.Error {
	if len(d) > maxACLDescription {
		return invalid("%s: description is longer than %d bytes", what, maxACLDescription)
	}
	return nil
}

func (c *ACLBootstrap) validate(uint32) *api.Error {
	if err := api.ValidateName("accessor", c.Accessor); err != nil {
		return invalid("%v", err)
	}
	if c.SecretHash.IsZero() {
		return invalid("acl bootstrap: secret_hash is missing")
	}
	return nil
}

func (c *ACLPolicySet) validate(uint32) *api.Error {
	if err := api.ValidateName("policy", c.Name); err != nil {
		return invalid("%v", err)
	}
	what := "policy " + c.Name
	if e := validDescription(what, c.Description); e != nil {
		return e
	}
	if len(c.Rules) > maxACLRules {
		return invalid("%s: at most %d rules, not %d", what, maxACLRules, len(c.Rules))
	}
	for i, r := range c.Rules {
		if len(r.Roles) > maxACLRoleGlobs {
			return invalid("%s: rules[%d].roles: at most %d role globs, not %d", what, i, maxACLRoleGlobs, len(r.Roles))
		}
	}
	if err := api.ValidateACLRules(c.Rules); err != nil {
		return invalid("%s: %v", what, err)
	}
	c.Rules = cloneACLRules(c.Rules)
	return nil
}

// cloneACLRules copies rules, no roles as nil (as a snapshot reads them
// back): stored objects never share a slice with a command (see State).
func cloneACLRules(rules []api.ACLRule) []api.ACLRule {
	out := make([]api.ACLRule, len(rules))
	for i, r := range rules {
		out[i] = api.ACLRule{Object: r.Object, Access: r.Access}
		if len(r.Roles) > 0 {
			out[i].Roles = slices.Clone(r.Roles)
		}
	}
	return out
}

func (c *ACLPolicyDelete) validate(uint32) *api.Error {
	if err := api.ValidateName("policy", c.Name); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// validate checks the token's names and normalizes it: principal defaults
// to the accessor, policies are sorted and deduplicated (never nil).
func (c *ACLTokenSet) validate(uint32) *api.Error {
	if err := api.ValidateName("accessor", c.Accessor); err != nil {
		return invalid("%v", err)
	}
	what := "token " + c.Accessor
	if e := validDescription(what, c.Description); e != nil {
		return e
	}
	if c.Principal == "" {
		c.Principal = c.Accessor
	}
	if err := api.ValidateName("principal", c.Principal); err != nil {
		return invalid("%s: %v", what, err)
	}
	if len(c.Policies) > maxACLTokenPolices {
		return invalid("%s: at most %d policies, not %d", what, maxACLTokenPolices, len(c.Policies))
	}
	policies := make([]string, 0, len(c.Policies))
	for i, p := range c.Policies {
		if err := api.ValidateName("policy", p); err != nil {
			return invalid("%s: policies[%d]: %v", what, i, err)
		}
		policies = append(policies, p)
	}
	slices.Sort(policies)
	c.Policies = slices.Compact(policies)
	return nil
}

func (c *ACLTokenDelete) validate(uint32) *api.Error {
	if err := api.ValidateName("accessor", c.Accessor); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// --- checks: against the state the write lands on ---

func (s *State) checkACLBootstrap(c *ACLBootstrap, _ uint32) (api.ACLToken, *api.Error) {
	if s.aclBootstrapped {
		return api.ACLToken{}, api.Errorf(api.CodeConflict, "the ACL system is already bootstrapped").
			WithDetails(map[string]any{"reason": "already_bootstrapped"})
	}
	if _, exists := s.aclTokens[c.Accessor]; exists {
		return api.ACLToken{}, api.Errorf(api.CodeConflict, "token %s already exists", c.Accessor)
	}
	return api.ACLToken{Accessor: c.Accessor, Description: bootstrapDescription, Policies: []string{},
		Principal: bootstrapPrincipal, Management: true}, nil
}

func (s *State) checkACLPolicySet(c *ACLPolicySet, _ uint32) (api.ACLPolicy, *api.Error) {
	old, exists := s.aclPolicies[c.Name]
	if e := checkPrecondition(&c.WriteMeta, exists, old.Version, "policy "+c.Name); e != nil {
		return api.ACLPolicy{}, e
	}
	return api.ACLPolicy{Name: c.Name, Description: c.Description, Rules: cloneACLRules(c.Rules), Version: old.Version}, nil
}

func (s *State) checkACLPolicyDelete(c *ACLPolicyDelete, _ uint32) (api.ACLPolicy, *api.Error) {
	old, exists := s.aclPolicies[c.Name]
	if !exists {
		return api.ACLPolicy{}, api.Errorf(api.CodeNotFound, "policy %s does not exist", c.Name)
	}
	if e := checkPrecondition(&c.WriteMeta, exists, old.Version, "policy "+c.Name); e != nil {
		return api.ACLPolicy{}, e
	}
	return old, nil
}

func (s *State) checkACLTokenSet(c *ACLTokenSet, _ uint32) (api.ACLToken, *api.Error) {
	old, exists := s.aclTokens[c.Accessor]
	if e := checkPrecondition(&c.WriteMeta, exists, old.token.Version, "token "+c.Accessor); e != nil {
		return api.ACLToken{}, e
	}
	for _, p := range c.Policies {
		if _, ok := s.aclPolicies[p]; !ok {
			return api.ACLToken{}, invalid("token %s: policy %s does not exist", c.Accessor, p).
				WithDetails(map[string]any{"policy": p})
		}
	}
	if !exists && c.SecretHash.IsZero() {
		return api.ACLToken{}, invalid("token %s is new and the write carries no secret_hash: a new token needs the hash of its secret", c.Accessor)
	}
	policies := slices.Clone(c.Policies)
	if policies == nil {
		policies = []string{} // shown as [], never null
	}
	return api.ACLToken{Accessor: c.Accessor, Description: c.Description, Policies: policies,
		Principal: c.Principal, Management: c.Management, Version: old.token.Version}, nil
}

func (s *State) checkACLTokenDelete(c *ACLTokenDelete, _ uint32) (api.ACLToken, *api.Error) {
	old, exists := s.aclTokens[c.Accessor]
	if !exists {
		return api.ACLToken{}, api.Errorf(api.CodeNotFound, "token %s does not exist", c.Accessor)
	}
	if e := checkPrecondition(&c.WriteMeta, exists, old.token.Version, "token "+c.Accessor); e != nil {
		return api.ACLToken{}, e
	}
	return old.token, nil
}

// --- applies ---

func (s *State) applyACLBootstrap(index uint64, c *ACLBootstrap, t api.ACLToken, _ uint32) api.ACLToken {
	t.Version = index
	s.aclTokens[c.Accessor] = aclToken{token: t, hash: c.SecretHash}
	s.aclBootstrapped = true
	s.record(index, c, aclTokenObject(c.Accessor), nil, t)
	return t
}

func (s *State) applyACLPolicySet(index uint64, c *ACLPolicySet, p api.ACLPolicy, _ uint32) api.ACLPolicy {
	before, existed := s.aclPolicies[c.Name]
	p.Version = index
	s.aclPolicies[c.Name] = p
	s.record(index, c, aclPolicyObject(c.Name), orNil(before, existed), p)
	return p
}

// applyACLPolicyDelete also removes the policy from every token that names
// it; each such token moves to this index. The audit trail has one entry,
// the policy's: an index has at most one (GET /v1/audit pages by index), and
// that entry says what happened to the tokens, which lost the policy.
func (s *State) applyACLPolicyDelete(index uint64, c *ACLPolicyDelete, old api.ACLPolicy, _ uint32) api.ACLPolicy {
	delete(s.aclPolicies, c.Name)
	for accessor, t := range s.aclTokens {
		if !slices.Contains(t.token.Policies, c.Name) {
			continue
		}
		t.token.Policies = slices.DeleteFunc(slices.Clone(t.token.Policies), func(p string) bool { return p == c.Name })
		t.token.Version = index
		s.aclTokens[accessor] = t
	}
	s.record(index, c, aclPolicyObject(c.Name), old, nil)
	return old
}

// applyACLTokenSet keeps the stored hash of an existing token: an update
// never changes its secret.
func (s *State) applyACLTokenSet(index uint64, c *ACLTokenSet, t api.ACLToken, _ uint32) api.ACLToken {
	before, existed := s.aclTokens[c.Accessor]
	hash := c.SecretHash
	if existed {
		hash = before.hash
	}
	t.Version = index
	s.aclTokens[c.Accessor] = aclToken{token: t, hash: hash}
	s.record(index, c, aclTokenObject(c.Accessor), orNil(before.token, existed), t)
	return t
}

func (s *State) applyACLTokenDelete(index uint64, c *ACLTokenDelete, old api.ACLToken, _ uint32) api.ACLToken {
	delete(s.aclTokens, c.Accessor)
	s.record(index, c, aclTokenObject(c.Accessor), old, nil)
	return old
}
