package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// TestUIOnADevServer opens the UI of `masterd -dev`: no token asked for,
// empty lists that say what to do, and a banner once the server is gone.
func TestUIOnADevServer(t *testing.T) {
	b := newBrowser(t, 90*time.Second)
	masterd, err := testcluster.Build("")
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	base := "http://" + addr
	server := start(t, "masterd -dev", masterd, "-dev", "-http", addr)
	eventually(t, "masterd -dev answers", func() error {
		resp, err := http.Get(base + "/v1/cluster")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return &statusError{resp.Status}
		}
		return nil
	})

	// GET / leads to the UI.
	b.open(base + "/")
	b.waitView("cluster")
	var path string
	b.mustEval(`location.pathname`, &path)
	if path != "/ui/" {
		t.Errorf("GET / landed on %s, want /ui/", path)
	}
	var tokenBoxHidden bool
	b.mustEval(`document.getElementById('token-box').hidden`, &tokenBoxHidden)
	if !tokenBoxHidden {
		t.Errorf("a -dev server needs no token, but the page asks for one: %s", b.text("#token-box"))
	}
	eventually(t, "the dev server in the servers table", func() error {
		rows := b.tables()["servers"]
		if len(rows) != 1 || rows[0].ID != "dev" || rows[0].Cells["leader"] != "leader" {
			return &statusError{"servers table: " + b.text("#view")}
		}
		return nil
	})
	checkCardsFit(t, b)
	b.screenshot("dev-cluster")
	if who := b.text("#whoami"); who != "as anonymous" {
		t.Errorf("header says %q, want %q (-dev has no ACLs)", who, "as anonymous")
	}

	// Empty lists say what to do.
	for _, tc := range []struct{ hash, view, want string }{
		{"#/agents", "agents", "agentd -master " + base},
		{"#/tasks", "tasks", "No tasks."},
		{"#/frameworks", "frameworks", "No frameworks."},
		{"#/roles", "roles", "No roles yet."},
	} {
		b.goTo(tc.hash, tc.view)
		if got := b.text("#view [data-empty]"); !strings.Contains(got, tc.want) {
			t.Errorf("%s: empty state %q, want it to say %q", tc.hash, got, tc.want)
		}
	}
	checkDevRateLimits(t, b, base)
	checkAuditAfterRestore(t, b, base)
	b.goTo("#/agents", "agents")
	b.screenshot("dev-agents-empty")

	// The server goes away: the page says so and keeps what it showed.
	server.kill()
	b.waitFor("the unreachable banner", `(() => { const e = document.getElementById('banner');
		return !e.hidden && e.dataset.kind === 'unreachable'; })()`)
	if got := b.text("#banner"); !strings.Contains(got, "Cannot reach masterd at "+base) {
		t.Errorf("banner %q, want it to name %s", got, base)
	}
	if got := b.text("#view [data-empty]"); !strings.Contains(got, "agentd -master") {
		t.Errorf("the page dropped what it showed once the server went away: %q", got)
	}
	b.screenshot("dev-unreachable")

}

type statusError struct{ s string }

func (e *statusError) Error() string { return e.s }

// checkDevRateLimits makes the rows a new user met on -dev: calls that name
// no principal (counted under principal ""), and a label whose limit was
// deleted while its counters stay. Neither may read as a blank or as a
// limit that exists.
func checkDevRateLimits(t *testing.T, b *browser, base string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := api.NewClient([]string{base}, "")
	if err != nil {
		t.Fatal(err)
	}
	qps := func(v float64) *float64 { return &v }
	if _, err := client.PutRateLimitDefault(ctx, api.RateLimitRequest{QPS: qps(100)}, api.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.PutRateLimit(ctx, "spark", api.RateLimitRequest{QPS: qps(50)}, api.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.PutLabeledRateLimit(ctx, "spark", "batch", api.RateLimitRequest{QPS: qps(20)}, api.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A framework of spark labeled batch subscribes (its call is counted as
	// it passes the limiter), then the label's limit goes.
	subscribe := api.Call{Type: api.CallSubscribe, Subscribe: &api.Subscribe{FrameworkInfo: api.FrameworkInfo{Name: "batch", Principal: "spark", Label: "batch", Roles: []string{"*"}}}}
	if status := schedulerCall(t, ctx, base, subscribe); status != http.StatusOK {
		t.Fatalf("SUBSCRIBE as spark/batch: %d", status)
	}
	if err := client.DeleteLabeledRateLimit(ctx, "spark", "batch", api.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A call for a framework the server does not know names no principal.
	// (It is refused after the limiter counted it; the rows below check
	// that it was.)
	if status := schedulerCall(t, ctx, base, api.Call{Type: api.CallReconcile, FrameworkID: "no-such-framework", Reconcile: &api.Reconcile{}}); status < 400 {
		t.Fatalf("RECONCILE of an unknown framework: %d, want it refused", status)
	}

	b.goTo("#/ratelimits", "ratelimits")
	eventually(t, "the rate-limit rows of -dev", func() error {
		want := map[string]map[string]string{
			"":            {"principal": "(no principal)", "qps": "none (default)"},
			"spark":       {"principal": "spark", "qps": "50"},
			"spark/batch": {"principal": "spark", "label": "batch", "qps": "none (principal's)"},
			"anonymous":   {"principal": "anonymous", "qps": "none (default)"},
		}
		var mine []row
		for _, r := range b.tables()["ratelimits"] {
			if _, ok := want[r.ID]; ok {
				mine = append(mine, r)
			}
		}
		return diffRows("ratelimits", mine, want)
	})
	b.screenshot("dev-ratelimits")
}

// schedulerCall makes one scheduler call and returns its status; a
// SUBSCRIBE's stream is closed once its answer's headers are in.
func schedulerCall(t *testing.T, ctx context.Context, base string, call api.Call) int {
	t.Helper()
	body, err := json.Marshal(call)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+api.SchedulerPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(fmt.Errorf("POST %s: %w", api.SchedulerPath, err))
	}
	resp.Body.Close()
	return resp.StatusCode
}

// checkCardsFit fails the test when a card of the cluster view cuts its
// text: every line of every card is read whole on a 1366×768 screen (the
// browser's size).
func checkCardsFit(t *testing.T, b *browser) {
	t.Helper()
	var cut []string
	b.mustEval(`[...document.querySelectorAll('#view .card, #view .card > *')]
		.filter((e) => e.scrollWidth > e.clientWidth + 1 || e.scrollHeight > e.clientHeight + 1)
		.map((e) => (e.closest('[data-card]') || e).dataset.card + ': ' + e.innerText.replace(/\s+/g, ' '))`, &cut)
	var n int
	b.mustEval(`document.querySelectorAll('#view .card').length`, &n)
	if n == 0 {
		t.Error("the cluster view shows no cards")
	}
	for _, c := range cut {
		t.Errorf("card text is cut off at 1366×768: %s", c)
	}
}

// checkAuditAfterRestore restores a backup taken before the last write,
// with the audit view open: the view must drop the entries the restore
// undid and show the backup's trail, as GET /v1/audit does.
func checkAuditAfterRestore(t *testing.T, b *browser, base string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client, err := api.NewClient([]string{base}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.PutQuota(ctx, "eng", api.QuotaRequest{Limits: api.Resources{"cpus": 8}}, api.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	var backup bytes.Buffer
	if _, err := client.SaveSnapshot(ctx, &backup); err != nil {
		t.Fatal(err)
	}
	if _, err := client.PutQuota(ctx, "undone", api.QuotaRequest{Limits: api.Resources{"cpus": 1}}, api.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	b.goTo("#/audit", "audit")
	// Not necessarily the newest row: the framework the rate-limit check
	// subscribed may be removed (an audit entry) at any moment.
	b.waitFor("the write after the backup", `!!document.querySelector('#view table[data-table="audit"] a[href="#/roles/undone"]')`)
	if _, err := client.RestoreSnapshot(ctx, bytes.NewReader(backup.Bytes())); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the audit view shows the restored trail", func() error {
		entries, err := client.Audit(ctx, 0)
		if err != nil {
			return err
		}
		want := map[string]map[string]string{}
		for _, e := range entries {
			want[strconv.FormatUint(e.Index, 10)] = map[string]string{"action": e.Action, "object": e.Object}
		}
		return diffRows("audit", b.tables()["audit"], want)
	})
	if b.text(`#view table[data-table="audit"]`) == "" || strings.Contains(b.text(`#view table[data-table="audit"]`), "quota/undone") {
		t.Errorf("after the restore the audit view still shows the write the backup does not hold (quota/undone)")
	}
	b.screenshot("dev-audit-restored")
}
