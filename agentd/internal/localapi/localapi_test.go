package localapi

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/allot/allot/agentd/internal/containerizer"
	"github.com/allot/allot/masterd/api"
)

// Bad input gets the JSON error of every allot API and never reaches the
// containers (the source here has none: a call that reached it would
// panic).
func TestBadInput(t *testing.T) {
	h := New(nil, prometheus.NewRegistry())
	tests := map[string]struct {
		method, target string
		status         int
		code           string
	}{
		"POST":            {http.MethodPost, "/v1/containers", 405, api.CodeInvalidArgument},
		"DELETE":          {http.MethodDelete, "/v1/health", 405, api.CodeInvalidArgument},
		"double slash":    {http.MethodGet, "/v1//containers", 400, api.CodeInvalidArgument},
		"dot dot":         {http.MethodGet, "/v1/containers/../health", 400, api.CodeInvalidArgument},
		"unknown path":    {http.MethodGet, "/v1/tasks", 404, api.CodeNotFound},
		"long path":       {http.MethodGet, "/" + strings.Repeat("x", 100000), 404, api.CodeNotFound},
		"query parameter": {http.MethodGet, "/v1/containers?task_id=x", 400, api.CodeInvalidArgument},
		"malformed query": {http.MethodGet, "/v1/containers?%zz", 400, api.CodeInvalidArgument},
		"health":          {http.MethodGet, "/v1/health", 200, ""},
		"metrics":         {http.MethodGet, "/metrics", 200, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.target, nil))
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if tc.code == "" {
				return
			}
			var body api.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error == nil || body.Error.Code != tc.code {
				t.Fatalf("body %s, want error code %s", rec.Body, tc.code)
			}
			if rec.Body.Len() > 1024 {
				t.Fatalf("the error echoes %d bytes", rec.Body.Len())
			}
		})
	}
}

func TestUsageCpus(t *testing.T) {
	h := New(nil, prometheus.NewRegistry())
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := containerizer.Container{ID: "c", StartedAt: start}
	steps := []struct {
		after time.Duration
		nanos uint64
		want  float64
	}{
		{2 * time.Second, 1e9, 0.5},                              // no sample yet: since the start
		{3 * time.Second, 1.5e9, 0.5},                            // since the previous call
		{3*time.Second + 5*time.Millisecond, 1.5e9, 1.5 / 3.005}, // too soon after it: since the start
		{2 * time.Minute, 2.4e9, 0.02},                           // the previous is over a minute old
		{2*time.Minute + time.Second, 1.2e9, 1.2 / 121},          // the counter went back: since the start
	}
	for i, s := range steps {
		if got := h.cpus(c, s.nanos, start.Add(s.after)); math.Abs(got-s.want) > 1e-9 {
			t.Errorf("step %d: %v cores, want %v", i, got, s.want)
		}
	}
}
