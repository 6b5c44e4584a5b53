package acl

import (
	"strings"
	"testing"

	"github.com/allot/allot/masterd/api"
)

func resolverFor(t testing.TB, policies []api.ACLPolicy, tokens map[string]api.ACLToken) *Resolver {
	t.Helper()
	var entries []TokenEntry
	for secret, tok := range tokens {
		entries = append(entries, TokenEntry{Token: tok, Hash: HashSecret(secret)})
	}
	return NewResolver(policies, entries)
}

var testPolicies = []api.ACLPolicy{
	{Name: "eng-frameworks", Rules: []api.ACLRule{{Object: api.ACLObjectFramework, Access: api.ACLRegister, Roles: []string{"eng/*"}}}},
	{Name: "quota-reader", Rules: []api.ACLRule{{Object: api.ACLObjectQuota, Access: api.ACLRead}}},
	{Name: "eng-quota-writer", Rules: []api.ACLRule{{Object: api.ACLObjectQuota, Access: api.ACLWrite, Roles: []string{"eng", "eng/*"}}}},
	{Name: "agents", Rules: []api.ACLRule{{Object: api.ACLObjectAgent, Access: api.ACLRegister}}},
	{Name: "empty-roles", Rules: []api.ACLRule{{Object: api.ACLObjectRole, Access: api.ACLRead, Roles: []string{}}}},
}

func TestIdentityAllow(t *testing.T) {
	r := resolverFor(t, testPolicies, map[string]api.ACLToken{
		"s-spark": {Accessor: "spark", Principal: "spark", Policies: []string{"eng-frameworks"}},
		"s-ops":   {Accessor: "ops", Policies: []string{"quota-reader", "eng-quota-writer", "empty-roles"}},
		"s-agent": {Accessor: "node-1", Principal: "agents", Policies: []string{"agents", "no-such-policy"}},
		"s-root":  {Accessor: "root", Management: true},
	})
	spark, _ := r.Resolve("s-spark")
	ops, _ := r.Resolve("s-ops")
	agent, _ := r.Resolve("s-agent")
	root, _ := r.Resolve("s-root")
	for _, c := range []struct {
		name                 string
		id                   *Identity
		object, access, role string
		want                 bool
	}{
		{"framework in its glob", spark, api.ACLObjectFramework, api.ACLRegister, "eng/ml", true},
		{"framework outside its glob", spark, api.ACLObjectFramework, api.ACLRegister, "finance", false},
		{"framework on the glob's parent", spark, api.ACLObjectFramework, api.ACLRegister, "eng", false},
		{"framework has no operator rights", spark, api.ACLObjectQuota, api.ACLRead, "eng/ml", false},
		{"read everywhere", ops, api.ACLObjectQuota, api.ACLRead, "finance", true},
		{"write in its roles", ops, api.ACLObjectQuota, api.ACLWrite, "eng", true},
		{"write outside its roles", ops, api.ACLObjectQuota, api.ACLWrite, "finance", false},
		{"an empty roles list means every role", ops, api.ACLObjectRole, api.ACLRead, "finance", true},
		{"read does not give write", ops, api.ACLObjectRole, api.ACLWrite, "finance", false},
		{"no rule on the object", ops, api.ACLObjectCluster, api.ACLRead, "", false},
		{"agent register", agent, api.ACLObjectAgent, api.ACLRegister, "", true},
		{"management", root, api.ACLObjectACL, api.ACLWrite, "", true},
	} {
		if got := c.id.Allow(c.object, c.access, c.role); got != c.want {
			t.Errorf("%s: Allow(%s, %s, %q) = %v, want %v", c.name, c.object, c.access, c.role, got, c.want)
		}
	}
	if agent.Principal != "agents" || ops.Principal != "ops" {
		t.Errorf("principals: %q, %q; want agents and the accessor ops", agent.Principal, ops.Principal)
	}
	if !ops.AllowSome(api.ACLObjectQuota, api.ACLWrite) || ops.AllowSome(api.ACLObjectReservation, api.ACLRead) {
		t.Error("AllowSome: want quota write (some roles) and no reservation read")
	}
	if _, ok := r.Resolve("s-unknown"); ok {
		t.Error("an unknown secret resolved")
	}
	var none *Resolver
	if _, ok := none.Resolve("s-root"); ok {
		t.Error("a nil resolver resolved a secret")
	}
}

func TestSecretsAndAccessors(t *testing.T) {
	a, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSecret()
	if a == b || !strings.HasPrefix(a, SecretPrefix) || len(a) != len(SecretPrefix)+43 {
		t.Errorf("secrets %q, %q: want distinct, prefixed, 43 characters after the prefix", a, b)
	}
	acc, _ := NewAccessor()
	if len(acc) != 32 || api.ValidateName("accessor", acc) != nil {
		t.Errorf("accessor %q: want 32 hex characters, a valid name", acc)
	}
	if HashSecret(a) == HashSecret(b) {
		t.Error("two secrets hash alike")
	}
}

// BenchmarkAllow is the check every request pays once its token is known.
func BenchmarkAllow(b *testing.B) {
	r := resolverFor(b, testPolicies, map[string]api.ACLToken{
		"s-ops": {Accessor: "ops", Policies: []string{"quota-reader", "eng-quota-writer", "empty-roles"}},
	})
	id, _ := r.Resolve("s-ops")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if !id.Allow(api.ACLObjectQuota, api.ACLWrite, "eng/ml/training") {
			b.Fatal("denied")
		}
	}
}

// BenchmarkResolveAndAllow is the whole ACL check on the request path: hash
// the bearer secret, find its identity among 10 000 tokens, check the
// capability.
func BenchmarkResolveAndAllow(b *testing.B) {
	tokens := map[string]api.ACLToken{}
	for i := 0; i < 10000; i++ {
		secret, _ := NewSecret()
		tokens[secret] = api.ACLToken{Accessor: "t", Policies: []string{"quota-reader"}}
	}
	secret, _ := NewSecret()
	tokens[secret] = api.ACLToken{Accessor: "ops", Policies: []string{"quota-reader", "eng-quota-writer"}}
	r := resolverFor(b, testPolicies, tokens)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id, ok := r.Resolve(secret)
		if !ok || !id.Allow(api.ACLObjectQuota, api.ACLWrite, "eng/ml") {
			b.Fatal("denied")
		}
	}
}
