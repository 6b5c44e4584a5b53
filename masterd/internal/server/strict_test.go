package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
)

// TestStrictBodies: what every endpoint refuses in a body beyond unknown
// fields, and that the refusal changes nothing. Each rule is in README's
// "Request bodies".
func TestStrictBodies(t *testing.T) {
	s := startDev(t)
	mustCall(t, s, "PUT", "/v1/test/agents/node-1", `{"hostname":"h1","resources":{"cpus":8,"mem":4096}}`)
	mustCall(t, s, "PUT", "/v1/ratelimits/spark", `{"qps":10}`)
	before := dump(t, s)

	names := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, `"r%d":1,`, i)
		}
		return strings.TrimSuffix(b.String(), ",")
	}
	subscribe := func(info string) string {
		return `{"type":"SUBSCRIBE","subscribe":{"framework_info":` + info + `}}`
	}
	tests := map[string]struct {
		method, path, body string
		field              string // details.field; "" for the body as a whole
		word               string // in the message
	}{
		"duplicate key":              {"PUT", "/v1/ratelimits/x", `{"qps":1,"qps":1000}`, "qps", "appears more than once"},
		"duplicate resource":         {"PUT", "/v1/quotas/x", `{"limits":{"cpus":1,"cpus":2}}`, "limits.cpus", "appears more than once"},
		"field name in upper case":   {"PUT", "/v1/ratelimits/x", `{"QPS":3}`, "QPS", `case-sensitive: did you mean "qps"?`},
		"field name in mixed case":   {"PUT", "/v1/quotas/x", `{"Limits":{"cpus":1}}`, "Limits", `did you mean "limits"?`},
		"null body":                  {"PUT", "/v1/quotas/x", `null`, "", "request body is null"},
		"null for a number":          {"PUT", "/v1/quotas/x", `{"limits":{"cpus":null}}`, "limits.cpus", "null is not allowed"},
		"null for force":             {"PUT", "/v1/quotas/x", `{"force":null}`, "force", "null is not allowed"},
		"rounds to zero":             {"PUT", "/v1/quotas/x", `{"limits":{"cpus":0.0004}}`, "limits.cpus", "0.0004 is not 0 but rounds to 0"},
		"rounds to zero, negative":   {"PUT", "/v1/quotas/x", `{"guarantees":{"cpus":-0.0001}}`, "guarantees.cpus", "rounds to 0"},
		"tiny, in plain digits":      {"PUT", "/v1/roles/x", `{"lending_limit":{"mem":1e-7}}`, "lending_limit.mem", "0.0000001 is not 0"},
		"65 resource names":          {"PUT", "/v1/quotas/x", `{"limits":{` + names(65) + `}}`, "limits", "names 65 resources; at most 64"},
		"reservation too many names": {"PUT", "/v1/reservations/r", `{"agent":"node-1","role":"db","resources":{` + names(65) + `}}`, "resources", "at most 64"},
		"string for a number":        {"PUT", "/v1/ratelimits/x", `{"qps":"3"}`, "qps", `want a number, not the string "3"`},
		"number for a string":        {"PUT", "/v1/reservations/r", `{"agent":5}`, "agent", "want a string, not the number 5"},
		"fraction for a whole":       {"PUT", "/v1/ratelimits/x", `{"qps":1,"burst":1.5}`, "burst", "want a whole number, not 1.5"},
		"whole number too large":     {"PUT", "/v1/ratelimits/x", `{"qps":1,"capacity":1e99}`, "capacity", "want a whole number"},
		"number out of range":        {"PUT", "/v1/quotas/x", `{"limits":{"cpus":1e400}}`, "limits.cpus", "out of range"},
		"array for the object":       {"PUT", "/v1/ratelimits", `[]`, "", "a JSON object is required"},
		"list where one is wanted":   {"PUT", "/v1/ratelimits", `{"limits":{"principal":"a"}}`, "limits", "want an array, not an object"},
		"in a list":                  {"PUT", "/v1/ratelimits", `{"limits":[{"principal":"a","QPS":1}]}`, "limits[0].QPS", "case-sensitive"},
		"scheduler duplicate key":    {"POST", "/v1/scheduler", subscribe(`{"name":"x","name":"y","roles":["*"]}`), "subscribe.framework_info.name", "more than once"},
		"scheduler field case":       {"POST", "/v1/scheduler", `{"Type":"SUBSCRIBE"}`, "Type", `did you mean "type"?`},
		"scheduler null body":        {"POST", "/v1/scheduler", `null`, "", "null"},
		"agent resources round to 0": {"POST", "/v1/agent", `{"type":"REGISTER","register":{"agent_info":{"name":"n2","resources":{"cpus":0.0001}}}}`, "register.agent_info.resources.cpus", "rounds to 0"},
		"agent duplicate key":        {"POST", "/v1/agent", `{"type":"REGISTER","type":"HEARTBEAT"}`, "type", "more than once"},
		"join field case":            {"POST", "/v1/cluster/servers", `{"ID":"m2"}`, "ID", `did you mean "id"?`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := call(t, s, tc.method, tc.path, tc.body)
			e := wantError(t, a, 400, api.CodeInvalidArgument, tc.word)
			if got, _ := e.Details["field"].(string); got != tc.field {
				t.Errorf("details.field %q, want %q", got, tc.field)
			}
			for _, goWord := range []string{"api.", "float64", "int", "Go ", "struct", "map["} {
				if strings.Contains(e.Message, goWord) && !strings.Contains(tc.word, goWord) {
					t.Errorf("message %q names a Go type (%s)", e.Message, goWord)
				}
			}
		})
	}
	if after := dump(t, s); after != before {
		t.Fatalf("refused requests changed the state:\nbefore %s\nafter  %s", before, after)
	}

	// What is accepted: 64 names, -0 stored and shown as 0, 0.0005 and up
	// rounded as documented.
	mustCall(t, s, "PUT", "/v1/quotas/many", `{"limits":{`+names(64)+`}}`)
	body := string(mustCall(t, s, "PUT", "/v1/quotas/zero", `{"guarantees":{"cpus":-0},"limits":{"cpus":-0.0,"mem":0.0005}}`).body)
	if strings.Contains(body, "-0") || !strings.Contains(body, `"limits":{"cpus":0,"mem":0.001}`) {
		t.Fatalf("stored quota: %s", body)
	}
	if body := string(mustCall(t, s, "GET", "/v1/quotas/zero", ``).body); strings.Contains(body, "-0") {
		t.Fatalf("read back: %s", body)
	}
	mustCall(t, s, "PUT", "/v1/roles/w", `{"weight":2,"lending_limit":{"cpus":-0}}`)
	if body := string(mustCall(t, s, "GET", "/v1/roles/w", ``).body); !strings.Contains(body, `"lending_limit":{"cpus":0}`) {
		t.Fatalf("role: %s", body)
	}
}

// TestNamesAreNotEchoed: an answer repeats a bounded part of a name, however
// long the name in the request.
func TestNamesAreNotEchoed(t *testing.T) {
	s := startDev(t)
	long := strings.Repeat("a", 100_000)
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/ratelimits/" + long},
		{"DELETE", "/v1/ratelimits/" + long},
		{"GET", "/v1/agents/" + long},
		{"GET", "/v1/quotas/" + long},
		{"DELETE", "/v1/quotas/" + long},
		{"DELETE", "/v1/roles/" + long},
		{"GET", "/v1/reservations/" + long},
		{"DELETE", "/v1/reservations/" + long},
		{"DELETE", "/v1/cluster/servers/" + long},
		{"GET", "/v1/" + long},
		{"POST", "/v1/quotas/" + long + "/x"},
		{"PATCH", "/v1/quotas"},
	} {
		a := call(t, s, tc.method, tc.path, "")
		if a.status < 400 || a.status >= 500 || len(a.body) > 1000 {
			t.Errorf("%s %.30s…: %d, %d bytes: %.200s", tc.method, tc.path, a.status, len(a.body), a.body)
		}
	}
	e := wantError(t, call(t, s, "GET", "/v1/"+long, ""), 404, api.CodeNotFound, "(100004 bytes)")
	if !strings.HasPrefix(e.Message, "no endpoint /v1/aaaa") {
		t.Errorf("message %q", e.Message)
	}
}

// TestOversizedHeadersAnswerJSON: net/http's own 431, and its other answers
// to requests no handler sees, come as JSON errors like every other answer.
func TestOversizedHeadersAnswerJSON(t *testing.T) {
	s := startDev(t)
	tests := map[string]struct {
		request string
		status  int
		code    string
		word    string
	}{
		"headers over the limit": {"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", maxHeaderBytes+8192) + "\r\n\r\n",
			431, api.CodePayloadTooLarge, "larger than the 65536 bytes allowed"},
		"no Host header":      {"GET /v1/health HTTP/1.1\r\n\r\n", 400, api.CodeInvalidArgument, "missing required Host header"},
		"malformed header":    {"GET /v1/health HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n", 400, api.CodeInvalidArgument, "malformed HTTP request"},
		"unsupported version": {"GET /v1/health HTTP/2.5\r\nHost: x\r\n\r\n", 505, api.CodeInvalidArgument, "version"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			conn := dialServer(t, s)
			if _, err := io.WriteString(conn, tc.request); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body api.ErrorBody
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Error == nil {
				t.Fatalf("%s: body is not a JSON error (%v)", resp.Status, err)
			}
			if resp.StatusCode != tc.status || body.Error.Code != tc.code || !strings.Contains(body.Error.Message, tc.word) ||
				resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get(api.HeaderIndex) == "" {
				t.Fatalf("%s %v %+v", resp.Status, resp.Header, body.Error)
			}
		})
	}
	// The connection rewriting those answers leaves every other one alone.
	mustCall(t, s, "PUT", "/v1/ratelimits/x", `{"qps":1}`)
	resp, err := http.Get(s.APIAddress() + "/v1/ratelimits/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET: %s", resp.Status)
	}
}

// dialServer opens a raw connection to s; the test fails rather than hang if
// the server never answers.
func dialServer(t testing.TB, s *Server) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.APIAddress(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	// Not a timing assertion: only what turns a hang into a failure.
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	return conn
}
