package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/ratelimit/fakeclock"
)

// labeledFramework is a framework subscribed over real HTTP.
type labeledFramework struct {
	id, streamID string
}

func subscribeLabeled(t *testing.T, s *Server, name, principal, label string) labeledFramework {
	t.Helper()
	fw := openStream[api.Event](t, s, api.SchedulerPath, api.Call{Type: api.CallSubscribe, Subscribe: &api.Subscribe{
		FrameworkInfo: api.FrameworkInfo{Name: name, Principal: principal, Label: label, Roles: []string{"*"}}}})
	t.Cleanup(fw.cancel)
	id := fw.next(t, "SUBSCRIBED", func(e api.Event) bool { return e.Type == api.EventSubscribed }).Subscribed.FrameworkID
	return labeledFramework{id: id, streamID: fw.id}
}

// revive sends a REVIVE and returns the status and, for an error, its
// message.
func (f labeledFramework) revive(t *testing.T, s *Server) (int, string) {
	t.Helper()
	body, _ := json.Marshal(api.Call{FrameworkID: f.id, Type: api.CallRevive})
	req, _ := http.NewRequest("POST", s.APIAddress()+api.SchedulerPath, bytes.NewReader(body))
	req.Header.Set(api.HeaderStreamID, f.streamID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e api.ErrorBody
	if json.NewDecoder(resp.Body).Decode(&e) == nil && e.Error != nil {
		return resp.StatusCode, e.Error.Message
	}
	return resp.StatusCode, ""
}

// TestLabeledFrameworksAreThrottledApart runs two frameworks of one
// principal, one labeled batch (with a limit of its own) and one labeled web
// (without), against a real server: batch is held to its label's rate, web
// only to the principal's, and the principal's limit caps both together.
// The limiter's clock stands still but when the test moves it, and every
// queue has capacity 0, so each call is decided at once.
func TestLabeledFrameworksAreThrottledApart(t *testing.T) {
	clock := fakeclock.New()
	s := startDev(t, func(c *Config) { c.limiterClock = clock })
	batch := subscribeLabeled(t, s, "nightly", "spark", "batch")
	web := subscribeLabeled(t, s, "shop", "spark", "web")
	mustCall(t, s, "PUT", "/v1/ratelimits",
		`{"limits":[{"principal":"spark","qps":4,"burst":4,"capacity":0},{"principal":"spark","label":"batch","qps":1,"burst":1,"capacity":0}]}`)
	waitForLimiter(t, s, func(c []limitSeen) bool { return len(c) == 2 })

	var frameworks api.FrameworkList
	if err := json.Unmarshal(mustCall(t, s, "GET", "/v1/frameworks", "").body, &frameworks); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{}
	for _, f := range frameworks.Frameworks {
		labels[f.ID] = f.Label
	}
	if labels[batch.id] != "batch" || labels[web.id] != "web" {
		t.Fatalf("GET /v1/frameworks labels %v", labels)
	}

	type step struct {
		who        string
		fw         labeledFramework
		want       int
		wantReason string // in the 429's message
	}
	run := func(phase string, steps []step) {
		t.Helper()
		for i, st := range steps {
			status, msg := st.fw.revive(t, s)
			if status != st.want || (st.want == 429 && !strings.Contains(msg, st.wantReason)) {
				t.Fatalf("%s, call %d of %s: %d %q, want %d naming %q", phase, i, st.who, status, msg, st.want, st.wantReason)
			}
		}
	}
	const byLabel, byPrincipal = "principal spark label batch is over", "principal spark is over"
	// spark's 4 tokens; batch's 1.
	run("at first", []step{
		{"batch", batch, 202, ""},      // batch's token, spark's 1st
		{"batch", batch, 429, byLabel}, // batch has none left
		{"web", web, 202, ""},          // spark's 2nd
		{"web", web, 202, ""},          // 3rd
		{"web", web, 202, ""},          // 4th
		{"web", web, 429, byPrincipal}, // spark has none left
		{"batch", batch, 429, byLabel}, // still none for batch
	})
	// A second later both buckets are full again; web takes spark's
	// whole burst, and batch, with its own token, is held by spark's.
	clock.Advance(time.Second)
	run("a second later", []step{
		{"web", web, 202, ""},
		{"web", web, 202, ""},
		{"web", web, 202, ""},
		{"web", web, 202, ""},
		{"batch", batch, 429, byPrincipal},
		{"batch", batch, 429, byLabel}, // its token went on the refused call
	})

	resp, err := http.Get(s.APIAddress() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The SUBSCRIBEs, made before the limits, count too.
	for _, line := range []string{
		`allot_framework_messages_received_total{label="batch",principal="spark"} 6`,
		`allot_framework_messages_processed_total{label="batch",principal="spark"} 2`,
		`allot_ratelimit_rejected_total{label="batch",principal="spark"} 4`,
		`allot_framework_messages_received_total{label="web",principal="spark"} 9`,
		`allot_framework_messages_processed_total{label="web",principal="spark"} 8`,
		`allot_ratelimit_rejected_total{label="web",principal="spark"} 1`,
	} {
		if !strings.Contains(string(metrics), "\n"+line+"\n") {
			t.Errorf("/metrics lacks the line %s", line)
		}
	}
}
