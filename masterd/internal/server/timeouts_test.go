package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
)

// shortTimeouts make the tests below wait a fraction of a second for what
// takes tens of seconds in production. The tests wait for the server to act
// (answer, close), never for a time to pass, so they hold on a slow machine.
var shortTimeouts = httpTimeouts{header: 300 * time.Millisecond, body: 300 * time.Millisecond, idle: 300 * time.Millisecond, write: 300 * time.Millisecond}

// TestStalledRequestsDoNotHoldConnections talks raw TCP to the server: a
// client that stops sending in the middle of a request loses its connection,
// with an answer where one can still be given.
func TestStalledRequestsDoNotHoldConnections(t *testing.T) {
	s := startDev(t, func(c *Config) {
		c.httpTimeouts = shortTimeouts
		// The cases that get a real answer must not lose it to a write
		// deadline on a busy machine: none of them is about writes.
		c.httpTimeouts.write = 30 * time.Second
	})
	tests := map[string]struct {
		request string
		status  int    // -1: what net/http answers (JSON) or none, then the close
		word    string // in the error message
	}{
		// Content-Length: 100, 9 bytes sent.
		"body stalls":                {"PUT /v1/ratelimits/x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + `{"qps":1,`, 408, "did not arrive in time (9 of 100 bytes received)"},
		"chunked body stalls":        {"PUT /v1/ratelimits/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n9\r\n" + `{"qps":1,` + "\r\n", 408, "did not arrive in time (9 of an unknown number of bytes received)"},
		"SUBSCRIBE body stalls":      {"POST /v1/scheduler HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + `{"type":"`, 408, "did not arrive in time"},
		"REGISTER body stalls":       {"POST /v1/agent HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + `{"type":"`, 408, "did not arrive in time"},
		"refused before the body":    {"PUT /v1/ratelimits/x?bogus=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + `{"qps":1,`, 400, "bogus"},
		"body of a GET never comes":  {"GET /v1/quotas HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n", 200, ""},
		"headers stall":              {"GET /v1/health HTTP/1.1\r\nHost: x\r\n", -1, ""},
		"request line stalls":        {"GET /v1/heal", -1, ""},
		"idle after a full exchange": {"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n", 200, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			conn := dialServer(t, s)
			if _, err := io.WriteString(conn, tc.request); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(conn)
			if tc.status == -1 {
				if resp, err := http.ReadResponse(br, nil); err == nil {
					var e api.ErrorBody
					if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Error == nil {
						t.Fatalf("%s, not a JSON error", resp.Status)
					}
					resp.Body.Close()
				}
				expectClosed(t, br)
				return
			}
			{
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("no answer: %v", err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.status {
					t.Fatalf("%s: %s", resp.Status, body)
				}
				if tc.word != "" {
					var e api.ErrorBody
					if err := json.Unmarshal(body, &e); err != nil || e.Error == nil || !strings.Contains(e.Error.Message, tc.word) {
						t.Fatalf("answer %s, want an error saying %q", body, tc.word)
					}
				}
			}
			expectClosed(t, br)
		})
	}
	// Nothing the stalled writes carried was stored.
	wantError(t, call(t, s, "GET", "/v1/ratelimits/x", ""), 404, api.CodeNotFound, "")
}

// expectClosed waits for the server to close the connection.
func expectClosed(t testing.TB, br *bufio.Reader) {
	t.Helper()
	b, err := br.ReadByte()
	var ne net.Error
	switch {
	case err == nil:
		rest, _ := br.Peek(br.Buffered())
		t.Fatalf("the server sent more: %q", append([]byte{b}, rest...))
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatal("the server kept the connection open")
	}
}

// TestStreamsOutliveTheBodyTimeout: SUBSCRIBE and REGISTER send their body
// within the body timeout, then their answer streams for as long as the
// session lasts.
func TestStreamsOutliveTheBodyTimeout(t *testing.T) {
	s := startDev(t, func(c *Config) {
		c.httpTimeouts = shortTimeouts
		c.HeartbeatInterval = 50 * time.Millisecond
	})
	ag := openStream[api.AgentEvent](t, s, api.AgentProtocolPath, api.AgentCall{Type: api.AgentCallRegister,
		Register: &api.AgentRegister{AgentInfo: api.AgentInfo{Name: "node-1", Resources: api.Resources{"cpus": 1}}}})
	ag.next(t, "REGISTERED", func(e api.AgentEvent) bool { return e.Type == api.AgentEventRegistered })
	fw := openStream[api.Event](t, s, api.SchedulerPath, api.Call{Type: api.CallSubscribe, Subscribe: &api.Subscribe{
		FrameworkInfo: api.FrameworkInfo{Name: "long", Roles: []string{"*"}}}})
	fw.next(t, "SUBSCRIBED", func(e api.Event) bool { return e.Type == api.EventSubscribed })
	// Heartbeats keep coming well past every timeout of the connection.
	for start := time.Now(); time.Since(start) < 4*shortTimeouts.body; {
		fw.next(t, "HEARTBEAT", func(e api.Event) bool { return e.Type == api.EventHeartbeat })
	}
	// And the agent's stream is still open: a call on it is taken.
	var cluster api.Cluster
	decode(t, mustCall(t, s, "GET", "/v1/cluster", "").body, &cluster)
	var agents api.AgentList
	decode(t, mustCall(t, s, "GET", "/v1/agents", "").body, &agents)
	if len(agents.Agents) != 1 || !agents.Agents[0].Connected {
		t.Fatalf("agents %+v: the agent's stream ended", agents.Agents)
	}
}

// TestWriteDeadlineDoesNotOutliveItsAnswer: the deadline an answer got does
// not fail a later answer on the same connection that writes no JSON.
func TestWriteDeadlineDoesNotOutliveItsAnswer(t *testing.T) {
	s := startDev(t, func(c *Config) {
		c.httpTimeouts = shortTimeouts
		c.httpTimeouts.idle = time.Minute
	})
	conn := dialServer(t, s)
	br := bufio.NewReader(conn)
	get := func(path string) int {
		t.Helper()
		if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if status := get("/v1/health"); status != 200 {
		t.Fatalf("health: %d", status)
	}
	// The health answer's write deadline passes for sure (time only moves
	// on); /metrics writes through promhttp, which sets none.
	time.Sleep(2 * shortTimeouts.write)
	if status := get("/metrics"); status != 200 {
		t.Fatalf("metrics: %d", status)
	}
}
