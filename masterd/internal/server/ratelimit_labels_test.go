package server

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/allot/allot/masterd/api"
)

func decodeRateLimit(t *testing.T, a answer) api.RateLimit {
	t.Helper()
	var l api.RateLimit
	if err := json.Unmarshal(a.body, &l); err != nil {
		t.Fatalf("decode %s: %v", a.body, err)
	}
	return l
}

func TestLabeledRateLimitEndpoints(t *testing.T) {
	s := startDev(t)
	const path = "/v1/ratelimits/spark/labels/batch"
	if a := call(t, s, "GET", path, ""); a.status != 404 || !strings.Contains(string(a.body), "label batch") {
		t.Fatalf("GET before PUT: %d %s, want 404 naming the label", a.status, a.body)
	}

	// A dry run answers what would be stored and stores nothing.
	var dryRun api.DryRun
	if err := json.Unmarshal(mustCall(t, s, "PUT", path+"?dry_run=true", `{"qps": 5}`).body, &dryRun); err != nil || !dryRun.DryRun {
		t.Fatalf("dry run: %v %+v", err, dryRun)
	}
	dry := decodeRateLimit(t, answer{body: dryRun.Object})
	if dry.Principal != "spark" || dry.Label != "batch" || dry.QPS == nil || *dry.QPS != 5 {
		t.Fatalf("dry run answered %+v", dry)
	}
	if a := call(t, s, "GET", path, ""); a.status != 404 {
		t.Fatalf("GET after a dry run: %d %s, want 404", a.status, a.body)
	}

	created := decodeRateLimit(t, mustCall(t, s, "PUT", path, `{"qps": 5, "burst": 2}`))
	if created.Label != "batch" || created.Burst != 2 || created.Capacity != api.DefaultRateLimitCapacity || created.Version == 0 {
		t.Fatalf("PUT answered %+v", created)
	}
	got := decodeRateLimit(t, mustCall(t, s, "GET", path, ""))
	if got.Label != "batch" || got.Version != created.Version || *got.QPS != 5 {
		t.Fatalf("GET answered %+v, want %+v", got, created)
	}
	// The principal has no limit of its own: the label's is apart.
	if a := call(t, s, "GET", "/v1/ratelimits/spark", ""); a.status != 404 {
		t.Fatalf("GET of the principal's own limit: %d %s, want 404", a.status, a.body)
	}
	var cfg api.RateLimitConfig
	if err := json.Unmarshal(mustCall(t, s, "GET", "/v1/ratelimits", "").body, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Limits) != 1 || cfg.Limits[0].Principal != "spark" || cfg.Limits[0].Label != "batch" {
		t.Fatalf("GET /v1/ratelimits: %+v", cfg.Limits)
	}

	// If-Match on a stale version is refused and changes nothing.
	stale := strconv.FormatUint(created.Version-1, 10)
	if a := call(t, s, "PUT", path, `{"qps": 50}`, "If-Match", stale); a.status != 412 {
		t.Fatalf("PUT with a stale If-Match: %d %s, want 412", a.status, a.body)
	}
	if a := call(t, s, "PUT", path, `{"qps": 50}`, "If-None-Match", "*"); a.status != 412 {
		t.Fatalf("PUT with If-None-Match * on an existing limit: %d %s, want 412", a.status, a.body)
	}
	if got := decodeRateLimit(t, mustCall(t, s, "GET", path, "")); *got.QPS != 5 || got.Version != created.Version {
		t.Fatalf("after refused writes: %+v", got)
	}
	updated := decodeRateLimit(t, call(t, s, "PUT", path, `{"qps": 50}`, "If-Match", strconv.FormatUint(created.Version, 10)))
	if *updated.QPS != 50 || updated.Version <= created.Version {
		t.Fatalf("PUT with If-Match answered %+v", updated)
	}

	// The limiter runs the labeled limit.
	waitForLimiter(t, s, func(c []limitSeen) bool { return len(c) == 1 && c[0] == limitSeen{"spark", "batch", 50} })

	if a := call(t, s, "DELETE", path+"?dry_run=true", ""); a.status != 200 {
		t.Fatalf("dry-run DELETE: %d %s", a.status, a.body)
	}
	mustCall(t, s, "GET", path, "")
	mustCall(t, s, "DELETE", path, "")
	if a := call(t, s, "GET", path, ""); a.status != 404 {
		t.Fatalf("GET after DELETE: %d %s, want 404", a.status, a.body)
	}
	if a := call(t, s, "DELETE", path, ""); a.status != 404 {
		t.Fatalf("second DELETE: %d %s, want 404", a.status, a.body)
	}
	waitForLimiter(t, s, func(c []limitSeen) bool { return len(c) == 0 })
}

// limitSeen is one throttling limit as this server's limiter runs it.
type limitSeen struct {
	principal, label string
	qps              float64
}

func waitForLimiter(t *testing.T, s *Server, cond func([]limitSeen) bool) {
	t.Helper()
	eventuallyOK(t, func() bool {
		var seen []limitSeen
		for _, l := range s.limiter.Config().Limits {
			if l.QPS != nil {
				seen = append(seen, limitSeen{l.Principal, l.Label, *l.QPS})
			}
		}
		slices.SortFunc(seen, func(a, b limitSeen) int {
			return cmp.Or(strings.Compare(a.principal, b.principal), strings.Compare(a.label, b.label))
		})
		return cond(seen)
	})
}

// TestLabeledRateLimitBadInput: every refusal is a 400 that changes nothing.
func TestLabeledRateLimitBadInput(t *testing.T) {
	s := startDev(t)
	mustCall(t, s, "PUT", "/v1/ratelimits/spark/labels/batch", `{"qps": 5}`)
	mustCall(t, s, "PUT", "/v1/ratelimits/spark", `{"qps": 10}`)
	before := string(mustCall(t, s, "GET", "/v1/ratelimits", "").body)
	tests := map[string]struct {
		method, path, body string
		wantMessage        string
	}{
		"label with a space":      {"PUT", "/v1/ratelimits/spark/labels/a%20b", `{"qps": 1}`, "label"},
		"label too long":          {"PUT", "/v1/ratelimits/spark/labels/" + strings.Repeat("l", 300), `{"qps": 1}`, "label"},
		"principal with a space":  {"PUT", "/v1/ratelimits/a%20b/labels/batch", `{"qps": 1}`, "principal"},
		"negative qps":            {"PUT", "/v1/ratelimits/spark/labels/batch", `{"qps": -1}`, "qps"},
		"zero qps":                {"PUT", "/v1/ratelimits/spark/labels/batch", `{"qps": 0}`, "qps"},
		"negative burst":          {"PUT", "/v1/ratelimits/spark/labels/batch", `{"qps": 1, "burst": -1}`, "burst"},
		"negative capacity":       {"PUT", "/v1/ratelimits/spark/labels/batch", `{"qps": 1, "capacity": -1}`, "capacity"},
		"unknown field":           {"PUT", "/v1/ratelimits/spark/labels/batch", `{"qps": 1, "label": "x"}`, "label"},
		"not JSON":                {"PUT", "/v1/ratelimits/spark/labels/batch", `{"qps":`, ""},
		"bad label on GET":        {"GET", "/v1/ratelimits/spark/labels/a%20b", "", "label"},
		"bad label on DELETE":     {"DELETE", "/v1/ratelimits/spark/labels/a%20b", "", "label"},
		"bad principal on DELETE": {"DELETE", "/v1/ratelimits/a%20b/labels/batch", "", "principal"},
		"bad If-Match":            {"PUT", "/v1/ratelimits/spark/labels/batch", `{"qps": 1}`, "If-Match"},
		"unknown query parameter": {"PUT", "/v1/ratelimits/spark/labels/batch?dryrun=true", `{"qps": 1}`, "dry_run"},
		"duplicate principal and label in the configuration": {"PUT", "/v1/ratelimits",
			`{"limits":[{"principal":"spark","label":"a","qps":1},{"principal":"spark","label":"a","qps":2}]}`, "more than once"},
		"bad label in the configuration": {"PUT", "/v1/ratelimits",
			`{"limits":[{"principal":"spark","label":"a b","qps":1}]}`, "label"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var headers []string
			if name == "bad If-Match" {
				headers = []string{"If-Match", "yesterday"}
			}
			a := call(t, s, tc.method, tc.path, tc.body, headers...)
			if a.status != 400 || !strings.Contains(string(a.body), tc.wantMessage) {
				t.Fatalf("%s %s: %d %s, want 400 naming %q", tc.method, tc.path, a.status, a.body, tc.wantMessage)
			}
			if after := string(mustCall(t, s, "GET", "/v1/ratelimits", "").body); after != before {
				t.Fatalf("the configuration changed:\n%s\nwas\n%s", after, before)
			}
		})
	}
}

// TestRateLimitConfigWithLabels: the Mesos-format configuration carries
// labeled entries beside the principals' own.
func TestRateLimitConfigWithLabels(t *testing.T) {
	s := startDev(t)
	mustCall(t, s, "PUT", "/v1/ratelimits",
		`{"limits":[{"principal":"spark","qps":10},{"principal":"spark","label":"batch","qps":2},{"principal":"flink","label":"batch"}],"aggregate_default_qps":1}`)
	if got := decodeRateLimit(t, mustCall(t, s, "GET", "/v1/ratelimits/spark/labels/batch", "")); got.QPS == nil || *got.QPS != 2 {
		t.Fatalf("spark/batch: %+v", got)
	}
	if got := decodeRateLimit(t, mustCall(t, s, "GET", "/v1/ratelimits/flink/labels/batch", "")); got.QPS != nil {
		t.Fatalf("flink/batch without qps: %+v", got)
	}
	if got := decodeRateLimit(t, mustCall(t, s, "GET", "/v1/ratelimits/spark", "")); got.Label != "" || *got.QPS != 10 {
		t.Fatalf("spark: %+v", got)
	}
	var cfg api.RateLimitConfig
	if err := json.Unmarshal(mustCall(t, s, "GET", "/v1/ratelimits", "").body, &cfg); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, l := range cfg.Limits {
		keys = append(keys, l.Principal+"/"+l.Label)
	}
	if strings.Join(keys, " ") != "flink/batch spark/ spark/batch" {
		t.Fatalf("limits %v", keys)
	}
	waitForLimiter(t, s, func(c []limitSeen) bool {
		return len(c) == 2 && c[0] == limitSeen{"spark", "", 10} && c[1] == limitSeen{"spark", "batch", 2}
	})
}
