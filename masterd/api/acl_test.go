package api

import (
	"strings"
	"testing"
)

func TestMatchRoleGlob(t *testing.T) {
	for _, c := range []struct {
		glob, role string
		want       bool
	}{
		{"eng/*", "eng/ml", true},
		{"eng/*", "eng/ml/x", true},
		{"eng/*", "eng", false},
		{"eng/*", "engineering/ml", false},
		{"*", "*", true},
		{"*", "finance", true},
		{"eng", "eng", true},
		{"eng", "eng/ml", false},
		{"*/ml", "eng/ml", true},
		{"*/ml", "eng/ml/x", false},
		{"e*g/*l", "eng/ml", true},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYbZ", false},
		{"**", "x", true},
		{"finance", "*", false},
	} {
		if got := MatchRoleGlob(c.glob, c.role); got != c.want {
			t.Errorf("MatchRoleGlob(%q, %q) = %v, want %v", c.glob, c.role, got, c.want)
		}
	}
}

func TestValidateACLRules(t *testing.T) {
	good := [][]ACLRule{
		{{Object: "quota", Access: "write", Roles: []string{"eng/*"}}},
		{{Object: "cluster", Access: "read"}, {Object: "agent", Access: "register"}},
		{{Object: "framework", Access: "register", Roles: []string{"*"}}},
	}
	for _, rules := range good {
		if err := ValidateACLRules(rules); err != nil {
			t.Errorf("%+v: %v", rules, err)
		}
	}
	for _, c := range []struct {
		rules []ACLRule
		want  string
	}{
		{nil, "at least one rule"},
		{[]ACLRule{{Object: "quotas", Access: "read"}}, "not an ACL object"},
		{[]ACLRule{{Object: "quota", Access: "register"}}, "quota takes read or write"},
		{[]ACLRule{{Object: "agent", Access: "write"}}, "agent takes register"},
		{[]ACLRule{{Object: "cluster", Access: "read", Roles: []string{"eng"}}}, "take no roles"},
		{[]ACLRule{{Object: "role", Access: "read", Roles: []string{"eng ml"}}}, "neither a role character"},
		{[]ACLRule{{Object: "role", Access: "read", Roles: []string{""}}}, "1 to 256"},
	} {
		err := ValidateACLRules(c.rules)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error with %q", c.rules, err, c.want)
		}
	}
}

func BenchmarkMatchRoleGlob(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if !MatchRoleGlob("eng/*", "eng/ml/training") {
			b.Fatal("no match")
		}
	}
}
