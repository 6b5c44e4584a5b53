package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// FuzzSchedulerAndAgentCalls sends arbitrary calls to the scheduler API and
// the agent protocol, on the live sessions of a subscribed framework and a
// registered agent: whatever a framework or agent sends, the answer is never
// a 5xx and never a panic. FW and AG in a body stand for their ids.
func FuzzSchedulerAndAgentCalls(f *testing.F) {
	s := startDev(f, func(c *Config) { c.AllocationInterval = 10 * time.Millisecond })
	ag := openStream[api.AgentEvent](f, s, api.AgentProtocolPath, api.AgentCall{Type: api.AgentCallRegister,
		Register: &api.AgentRegister{AgentInfo: api.AgentInfo{Name: "node-1", Resources: api.Resources{"cpus": 8, "mem": 4096}}}})
	agentID := ag.next(f, "REGISTERED", func(e api.AgentEvent) bool { return e.Type == api.AgentEventRegistered }).Registered.AgentID
	fw := openStream[api.Event](f, s, api.SchedulerPath, api.Call{Type: api.CallSubscribe, Subscribe: &api.Subscribe{
		FrameworkInfo: api.FrameworkInfo{Name: "fuzz", Roles: []string{"*"}}}})
	fwID := fw.next(f, "SUBSCRIBED", func(e api.Event) bool { return e.Type == api.EventSubscribed }).Subscribed.FrameworkID
	seeds := []string{
		`{"framework_id":"FW","type":"ACCEPT","accept":{"offer_ids":["x"],"operations":[{"type":"LAUNCH","launch":{"tasks":[{"task_id":"t","agent_id":"AG","resources":{"cpus":1},"command":{"value":"sleep 1"}}]}}]}}`,
		`{"framework_id":"FW","type":"ACCEPT","accept":{"offer_ids":[],"operations":[{"type":"LAUNCH_GROUP","launch_group":{"executor":{"executor_id":"e","resources":{"cpus":0.1}},"tasks":[{"task_id":"g","agent_id":"AG","resources":{"mem":32},"limits":{"mem":"Infinity"},"container":{"linux_info":{"share_cgroups":false}},"command":{"value":"x"}}]}}]}}`,
		`{"framework_id":"FW","type":"DECLINE","decline":{"offer_ids":["x"],"filters":{"refuse_seconds":1e300}}}`,
		`{"framework_id":"FW","type":"REVIVE","revive":{"roles":["*"]}}`, `{"framework_id":"FW","type":"SUPPRESS"}`,
		`{"framework_id":"FW","type":"KILL","kill":{"task_id":"t","agent_id":"AG"}}`,
		`{"framework_id":"FW","type":"ACKNOWLEDGE","acknowledge":{"agent_id":"AG","task_id":"t","uuid":"u"}}`,
		`{"framework_id":"FW","type":"RECONCILE","reconcile":{"tasks":[{"task_id":"t"}]}}`,
		`{"agent_id":"AG","type":"UPDATE","update":{"framework_id":"FW","status":{"task_id":"t","state":"TASK_RUNNING","uuid":"u"}}}`,
		`{"agent_id":"AG","type":"HEARTBEAT","heartbeat":{}}`, `{"type":"SUBSCRIBE"}`, `{"type":"REGISTER"}`, `{`, `null`, `[]`,
	}
	for _, seed := range seeds {
		f.Add(seed, strings.HasPrefix(seed, `{"agent_id"`))
	}
	f.Fuzz(func(t *testing.T, body string, toAgent bool) {
		body = strings.NewReplacer("FW", fwID, "AG", agentID).Replace(body)
		path, stream := api.SchedulerPath, fw.id
		if toAgent {
			path, stream = api.AgentProtocolPath, ag.id
		}
		// A call that opens a stream holds it until this deadline.
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, "POST", path, strings.NewReader(body))
		req.Header.Set(api.HeaderStreamID, stream)
		rec := httptest.NewRecorder()
		s.http.Handler.ServeHTTP(rec, req)
		switch {
		case rec.Code >= 500:
			t.Fatalf("POST %s %q: %d %s", path, body, rec.Code, rec.Body)
		case rec.Code == http.StatusAccepted || rec.Code == http.StatusOK:
		case !json.Valid(rec.Body.Bytes()):
			t.Fatalf("POST %s %q: answer is not JSON: %s", path, body, rec.Body)
		}
	})
}
