package server

import (
	"encoding/json"
	"testing"

	"github.com/allot/allot/masterd/api"
)

// FuzzWriteRequests sends arbitrary bodies and names to the write endpoints:
// whatever a user sends, the answer is never a 5xx and always JSON.
func FuzzWriteRequests(f *testing.F) {
	s := startDev(f)
	mustCall(f, s, "PUT", "/v1/test/agents/node-1", `{"hostname":"h1","resources":{"cpus":8,"mem":4096}}`)
	seeds := []string{
		`{"guarantees":{"cpus":1},"limits":{"cpus":2}}`, `{"limits":{"cpus":1e400}}`, `{"weight":2,"lending_limit":{"cpus":1}}`,
		`{"agent":"node-1","role":"db","resources":{"cpus":1}}`, `{"qps":55.5,"burst":10,"capacity":1000}`,
		`{"limits":[{"principal":"a","qps":1}],"aggregate_default_qps":3}`, `{"force":true}`, `{`, `null`, `[]`, `""`,
	}
	paths := []string{"/v1/quotas/", "/v1/roles/", "/v1/reservations/", "/v1/ratelimits/", "/v1/ratelimits-default", "/v1/ratelimits"}
	for i, seed := range seeds {
		f.Add(uint8(i), "eng/ml", seed, false)
	}
	f.Fuzz(func(t *testing.T, which uint8, name, body string, dryRun bool) {
		path := paths[int(which)%len(paths)]
		if path[len(path)-1] == '/' {
			path += api.EscapePath(name)
		}
		if dryRun {
			path += "?dry_run=true"
		}
		a := call(t, s, "PUT", path, body)
		if a.status >= 500 {
			t.Fatalf("PUT %s %q: %d %s", path, body, a.status, a.body)
		}
		if !json.Valid(a.body) {
			t.Fatalf("PUT %s %q: answer is not JSON: %s", path, body, a.body)
		}
	})
}
