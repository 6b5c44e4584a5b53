package localapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

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
