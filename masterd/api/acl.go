package api

import (
	"fmt"
	"slices"
	"strings"
)

// Access control. A cluster started with -acl refuses every call but
// GET /v1/health and POST /v1/acl/bootstrap without a bearer token; a token
// names policies, and a policy's rules grant access to kinds of objects,
// narrowed to roles by globs. Rules only grant: a token may do what any of its
// policies' rules allows, and a management token may do everything.

// ACL objects a rule may name.
const (
	// Operator objects, with ACLRead or ACLWrite.
	ACLObjectQuota       = "quota"       // /v1/quotas; roles narrow it
	ACLObjectRole        = "role"        // /v1/roles; roles narrow it
	ACLObjectReservation = "reservation" // /v1/reservations; roles narrow it (the reservation's role)
	ACLObjectRateLimit   = "ratelimit"   // /v1/ratelimits, /v1/ratelimits-default
	ACLObjectACL         = "acl"         // /v1/acl/policies, /v1/acl/tokens
	// ACLObjectCluster is the cluster and its live state: read covers
	// /v1/cluster, agents, frameworks, tasks, offers, the audit trail and
	// /metrics; write covers adding and removing servers.
	ACLObjectCluster = "cluster"
	// ACLObjectFramework with ACLRegister: subscribe as a framework with the
	// roles the rule's globs match.
	ACLObjectFramework = "framework"
	// ACLObjectAgent with ACLRegister: run the agent protocol.
	ACLObjectAgent = "agent"
)

// Access levels. Write includes read.
const (
	ACLRead     = "read"
	ACLWrite    = "write"
	ACLRegister = "register"
)

// ACLObjects lists every object a rule may name.
var ACLObjects = []string{ACLObjectQuota, ACLObjectRole, ACLObjectReservation, ACLObjectRateLimit,
	ACLObjectACL, ACLObjectCluster, ACLObjectFramework, ACLObjectAgent}

// ACLRule grants one access to one kind of object.
type ACLRule struct {
	Object string `json:"object"`
	Access string `json:"access"`
	// Roles narrows quota, role, reservation and framework rules to the
	// roles matching one of these globs; `*` matches any run of characters,
	// slashes included ("eng/*" matches eng/ml and eng/ml/x, not eng; "*"
	// matches every role). Absent means every role; the other objects take
	// no roles.
	Roles []string `json:"roles,omitempty"`
}

// ACLPolicy is a named set of rules.
type ACLPolicy struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Rules       []ACLRule `json:"rules"`
	Version     uint64    `json:"version"`
}

// ACLPolicyRequest is the body of PUT /v1/acl/policies/{name}.
type ACLPolicyRequest struct {
	Description string    `json:"description"`
	Rules       []ACLRule `json:"rules"`
}

// ACLToken is a token as the API shows it. The accessor is public (it names
// the token in URLs, audit entries and Terraform); the secret is the bearer
// token, shown once, in the answer that created the token: the cluster keeps
// only its SHA-256.
type ACLToken struct {
	Accessor    string   `json:"accessor"`
	Description string   `json:"description"`
	Policies    []string `json:"policies"`
	// Principal is who the token's holder is: a framework's principal (rate
	// limits, counters), the audit trail's principal. It defaults to the
	// accessor.
	Principal string `json:"principal"`
	// Management tokens may do everything, policies or not.
	Management bool `json:"management"`
	// Secret is set only in the answer that created the token.
	Secret  string `json:"secret,omitempty"`
	Version uint64 `json:"version"`
}

// ACLTokenRequest is the body of PUT /v1/acl/tokens/{accessor}. A PUT of a
// new accessor creates the token and answers its secret; a PUT of an existing
// one updates it and keeps its secret.
type ACLTokenRequest struct {
	Description string   `json:"description"`
	Policies    []string `json:"policies"`
	Principal   string   `json:"principal"`
	Management  bool     `json:"management"`
}

// ACL paths.
const (
	ACLBootstrapPath = "/v1/acl/bootstrap"
	ACLTokenSelfPath = "/v1/acl/token/self"
)

func ACLPolicyPath(name string) string    { return "/v1/acl/policies/" + EscapePath(name) }
func ACLTokenPath(accessor string) string { return "/v1/acl/tokens/" + EscapePath(accessor) }

// roleScoped are the objects whose rules take role globs.
var roleScoped = map[string]bool{ACLObjectQuota: true, ACLObjectRole: true, ACLObjectReservation: true, ACLObjectFramework: true}

// ACLRoleScoped reports whether rules on object take role globs.
func ACLRoleScoped(object string) bool { return roleScoped[object] }

// ValidateACLRules checks a policy's rules: known objects, the access each
// object takes, role globs only where they apply and made of role characters
// and `*`.
func ValidateACLRules(rules []ACLRule) error {
	if len(rules) == 0 {
		return fmt.Errorf("rules: a policy needs at least one rule")
	}
	for i, r := range rules {
		if !slices.Contains(ACLObjects, r.Object) {
			return fmt.Errorf("rules[%d].object: %q is not an ACL object (want one of %s)", i, EchoName(r.Object), strings.Join(ACLObjects, ", "))
		}
		want := []string{ACLRead, ACLWrite}
		if r.Object == ACLObjectFramework || r.Object == ACLObjectAgent {
			want = []string{ACLRegister}
		}
		if !slices.Contains(want, r.Access) {
			return fmt.Errorf("rules[%d].access: %s takes %s, not %q", i, r.Object, strings.Join(want, " or "), EchoName(r.Access))
		}
		if len(r.Roles) > 0 && !roleScoped[r.Object] {
			return fmt.Errorf("rules[%d].roles: %s rules take no roles (only quota, role, reservation and framework rules do)", i, r.Object)
		}
		for j, g := range r.Roles {
			if err := validateRoleGlob(g); err != nil {
				return fmt.Errorf("rules[%d].roles[%d]: %w", i, j, err)
			}
		}
	}
	return nil
}

func validateRoleGlob(g string) error {
	if g == "" || len(g) > maxNameLength {
		return fmt.Errorf("a role glob must have 1 to %d characters", maxNameLength)
	}
	for _, c := range g {
		ok := c == '*' || c == '/' || c == '_' || c == '.' || c == '-' ||
			(c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if !ok {
			return fmt.Errorf("role glob %q: %q is neither a role character nor *", EchoName(g), c)
		}
	}
	return nil
}

// MatchRoleGlob reports whether role matches glob, where `*` matches any run
// of characters, slashes included. It allocates nothing: it runs on every
// authorized request.
func MatchRoleGlob(glob, role string) bool {
	// The classic two-pointer wildcard match: on a mismatch, let the last
	// star swallow one more character.
	gi, ri, star, mark := 0, 0, -1, 0
	for ri < len(role) {
		switch {
		case gi < len(glob) && glob[gi] == '*':
			star, mark = gi, ri
			gi++
		case gi < len(glob) && glob[gi] == role[ri]:
			gi++
			ri++
		case star >= 0:
			gi, mark = star+1, mark+1
			ri = mark
		default:
			return false
		}
	}
	for gi < len(glob) && glob[gi] == '*' {
		gi++
	}
	return gi == len(glob)
}
