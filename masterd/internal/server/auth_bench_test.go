package server

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/allot/allot/masterd/api"
)

// BenchmarkACLRequestCheck is what ACLs add to a request on the server that
// serves it: resolve the bearer secret (hash + lookup) and check the
// route's capability for the path's role. The goal is under 1 µs.
func BenchmarkACLRequestCheck(b *testing.B) {
	s := startDev(b, func(c *Config) { c.ACL = true; c.OperatorToken = "bench-operator" })
	op := "Bearer bench-operator"
	mustOK := func(method, path, body string) []byte {
		a := call(b, s, method, path, body, "Authorization", op)
		if a.status != 200 {
			b.Fatalf("%s %s: %d %s", method, path, a.status, a.body)
		}
		return a.body
	}
	mustOK("PUT", "/v1/acl/policies/eng", `{"rules": [{"object": "quota", "access": "write", "roles": ["finance/*", "eng/*"]}]}`)
	var tok api.ACLToken
	if err := json.Unmarshal(mustOK("PUT", "/v1/acl/tokens/eng", `{"policies": ["eng"]}`), &tok); err != nil {
		b.Fatal(err)
	}
	r := httptest.NewRequest("PUT", "/v1/quotas/eng/ml/train", nil)
	r.Header.Set("Authorization", "Bearer "+tok.Secret)
	r.SetPathValue("role", "eng/ml/train")
	need := auth{kind: authCapability, object: api.ACLObjectQuota, access: api.ACLWrite}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		c, e := s.authenticate(r)
		if e != nil || !c.id.Allow(need.object, need.access, r.PathValue("role")) {
			b.Fatal("refused")
		}
	}
}
