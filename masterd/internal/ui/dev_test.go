package ui_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

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
