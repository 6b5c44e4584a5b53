package raftstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
)

// propose does what a version 3 leader does with a write: Check (validate
// and normalize, judge against the state), stamp it, and apply it through
// the log encoding. A write Check refuses is answered without an entry.
func propose(t testing.TB, s *State, c Command) Result {
	t.Helper()
	if _, e := s.Check(c); e != nil {
		return Result{Err: e}
	}
	Meta(c).Rules = 3
	return applyNext(t, s, c)
}

func mustPropose(t testing.TB, s *State, c Command) Result {
	t.Helper()
	res := propose(t, s, c)
	if res.Err != nil {
		t.Fatalf("%s %+v: %v", c.Type(), c, res.Err)
	}
	return res
}

// refused checks that c is refused with code and a message containing
// want, before it is proposed (Check) and when applied, by the rules that
// judge it there: a version 1 entry (unstamped) re-runs the input rules, a
// stamped one only the checks against the state. Neither changes the state
// (applyNext checks it).
func refused(t testing.TB, s *State, c Command, code, want string) {
	t.Helper()
	if _, e := s.Check(c); e == nil || e.Code != code || !strings.Contains(e.Message, want) {
		t.Fatalf("Check(%s %+v): %v, want %s containing %q", c.Type(), c, e, code, want)
	}
	if c.validate(3) == nil {
		Meta(c).Rules = 3
	}
	res := applyNext(t, s, c)
	if res.Err == nil || res.Err.Code != code || !strings.Contains(res.Err.Message, want) {
		t.Fatalf("apply %s %+v: %v, want %s containing %q", c.Type(), c, res.Err, code, want)
	}
}

func hashOf(secret string) SecretHash { return sha256.Sum256([]byte(secret)) }

func rule(object, access string, roles ...string) api.ACLRule {
	return api.ACLRule{Object: object, Access: access, Roles: roles}
}

func TestACLPolicySet(t *testing.T) {
	s := NewState()
	res := mustPropose(t, s, &ACLPolicySet{WriteMeta: meta(), Name: "eng-ops", Description: "operators",
		Rules: []api.ACLRule{rule("quota", "write", "eng/*"), {Object: "cluster", Access: "read", Roles: []string{}}}})
	want := api.ACLPolicy{Name: "eng-ops", Description: "operators",
		Rules: []api.ACLRule{rule("quota", "write", "eng/*"), rule("cluster", "read")}, Version: res.Index}
	if got, ok := s.ACLPolicy("eng-ops"); !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("stored %+v (%v), want %+v", got, ok, want)
	}
	if !reflect.DeepEqual(res.Object, want) {
		t.Fatalf("result %+v, want %+v", res.Object, want)
	}
	mustPropose(t, s, &ACLPolicySet{WriteMeta: meta(), Name: "readers", Rules: []api.ACLRule{rule("cluster", "read")}})
	if got := s.ACLPolicies(); len(got) != 2 || got[0].Name != "eng-ops" || got[1].Name != "readers" {
		t.Fatalf("policies %+v, want eng-ops and readers, sorted", got)
	}

	long := strings.Repeat("x", maxACLDescription+1)
	tooMany := make([]api.ACLRule, maxACLRules+1)
	for i := range tooMany {
		tooMany[i] = rule("cluster", "read")
	}
	for name, tc := range map[string]struct {
		c    *ACLPolicySet
		want string
	}{
		"bad name":         {&ACLPolicySet{Name: "bad name", Rules: []api.ACLRule{rule("cluster", "read")}}, `policy "bad name" must match`},
		"empty name":       {&ACLPolicySet{Rules: []api.ACLRule{rule("cluster", "read")}}, `policy "" must match`},
		"no rules":         {&ACLPolicySet{Name: "p"}, "at least one rule"},
		"unknown object":   {&ACLPolicySet{Name: "p", Rules: []api.ACLRule{rule("secrets", "read")}}, `"secrets" is not an ACL object`},
		"wrong access":     {&ACLPolicySet{Name: "p", Rules: []api.ACLRule{rule("framework", "write")}}, "framework takes register"},
		"roles on cluster": {&ACLPolicySet{Name: "p", Rules: []api.ACLRule{rule("cluster", "read", "eng")}}, "cluster rules take no roles"},
		"bad glob":         {&ACLPolicySet{Name: "p", Rules: []api.ACLRule{rule("quota", "read", "eng ml")}}, "neither a role character"},
		"long description": {&ACLPolicySet{Name: "p", Description: long, Rules: []api.ACLRule{rule("cluster", "read")}}, "description is longer than"},
		"too many rules":   {&ACLPolicySet{Name: "p", Rules: tooMany}, "at most 256 rules"},
	} {
		t.Run(name, func(t *testing.T) {
			tc.c.WriteMeta = meta()
			refused(t, s, tc.c, api.CodeInvalidArgument, tc.want)
		})
	}

	// Preconditions, as for every object.
	old, _ := s.ACLPolicy("readers")
	stale := ifMatch(old.Version + 1)
	refused(t, s, &ACLPolicySet{WriteMeta: stale, Name: "readers", Rules: []api.ACLRule{rule("acl", "read")}},
		api.CodePreconditionFailed, "not "+itoa(old.Version+1))
	none := meta()
	none.IfNoneMatch = true
	refused(t, s, &ACLPolicySet{WriteMeta: none, Name: "readers", Rules: []api.ACLRule{rule("acl", "read")}},
		api.CodePreconditionFailed, "already exists")
	res = mustPropose(t, s, &ACLPolicySet{WriteMeta: ifMatch(old.Version), Name: "readers", Rules: []api.ACLRule{rule("acl", "read")}})
	if p, _ := s.ACLPolicy("readers"); p.Version != res.Index || p.Rules[0].Object != "acl" {
		t.Fatalf("update under If-Match stored %+v", p)
	}
}

func itoa(v uint64) string { b, _ := json.Marshal(v); return string(b) }

// Stored policies and tokens share no slice with the command that wrote
// them (applied as it is, not through the log encoding).
func TestACLObjectsOwnTheirSlices(t *testing.T) {
	s := NewState()
	v3 := meta()
	v3.Rules = 3
	p := &ACLPolicySet{WriteMeta: v3, Name: "p", Rules: []api.ACLRule{rule("quota", "read", "eng/*")}}
	tok := &ACLTokenSet{WriteMeta: v3, Accessor: "t", Policies: []string{"p"}, SecretHash: hashOf("x")}
	for _, c := range []Command{p, tok} {
		if e := c.validate(3); e != nil {
			t.Fatal(e)
		}
		if res := s.apply(s.index+1, c); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	p.Rules[0].Roles[0] = "changed"
	p.Rules[0].Object = "changed"
	tok.Policies[0] = "changed"
	if got, _ := s.ACLPolicy("p"); got.Rules[0].Object != "quota" || got.Rules[0].Roles[0] != "eng/*" {
		t.Fatalf("the stored policy changed with the command: %+v", got)
	}
	if got, _ := s.ACLToken("t"); got.Policies[0] != "p" {
		t.Fatalf("the stored token changed with the command: %+v", got)
	}
}

func TestACLTokenSet(t *testing.T) {
	s := NewState()
	mustPropose(t, s, &ACLPolicySet{WriteMeta: meta(), Name: "readers", Rules: []api.ACLRule{rule("cluster", "read")}})
	mustPropose(t, s, &ACLPolicySet{WriteMeta: meta(), Name: "eng", Rules: []api.ACLRule{rule("framework", "register", "eng/*")}})

	// A new token: principal defaults to the accessor, policies sorted and
	// deduplicated, the hash kept beside it.
	res := mustPropose(t, s, &ACLTokenSet{WriteMeta: meta(), Accessor: "ci", Policies: []string{"readers", "eng", "readers"},
		SecretHash: hashOf("s3cret")})
	want := api.ACLToken{Accessor: "ci", Policies: []string{"eng", "readers"}, Principal: "ci", Version: res.Index}
	if got, ok := s.ACLToken("ci"); !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("stored %+v, want %+v", got, want)
	}
	if !reflect.DeepEqual(res.Object, want) {
		t.Fatalf("result %+v, want %+v", res.Object, want)
	}
	// An update keeps the hash, whatever the command carries.
	res = mustPropose(t, s, &ACLTokenSet{WriteMeta: meta(), Accessor: "ci", Description: "CI", Principal: "deployer",
		Management: true, SecretHash: hashOf("another")})
	want = api.ACLToken{Accessor: "ci", Description: "CI", Policies: []string{}, Principal: "deployer", Management: true, Version: res.Index}
	if got, _ := s.ACLToken("ci"); !reflect.DeepEqual(got, want) {
		t.Fatalf("updated to %+v, want %+v", got, want)
	}
	mustPropose(t, s, &ACLTokenSet{WriteMeta: meta(), Accessor: "ci", Policies: []string{"eng"}})
	var hashes []SecretHash
	s.ForEachACLToken(func(tok api.ACLToken, h [32]byte) { hashes = append(hashes, h) })
	if len(hashes) != 1 || hashes[0] != hashOf("s3cret") {
		t.Fatalf("hashes %x, want the first one's only", hashes)
	}

	for name, tc := range map[string]struct {
		c    *ACLTokenSet
		code string
		want string
	}{
		"bad accessor":  {&ACLTokenSet{Accessor: "a b", SecretHash: hashOf("x")}, api.CodeInvalidArgument, `accessor "a b" must match`},
		"bad principal": {&ACLTokenSet{Accessor: "t", Principal: "p q", SecretHash: hashOf("x")}, api.CodeInvalidArgument, `principal "p q" must match`},
		"bad policy":    {&ACLTokenSet{Accessor: "t", Policies: []string{"a/b"}, SecretHash: hashOf("x")}, api.CodeInvalidArgument, "policies[0]"},
		"missing policy": {&ACLTokenSet{Accessor: "t", Policies: []string{"readers", "nope"}, SecretHash: hashOf("x")},
			api.CodeInvalidArgument, "policy nope does not exist"},
		"new without a hash": {&ACLTokenSet{Accessor: "t", Policies: []string{"readers"}}, api.CodeInvalidArgument, "needs the hash of its secret"},
		"long description": {&ACLTokenSet{Accessor: "t", Description: strings.Repeat("d", maxACLDescription+1), SecretHash: hashOf("x")},
			api.CodeInvalidArgument, "description is longer"},
	} {
		t.Run(name, func(t *testing.T) {
			tc.c.WriteMeta = meta()
			refused(t, s, tc.c, tc.code, tc.want)
		})
	}
	if _, e := s.Check(&ACLTokenSet{WriteMeta: meta(), Accessor: "t", Policies: []string{"nope"}, SecretHash: hashOf("x")}); e == nil ||
		e.Details["policy"] != "nope" {
		t.Fatalf("missing policy: %v, want details naming it", e)
	}

	old, _ := s.ACLToken("ci")
	refused(t, s, &ACLTokenSet{WriteMeta: ifMatch(old.Version + 1), Accessor: "ci"}, api.CodePreconditionFailed, "is at version")
	refused(t, s, &ACLTokenSet{WriteMeta: ifMatch(1), Accessor: "other", SecretHash: hashOf("x")}, api.CodePreconditionFailed, "does not exist")
	none := meta()
	none.IfNoneMatch = true
	refused(t, s, &ACLTokenSet{WriteMeta: none, Accessor: "ci"}, api.CodePreconditionFailed, "already exists")

	// Delete.
	refused(t, s, &ACLTokenDelete{WriteMeta: meta(), Accessor: "missing"}, api.CodeNotFound, "token missing does not exist")
	refused(t, s, &ACLTokenDelete{WriteMeta: ifMatch(old.Version + 1), Accessor: "ci"}, api.CodePreconditionFailed, "is at version")
	res = mustPropose(t, s, &ACLTokenDelete{WriteMeta: ifMatch(old.Version), Accessor: "ci"})
	if _, ok := s.ACLToken("ci"); ok || !reflect.DeepEqual(res.Object, old) {
		t.Fatalf("delete answered %+v and left the token: %v", res.Object, ok)
	}
	if len(s.ACLTokens()) != 0 {
		t.Fatalf("tokens after delete: %+v", s.ACLTokens())
	}
}

func TestACLBootstrap(t *testing.T) {
	s := NewState()
	if s.ACLBootstrapped() {
		t.Fatal("a new state is bootstrapped")
	}
	refused(t, s, &ACLBootstrap{WriteMeta: meta(), Accessor: "boot"}, api.CodeInvalidArgument, "secret_hash is missing")
	refused(t, s, &ACLBootstrap{WriteMeta: meta(), Accessor: "", SecretHash: hashOf("x")}, api.CodeInvalidArgument, "accessor")
	if s.ACLBootstrapped() {
		t.Fatal("a refused bootstrap bootstrapped")
	}
	res := mustPropose(t, s, &ACLBootstrap{WriteMeta: meta(), Accessor: "0123abcd", SecretHash: hashOf("root")})
	want := api.ACLToken{Accessor: "0123abcd", Description: bootstrapDescription, Policies: []string{}, Principal: "bootstrap",
		Management: true, Version: res.Index}
	if got, ok := s.ACLToken("0123abcd"); !ok || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(res.Object, want) {
		t.Fatalf("bootstrap stored %+v and answered %+v, want %+v", got, res.Object, want)
	}
	if !s.ACLBootstrapped() {
		t.Fatal("not bootstrapped after acl.bootstrap")
	}
	refused(t, s, &ACLBootstrap{WriteMeta: meta(), Accessor: "other", SecretHash: hashOf("y")}, api.CodeConflict, "already bootstrapped")
	// Deleting the bootstrap token does not let anyone bootstrap again.
	mustPropose(t, s, &ACLTokenDelete{WriteMeta: meta(), Accessor: "0123abcd"})
	refused(t, s, &ACLBootstrap{WriteMeta: meta(), Accessor: "other", SecretHash: hashOf("y")}, api.CodeConflict, "already bootstrapped")

	// A token created before the bootstrap keeps its accessor.
	s = NewState()
	mustPropose(t, s, &ACLTokenSet{WriteMeta: meta(), Accessor: "taken", SecretHash: hashOf("x")})
	refused(t, s, &ACLBootstrap{WriteMeta: meta(), Accessor: "taken", SecretHash: hashOf("y")}, api.CodeConflict, "token taken already exists")
}

// Deleting a policy removes its name from every token naming it; those
// tokens move to the delete's index, the others keep their version.
func TestACLPolicyDeleteUnlinksTokens(t *testing.T) {
	s := NewState()
	mustPropose(t, s, &ACLPolicySet{WriteMeta: meta(), Name: "a", Rules: []api.ACLRule{rule("cluster", "read")}})
	mustPropose(t, s, &ACLPolicySet{WriteMeta: meta(), Name: "b", Rules: []api.ACLRule{rule("acl", "read")}})
	mustPropose(t, s, &ACLTokenSet{WriteMeta: meta(), Accessor: "t1", Policies: []string{"a", "b"}, SecretHash: hashOf("1")})
	mustPropose(t, s, &ACLTokenSet{WriteMeta: meta(), Accessor: "t2", Policies: []string{"a"}, SecretHash: hashOf("2")})
	t3 := mustPropose(t, s, &ACLTokenSet{WriteMeta: meta(), Accessor: "t3", Policies: []string{"b"}, SecretHash: hashOf("3")})

	refused(t, s, &ACLPolicyDelete{WriteMeta: meta(), Name: "missing"}, api.CodeNotFound, "policy missing does not exist")
	refused(t, s, &ACLPolicyDelete{WriteMeta: meta(), Name: "bad name"}, api.CodeInvalidArgument, "policy")
	pa, _ := s.ACLPolicy("a")
	refused(t, s, &ACLPolicyDelete{WriteMeta: ifMatch(pa.Version + 100), Name: "a"}, api.CodePreconditionFailed, "is at version")

	auditBefore := len(s.Audit(0, 0))
	res := mustPropose(t, s, &ACLPolicyDelete{WriteMeta: ifMatch(pa.Version), Name: "a"})
	if !reflect.DeepEqual(res.Object, pa) {
		t.Fatalf("delete answered %+v, want the policy %+v", res.Object, pa)
	}
	if _, ok := s.ACLPolicy("a"); ok {
		t.Fatal("the policy is still there")
	}
	for accessor, want := range map[string]struct {
		policies []string
		version  uint64
	}{"t1": {[]string{"b"}, res.Index}, "t2": {[]string{}, res.Index}, "t3": {[]string{"b"}, t3.Index}} {
		tok, _ := s.ACLToken(accessor)
		if !reflect.DeepEqual(tok.Policies, want.policies) || tok.Version != want.version {
			t.Errorf("%s: policies %q at version %d, want %q at %d", accessor, tok.Policies, tok.Version, want.policies, want.version)
		}
	}
	// One audit entry per index (GET /v1/audit pages by index): the policy's.
	if entries := s.Audit(0, 0)[auditBefore:]; len(entries) != 1 || entries[0].Object != "acl_policy/a" ||
		entries[0].Action != "acl.policy.delete" || string(entries[0].After) != "null" {
		t.Fatalf("audit entries of the delete: %+v", entries)
	}
	// The unlinked tokens still take writes naming their remaining policies.
	mustPropose(t, s, &ACLTokenSet{WriteMeta: meta(), Accessor: "t2", Policies: []string{"b"}})
}

// The audit trail shows tokens without their secret or its hash, and no
// result or getter holds the hash.
func TestACLAuditHasNoHash(t *testing.T) {
	s := NewState()
	secrets := []string{"allot_bootstrap-secret", "allot_ci-secret", "allot_other"}
	mustPropose(t, s, &ACLBootstrap{WriteMeta: meta(), Accessor: "boot", SecretHash: hashOf(secrets[0])})
	mustPropose(t, s, &ACLPolicySet{WriteMeta: meta(), Name: "p", Rules: []api.ACLRule{rule("cluster", "read")}})
	mustPropose(t, s, &ACLTokenSet{WriteMeta: meta(), Accessor: "ci", Policies: []string{"p"}, SecretHash: hashOf(secrets[1])})
	mustPropose(t, s, &ACLTokenSet{WriteMeta: meta(), Accessor: "ci", Description: "updated", SecretHash: hashOf(secrets[2])})
	mustPropose(t, s, &ACLPolicyDelete{WriteMeta: meta(), Name: "p"})
	mustPropose(t, s, &ACLTokenDelete{WriteMeta: meta(), Accessor: "ci"})

	trail, err := json.Marshal(s.Audit(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	tokens, _ := json.Marshal(s.ACLTokens())
	for _, secret := range secrets {
		h := hashOf(secret)
		for _, form := range [][]byte{[]byte(secret), []byte(hex.EncodeToString(h[:])), h[:]} {
			for what, data := range map[string][]byte{"audit trail": trail, "token list": tokens} {
				if bytes.Contains(data, form) {
					t.Fatalf("the %s holds %q (secret %s or its hash):\n%s", what, form, secret, data)
				}
			}
		}
	}
	for _, e := range s.Audit(0, 0) {
		if strings.HasPrefix(e.Object, "acl_token/") && strings.Contains(string(e.Before)+string(e.After), "secret") {
			t.Fatalf("audit entry %d names a secret: %s / %s", e.Index, e.Before, e.After)
		}
	}
	// The snapshot does keep the hash, and only the hash: a restored
	// server must resolve the same tokens.
	data := snapshotBytes(t, s)
	h := hashOf(secrets[0])
	if !bytes.Contains(data, []byte(hex.EncodeToString(h[:]))) || bytes.Contains(data, []byte(secrets[0])) {
		t.Fatalf("the snapshot should hold the bootstrap token's hash and never its secret:\n%s", data)
	}
}

// Labeled rate limits sit beside the principal's own: each is its own
// object, with its own version, preconditions and audit entries.
func TestLabeledRateLimits(t *testing.T) {
	s := NewState()
	own := mustPropose(t, s, &RateLimitSet{WriteMeta: meta(), Principal: "spark", QPS: qps(10), Burst: 10, Capacity: 100})
	etl := mustPropose(t, s, &RateLimitSet{WriteMeta: meta(), Principal: "spark", Label: "etl", QPS: qps(2), Burst: 2, Capacity: 5})
	mustPropose(t, s, &RateLimitSet{WriteMeta: meta(), Principal: "spark", Label: "adhoc", Capacity: 1})
	mustPropose(t, s, &RateLimitSet{WriteMeta: meta(), Principal: "batch", Label: "etl", QPS: qps(1), Burst: 1})

	if l, ok := s.RateLimit("spark"); !ok || l.Label != "" || l.Version != own.Index || *l.QPS != 10 {
		t.Fatalf("RateLimit(spark) = %+v, %v; want the principal's own", l, ok)
	}
	if l, ok := s.LabeledRateLimit("spark", "etl"); !ok || l.Label != "etl" || l.Version != etl.Index || *l.QPS != 2 {
		t.Fatalf("LabeledRateLimit(spark, etl) = %+v, %v", l, ok)
	}
	if _, ok := s.RateLimit("batch"); ok {
		t.Fatal("batch has only a labeled limit, but RateLimit finds one")
	}
	var keys []string
	for _, l := range s.RateLimits() {
		keys = append(keys, l.Principal+"/"+l.Label)
	}
	if want := []string{"batch/etl", "spark/", "spark/adhoc", "spark/etl"}; !slices.Equal(keys, want) {
		t.Fatalf("RateLimits() %q, want %q", keys, want)
	}

	refused(t, s, &RateLimitSet{WriteMeta: meta(), Principal: "spark", Label: "bad label", QPS: qps(1), Burst: 1}, api.CodeInvalidArgument, `label "bad label"`)
	refused(t, s, &RateLimitSet{WriteMeta: meta(), Principal: "spark", Label: "etl", QPS: qps(-1), Burst: 1}, api.CodeInvalidArgument,
		"rate limit spark (label etl): qps")
	refused(t, s, &RateLimitSet{WriteMeta: ifMatch(own.Index), Principal: "spark", Label: "etl", Capacity: 1}, api.CodePreconditionFailed,
		"rate limit spark (label etl) is at version")
	refused(t, s, &RateLimitDelete{WriteMeta: meta(), Principal: "spark", Label: "nope"}, api.CodeNotFound, "no rate limit for label nope")
	refused(t, s, &RateLimitDelete{WriteMeta: meta(), Principal: "spark", Label: "bad label"}, api.CodeInvalidArgument, `label "bad label"`)

	// Deleting a labeled limit leaves the principal's own, and the other way.
	mustPropose(t, s, &RateLimitDelete{WriteMeta: meta(), Principal: "spark", Label: "etl"})
	if _, ok := s.LabeledRateLimit("spark", "etl"); ok {
		t.Fatal("the labeled limit survived its delete")
	}
	mustPropose(t, s, &RateLimitDelete{WriteMeta: meta(), Principal: "spark"})
	if _, ok := s.LabeledRateLimit("spark", "adhoc"); !ok {
		t.Fatal("deleting the principal's limit took its labeled one")
	}

	var objects []string
	for _, e := range s.Audit(0, 0) {
		objects = append(objects, e.Object)
	}
	if want := []string{"ratelimit/spark", "ratelimit/spark/labels/etl", "ratelimit/spark/labels/adhoc", "ratelimit/batch/labels/etl",
		"ratelimit/spark/labels/etl", "ratelimit/spark"}; !slices.Equal(objects, want) {
		t.Fatalf("audit objects %q, want %q", objects, want)
	}
	var after api.RateLimit
	if err := json.Unmarshal(s.Audit(0, 0)[1].After, &after); err != nil || after.Label != "etl" {
		t.Fatalf("audit entry of a labeled limit: %s (%v)", s.Audit(0, 0)[1].After, err)
	}
	// An unlabeled limit's audit entry is as before labels: no label key.
	if strings.Contains(string(s.Audit(0, 0)[0].After), "label") {
		t.Fatalf("an unlabeled limit's audit entry names a label: %s", s.Audit(0, 0)[0].After)
	}
}

func TestRateLimitConfigReplaceWithLabels(t *testing.T) {
	s := NewState()
	mustPropose(t, s, &RateLimitSet{WriteMeta: meta(), Principal: "old", Label: "x", Capacity: 1})
	res := mustPropose(t, s, &RateLimitConfigReplace{WriteMeta: meta(), Limits: []RateLimitSet{
		{Principal: "spark", QPS: qps(10), Burst: 10, Capacity: 100},
		{Principal: "spark", Label: "etl", QPS: qps(2), Burst: 2, Capacity: 5},
	}})
	if _, ok := s.LabeledRateLimit("old", "x"); ok {
		t.Fatal("the replace kept a labeled limit it does not name")
	}
	if l, ok := s.LabeledRateLimit("spark", "etl"); !ok || *l.QPS != 2 || l.Version != res.Index {
		t.Fatalf("labeled limit after replace: %+v, %v", l, ok)
	}
	cfg := res.Object.(api.RateLimitConfig)
	if len(cfg.Limits) != 2 || cfg.Limits[0].Label != "" || cfg.Limits[1].Label != "etl" {
		t.Fatalf("the replace answered %+v", cfg)
	}
	if got := s.RateLimitConfig(); !reflect.DeepEqual(got, cfg) {
		t.Fatalf("RateLimitConfig() %+v, want what the replace answered %+v", got, cfg)
	}
	refused(t, s, &RateLimitConfigReplace{WriteMeta: meta(), Limits: []RateLimitSet{
		{Principal: "spark", Label: "etl", Capacity: 1}, {Principal: "spark", Label: "etl", Capacity: 2},
	}}, api.CodeInvalidArgument, "limits[1]: principal spark with label etl appears more than once")
	refused(t, s, &RateLimitConfigReplace{WriteMeta: meta(), Limits: []RateLimitSet{{Principal: "spark", Label: "-x", Capacity: 1}}},
		api.CodeInvalidArgument, "limits[0]")
	if l, _ := s.LabeledRateLimit("spark", "etl"); l.Version != res.Index {
		t.Fatal("a refused replace changed the limits")
	}
}

// ACL commands and labels need store version 3: a leader refuses them while
// any server runs version 2, and says what needs it.
func TestACLAndLabelsNeedVersion3(t *testing.T) {
	for _, tc := range []struct {
		c    Command
		need uint32
		what string
	}{
		{&ACLBootstrap{Accessor: "a", SecretHash: hashOf("x")}, 3, "acl.bootstrap"},
		{&ACLPolicySet{Name: "p", Rules: []api.ACLRule{rule("cluster", "read")}}, 3, "acl.policy.set"},
		{&ACLPolicyDelete{Name: "p"}, 3, "acl.policy.delete"},
		{&ACLTokenSet{Accessor: "t", SecretHash: hashOf("x")}, 3, "acl.token.set"},
		{&ACLTokenDelete{Accessor: "t"}, 3, "acl.token.delete"},
		{&RateLimitSet{Principal: "p", Label: "l"}, 3, "ratelimit.set with a label"},
		{&RateLimitDelete{Principal: "p", Label: "l"}, 3, "ratelimit.delete with a label"},
		{&RateLimitConfigReplace{Limits: []RateLimitSet{{Principal: "p"}, {Principal: "p", Label: "l"}}}, 3, "ratelimits.replace with a label"},
		{&RateLimitSet{Principal: "p"}, 1, "ratelimit.set"},
		{&RateLimitDelete{Principal: "p"}, 1, "ratelimit.delete"},
		{&RateLimitConfigReplace{Limits: []RateLimitSet{{Principal: "p"}}}, 1, "ratelimits.replace"},
	} {
		need, what := neededVersion(tc.c)
		if need != tc.need || what != tc.what {
			t.Errorf("neededVersion(%s %+v) = %d %q, want %d %q", tc.c.Type(), tc.c, need, what, tc.need, tc.what)
		}
		e := refuseNewer(tc.c, 2)
		if tc.need <= 2 && e != nil {
			t.Errorf("%s refused on a version 2 cluster: %v", tc.what, e)
		}
		if tc.need > 2 && (e == nil || e.Code != api.CodeConflict || !strings.Contains(e.Message, tc.what+" needs store version 3 on every server; the cluster runs 2")) {
			t.Errorf("%s on a version 2 cluster: %v", tc.what, e)
		}
		if e := refuseNewer(tc.c, 3); e != nil {
			t.Errorf("%s refused on a version 3 cluster: %v", tc.what, e)
		}
	}
}

// Through a real Raft cluster: refused while one server reports version
// 2, stamped with 3 and replicated once every server runs 3.
func TestClusterRefusesACLUntilVersion3(t *testing.T) {
	c, lead := newLedCluster(t)
	lead.SetServerVersion("m2", 3)
	lead.SetServerVersion("m3", 2)
	ctx := t.Context()
	policy := &ACLPolicySet{WriteMeta: meta(), Name: "readers", Rules: []api.ACLRule{rule("cluster", "read")}}
	labeled := &RateLimitSet{WriteMeta: meta(), Principal: "spark", Label: "etl", Capacity: 1}
	for _, cmd := range []Command{policy, labeled} {
		res, err := lead.Apply(ctx, cmd)
		if err != nil || res.Err == nil || res.Err.Code != api.CodeConflict || !strings.Contains(res.Err.Message, "needs store version 3") {
			t.Fatalf("%s with m3 at version 2: %+v, %v; want a conflict naming version 3", cmd.Type(), res, err)
		}
		if e := lead.CheckVersion(cmd); e == nil || e.Code != api.CodeConflict {
			t.Fatalf("CheckVersion(%s) with m3 at version 2: %v", cmd.Type(), e)
		}
	}
	// What version 2 stores the same way goes through, stamped 2.
	unlabeled := &RateLimitSet{WriteMeta: meta(), Principal: "spark", Capacity: 1}
	applyOK(t, lead, unlabeled)
	if unlabeled.Rules != 2 {
		t.Fatalf("an unlabeled limit on a version 2 cluster stamped %d", unlabeled.Rules)
	}

	lead.SetServerVersion("m3", 3)
	policy = &ACLPolicySet{WriteMeta: meta(), Name: "readers", Rules: []api.ACLRule{rule("cluster", "read")}}
	applyOK(t, lead, policy)
	applyOK(t, lead, &RateLimitSet{WriteMeta: meta(), Principal: "spark", Label: "etl", Capacity: 1})
	res := applyOK(t, lead, &ACLTokenSet{WriteMeta: meta(), Accessor: "ci", Policies: []string{"readers"}, SecretHash: hashOf("x")})
	if Meta(policy).Rules != 3 {
		t.Fatalf("a policy stamped %d, want 3", Meta(policy).Rules)
	}
	c.waitConverged(res.Index)
	var want []byte
	for i := range 3 {
		c.node(i).FSM().Read(func(s *State) {
			if s.RulesVersion() != 3 {
				t.Fatalf("m%d: rules version %d, want 3", i+1, s.RulesVersion())
			}
			if tok, ok := s.ACLToken("ci"); !ok || tok.Policies[0] != "readers" {
				t.Fatalf("m%d: token %+v, %v", i+1, tok, ok)
			}
		})
		got := withoutIndex(t, c.node(i).FSM())
		if want == nil {
			want = got
		} else if !bytes.Equal(got, want) {
			t.Fatalf("m%d's state differs from m1's:\n%s\nwant\n%s", i+1, got, want)
		}
	}
	if format := snapshotFormatOf(t, want); format != 3 {
		t.Fatalf("snapshot format %d at store version 3", format)
	}
}

// withoutIndex is the snapshot of f's state: replicas that applied the same
// entries hold the same bytes.
func withoutIndex(t testing.TB, f *FSM) []byte { return fsmSnapshotBytes(t, f) }

func snapshotFormatOf(t testing.TB, data []byte) int {
	t.Helper()
	var doc struct{ Format int }
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Format
}

// aclCommands adds what only store version 3 stores to richCommands: ACL
// state and labeled limits, a policy deleted under a token, a token
// updated, a refused token.
func aclCommands() []Command {
	at := func(minutes int, principal string) WriteMeta {
		return WriteMeta{Time: time.Date(2025, 3, 1, 13, minutes, 0, 500, time.UTC), Principal: principal}
	}
	return []Command{
		&ACLBootstrap{WriteMeta: at(0, ""), Accessor: "0123456789abcdef0123456789abcdef", SecretHash: hashOf("allot_bootstrap")},
		&ACLPolicySet{WriteMeta: at(1, "bootstrap"), Name: "eng", Description: "eng frameworks",
			Rules: []api.ACLRule{rule("framework", "register", "eng/*"), rule("quota", "read", "eng", "eng/*")}},
		&ACLPolicySet{WriteMeta: at(2, "bootstrap"), Name: "readers", Rules: []api.ACLRule{rule("cluster", "read")}},
		&ACLPolicySet{WriteMeta: at(3, "bootstrap"), Name: "gone", Rules: []api.ACLRule{rule("acl", "read")}},
		&ACLTokenSet{WriteMeta: at(4, "bootstrap"), Accessor: "spark", Description: "spark scheduler",
			Policies: []string{"readers", "eng", "gone"}, SecretHash: hashOf("allot_spark")},
		&ACLTokenSet{WriteMeta: at(5, "bootstrap"), Accessor: "ops", Principal: "operator", Management: true, SecretHash: hashOf("allot_ops")},
		&ACLTokenSet{WriteMeta: at(6, "bootstrap"), Accessor: "refused", Policies: []string{"missing"}, SecretHash: hashOf("allot_refused")},
		&ACLPolicyDelete{WriteMeta: at(7, "bootstrap"), Name: "gone"},
		&ACLTokenSet{WriteMeta: at(8, "bootstrap"), Accessor: "temp", SecretHash: hashOf("allot_temp")},
		&ACLTokenDelete{WriteMeta: at(9, "bootstrap"), Accessor: "temp"},
		&RateLimitSet{WriteMeta: at(10, "operator"), Principal: "spark", Label: "etl", QPS: qps(5), Burst: 5, Capacity: 50},
		&RateLimitSet{WriteMeta: at(11, "operator"), Principal: "analytics", Label: "adhoc", Capacity: 7},
	}
}

// TestSnapshotGoldenV3 pins format 3: richCommands and aclCommands under
// version 3. It reads back to the same state, hashes included.
func TestSnapshotGoldenV3(t *testing.T) {
	f := NewFSM(nil)
	for i, c := range append(richCommands(), aclCommands()...) {
		if c.validate(3) == nil {
			Meta(c).Rules = 3
		}
		f.Apply(logEntry(t, uint64(i+1), c))
	}
	var s *State
	f.Read(func(st *State) { s = st.clone() })
	if !s.ACLBootstrapped() || len(s.ACLPolicies()) != 2 || len(s.ACLTokens()) != 3 {
		t.Fatalf("the ACL state lacks something: bootstrapped %v, policies %+v, tokens %+v", s.ACLBootstrapped(), s.ACLPolicies(), s.ACLTokens())
	}
	if l, ok := s.LabeledRateLimit("spark", "etl"); !ok || l.Label != "etl" {
		t.Fatal("the state lacks a labeled limit")
	}
	testSnapshotGolden(t, s, "snapshot-v3.json")
	if format := snapshotFormatOf(t, snapshotBytes(t, s)); format != 3 {
		t.Fatalf("format %d at store version 3", format)
	}
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// A format 1 or 2 snapshot cannot hold what only format 3 has.
func TestOldSnapshotFormatsHoldNoACLState(t *testing.T) {
	golden := string(mustRead(t, "testdata/snapshot-v2.json"))
	for name, data := range map[string]string{
		"bootstrapped":    strings.Replace(golden, `"format": 2,`, `"format": 2, "acl_bootstrapped": true,`, 1),
		"tokens":          strings.Replace(golden, `"format": 2,`, `"format": 2, "acl_tokens": [{"accessor": "a"}],`, 1),
		"labeled limits":  strings.Replace(golden, `"principal": "spark",`, `"principal": "spark", "label": "etl",`, 1),
		"format 1 policy": strings.Replace(string(mustRead(t, "testdata/snapshot-v1.json")), `"format": 1,`, `"format": 1, "acl_policies": [{"name": "p"}],`, 1),
	} {
		if _, err := ReadSnapshot(strings.NewReader(data)); err == nil || !strings.Contains(err.Error(), "only format 3 has") {
			t.Errorf("%s: %v, want a refusal", name, err)
		}
	}
}

// TestACLSecretNeverOnDisk: a real server on disk is given a token's hash,
// never its secret (the leader hashes it before proposing). Its raft.db and
// snapshot hold the hash, so that a restarted server resolves the token,
// and nowhere the secret; its audit trail holds neither.
func TestACLSecretNeverOnDisk(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{ID: "m1", DataDir: dir, RaftAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	n, err := openWithin(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Bootstrap(); err != nil {
		t.Fatal(err)
	}
	waitNodeReady(t, n)
	secrets := map[string]string{"boot": "allot_Zm9vYmFyYm9vdHN0cmFwc2VjcmV0MTIzNDU2Nzg5MA", "ci": "allot_Y2lzZWNyZXRjaXNlY3JldGNpc2VjcmV0Y2lzZWNyZXQ"}
	applyOK(t, n, &ACLBootstrap{WriteMeta: meta(), Accessor: "boot", SecretHash: hashOf(secrets["boot"])})
	applyOK(t, n, &ACLPolicySet{WriteMeta: meta(), Name: "readers", Rules: []api.ACLRule{rule("cluster", "read")}})
	applyOK(t, n, &ACLTokenSet{WriteMeta: meta(), Accessor: "ci", Policies: []string{"readers"}, SecretHash: hashOf(secrets["ci"])})
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	applyOK(t, n, &ACLTokenSet{WriteMeta: meta(), Accessor: "ci", Description: "after the snapshot"})
	var audit []api.AuditEntry
	n.FSM().Read(func(s *State) { audit = s.Audit(0, 0) })
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}

	files := map[string][]byte{}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		files[path] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	trail, _ := json.Marshal(audit)
	for accessor, secret := range secrets {
		h := hashOf(secret)
		hexHash := []byte(hex.EncodeToString(h[:]))
		var holding []string
		for path, data := range files {
			if bytes.Contains(data, []byte(secret)) {
				t.Errorf("%s holds the secret of token %s", path, accessor)
			}
			if bytes.Contains(data, hexHash) {
				holding = append(holding, filepath.Base(path))
			}
		}
		// The log has every token's hash; the snapshot the ones before it.
		slices.Sort(holding)
		if want := []string{"raft.db", "state.bin"}; !slices.Equal(holding, want) {
			t.Errorf("the hash of token %s is in %q, want %q", accessor, holding, want)
		}
		if bytes.Contains(trail, hexHash) || bytes.Contains(trail, h[:]) || bytes.Contains(trail, []byte(secret)) {
			t.Errorf("the audit trail holds the hash or secret of token %s:\n%s", accessor, trail)
		}
	}

	// Restarted, the server knows the hashes again.
	n, err = openWithin(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	if err := n.Bootstrap(); err != nil {
		t.Fatal(err)
	}
	waitNodeReady(t, n)
	got := map[string]SecretHash{}
	n.FSM().Read(func(s *State) {
		s.ForEachACLToken(func(tok api.ACLToken, h [32]byte) { got[tok.Accessor] = h })
	})
	if len(got) != 2 || got["boot"] != hashOf(secrets["boot"]) || got["ci"] != hashOf(secrets["ci"]) {
		t.Fatalf("hashes after a restart: %x", got)
	}
}
