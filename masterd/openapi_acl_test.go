package main_test

import (
	"testing"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// driveACL drives the ACL endpoints on a server of its own, started with
// -acl (the bootstrap succeeds only there), recording into h's coverage.
func driveACL(t *testing.T, h *apiHarness) {
	c := testcluster.Start(t, 1, testcluster.WithOperatorToken(openAPIToken), testcluster.WithArgs("-acl"))
	leader, err := c.WaitLeader(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	h.base = c.Address(leader)

	var boot api.ACLToken
	h.do(exchange{method: "POST", path: api.ACLBootstrapPath, noToken: true, want: 200}).decode(t, &boot)
	h.do(exchange{method: "POST", path: api.ACLBootstrapPath, noToken: true, want: 409})
	h.do(exchange{method: "POST", path: api.ACLBootstrapPath + "?dry_run=true", noToken: true, want: 400, request: docInvalid})
	h.do(exchange{method: "GET", path: api.ACLTokenSelfPath, token: boot.Secret, want: 200})
	h.do(exchange{method: "GET", path: api.ACLTokenSelfPath, want: 200})
	h.do(exchange{method: "GET", path: api.ACLTokenSelfPath, noToken: true, want: 401, request: docInvalid})

	// Policies.
	readers := `{"description": "reads eng", "rules": [{"object": "quota", "access": "read", "roles": ["eng/*"]}, {"object": "cluster", "access": "read"}]}`
	h.do(exchange{method: "PUT", path: "/v1/acl/policies/readers?dry_run=true", body: readers, want: 200})
	h.do(exchange{method: "PUT", path: "/v1/acl/policies/readers", body: readers, header: map[string]string{"If-None-Match": "*"}, want: 200})
	h.do(exchange{method: "PUT", path: "/v1/acl/policies/readers", body: readers, header: map[string]string{"If-None-Match": "*"}, want: 412})
	h.do(exchange{method: "PUT", path: "/v1/acl/policies/readers", body: `{"rules": []}`, want: 400, request: docInvalid})
	h.do(exchange{method: "PUT", path: "/v1/acl/policies/readers", body: `{"rules": [{"object": "quotas", "access": "read"}]}`, want: 400, request: docInvalid})
	h.do(exchange{method: "PUT", path: "/v1/acl/policies/readers", body: `{"rules": [{"object": "acl", "access": "read", "roles": ["x"]}]}`, want: 400, request: docInWords})
	h.do(exchange{method: "PUT", path: "/v1/acl/policies/doomed", body: readers, want: 200})
	h.do(exchange{method: "GET", path: "/v1/acl/policies", want: 200})
	h.do(exchange{method: "GET", path: "/v1/acl/policies?stale=true", want: 200})
	h.do(exchange{method: "GET", path: "/v1/acl/policies/readers", want: 200})
	h.do(exchange{method: "GET", path: "/v1/acl/policies/nobody", want: 404})

	// Tokens: a new accessor answers its secret once.
	var reader api.ACLToken
	h.do(exchange{method: "PUT", path: "/v1/acl/tokens/reader?dry_run=true", body: `{"policies": ["readers"]}`, want: 200})
	h.do(exchange{method: "PUT", path: "/v1/acl/tokens/reader", body: `{"policies": ["readers", "doomed"], "principal": "eng-reader"}`, want: 200}).decode(t, &reader)
	if reader.Secret == "" {
		t.Fatalf("a new token's answer has no secret: %+v", reader)
	}
	h.do(exchange{method: "PUT", path: "/v1/acl/tokens/reader", body: `{"description": "reads eng", "policies": ["readers"], "principal": "eng-reader"}`, want: 200})
	h.do(exchange{method: "PUT", path: "/v1/acl/tokens/bad", body: `{"policies": ["missing"]}`, want: 400, request: docInWords})
	h.do(exchange{method: "PUT", path: "/v1/acl/tokens/bad", body: `{"policy": ["readers"]}`, want: 400, request: docInvalid})
	h.do(exchange{method: "GET", path: "/v1/acl/tokens", want: 200})
	h.do(exchange{method: "GET", path: "/v1/acl/tokens/reader", want: 200})
	h.do(exchange{method: "GET", path: "/v1/acl/tokens/reader?stale=true", want: 200})
	h.do(exchange{method: "GET", path: "/v1/acl/tokens/nobody", want: 404})

	// The reader's token: what its policy allows, 403 for the rest.
	h.do(exchange{method: "GET", path: "/v1/quotas", token: reader.Secret, want: 200})
	h.do(exchange{method: "GET", path: "/v1/quotas/finance", token: reader.Secret, want: 403})
	h.do(exchange{method: "PUT", path: "/v1/quotas/eng/ml", body: `{"limits": {"cpus": 1}}`, token: reader.Secret, want: 403})
	h.do(exchange{method: "GET", path: "/v1/acl/tokens", token: reader.Secret, want: 403})
	h.do(exchange{method: "GET", path: api.ACLTokenSelfPath, token: reader.Secret, want: 200})

	h.do(exchange{method: "DELETE", path: "/v1/acl/policies/doomed?dry_run=true", want: 200})
	h.do(exchange{method: "DELETE", path: "/v1/acl/policies/doomed", want: 200})
	h.do(exchange{method: "DELETE", path: "/v1/acl/policies/doomed", want: 404})
	h.do(exchange{method: "DELETE", path: "/v1/acl/tokens/reader?dry_run=true", want: 200})
	h.do(exchange{method: "DELETE", path: "/v1/acl/tokens/reader", want: 200})
	h.do(exchange{method: "DELETE", path: "/v1/acl/tokens/reader", want: 404})
	h.do(exchange{method: "GET", path: "/v1/quotas", token: reader.Secret, want: 401, request: docInWords})
}
