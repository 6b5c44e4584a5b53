package ui_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/internal/ui"
)

// promFixture is /metrics as masterd writes it, with the corners of the
// text format: escaped label values, a timestamp, special values, and a
// line that is not a sample.
const promFixture = `# HELP allot_framework_messages_received_total Calls received.
# TYPE allot_framework_messages_received_total counter
allot_framework_messages_received_total{label="",principal="spark"} 42
allot_framework_messages_received_total{label="web",principal="spark"} 7
allot_framework_messages_received_total{label="",principal="we\"ird\\name\nx"} 3 1700000000000
allot_allocation_cycle_seconds_bucket{le="+Inf"} 17
allot_raft_leader 1
go_gc_duration_seconds{quantile="0.5"} 1.5e-05
odd_value NaN
big_value -Inf
broken{label="x" 1
`

// TestJavaScriptModules runs the page's pure functions in the browser,
// where they run for users: the Prometheus parser and rates, the audit
// diff, number and resource formats, hash routes, and the DOM builder.
func TestJavaScriptModules(t *testing.T) {
	b := newBrowser(t, 60*time.Second)
	mux := http.NewServeMux()
	mux.Handle("/ui/", http.StripPrefix("/ui", ui.Handler()))
	// The page polls the API; this server has none.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error": {"code": "not_found", "message": "no API here"}}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	b.open(srv.URL + "/ui/")
	fixture, _ := json.Marshal(promFixture)

	tests := map[string]struct {
		module, expr, want string
	}{
		"prom parses samples, escapes and special values": {
			module: "prom.js",
			expr:   fmt.Sprintf(`m.parse(%s).map((s) => [s.name, s.labels, String(s.value)])`, fixture),
			want: `[["allot_framework_messages_received_total", {"label": "", "principal": "spark"}, "42"],
			  ["allot_framework_messages_received_total", {"label": "web", "principal": "spark"}, "7"],
			  ["allot_framework_messages_received_total", {"label": "", "principal": "we\"ird\\name\nx"}, "3"],
			  ["allot_allocation_cycle_seconds_bucket", {"le": "+Inf"}, "17"],
			  ["allot_raft_leader", {}, "1"],
			  ["go_gc_duration_seconds", {"quantile": "0.5"}, "0.000015"],
			  ["odd_value", {}, "NaN"],
			  ["big_value", {}, "-Infinity"]]`,
		},
		"prom counts the lines it skips": {
			module: "prom.js",
			expr:   fmt.Sprintf(`m.parse(%s).skipped`, fixture),
			want:   `1`,
		},
		"prom selects by labels": {
			module: "prom.js",
			expr:   fmt.Sprintf(`m.select(m.parse(%s), 'allot_framework_messages_received_total', {principal: 'spark'}).map((s) => s.value)`, fixture),
			want:   `[42, 7]`,
		},
		"prom value of a missing series is null": {
			module: "prom.js",
			expr:   fmt.Sprintf(`m.value(m.parse(%s), 'nothing')`, fixture),
			want:   `null`,
		},
		"rates come from two scrapes, and survive a counter reset": {
			module: "prom.js",
			expr: `(() => {
			const r = new m.Rates(), s = (v) => [{name: 'c', labels: {p: 'a'}, value: v}];
			const out = [];
			r.update(s(10), 0); out.push(r.rate(s(0)[0]));
			r.update(s(20), 2000); out.push(r.rate(s(0)[0]), r.window);
			r.update(s(3), 4000); out.push(r.rate(s(0)[0]));
			r.update([{name: 'c', labels: {p: 'b'}, value: 5}], 5000); out.push(r.rate({name: 'c', labels: {p: 'b'}}));
			return out; })()`,
			want: `[null, 5, 2, 1.5, null]`,
		},
		"diff of a change lists the fields that differ": {
			module: "diff.js",
			expr:   `m.diff({role: 'eng', limits: {cpus: 2, mem: 512}, version: 8}, {role: 'eng', limits: {cpus: 2.5, mem: 512}, guarantees: {cpus: 1}, version: 9})`,
			want: `[{"path": "guarantees.cpus", "kind": "added", "after": 1},
			  {"path": "limits.cpus", "kind": "changed", "before": 2, "after": 2.5},
			  {"path": "version", "kind": "changed", "before": 8, "after": 9}]`,
		},
		"diff of a creation adds every field": {
			module: "diff.js",
			expr:   `m.diff(null, {name: 'x', roles: ['a', 'b'], lending_limit: {}})`,
			want:   `[{"path": "lending_limit", "kind": "added", "after": {}}, {"path": "name", "kind": "added", "after": "x"}, {"path": "roles", "kind": "added", "after": ["a", "b"]}]`,
		},
		"diff: an empty object is the same as an absent one": {
			module: "diff.js",
			expr:   `m.diff({role: 'eng', guarantees: {}, limits: {cpus: 8}, version: 3}, {role: 'eng', limits: {}, version: 4})`,
			want:   `[{"path": "limits.cpus", "kind": "removed", "before": 8}, {"path": "version", "kind": "changed", "before": 3, "after": 4}]`,
		},
		"diff: nested empty objects are no change": {
			module: "diff.js",
			expr:   `[m.diff({a: {b: {}}}, {}), m.diff({}, {a: {}, c: 1})]`,
			want:   `[[], [{"path": "c", "kind": "added", "after": 1}]]`,
		},
		"diff: a lending_limit of {} lends nothing, unlike none": {
			module: "diff.js",
			expr:   `[m.diff({weight: 1}, {weight: 1, lending_limit: {}}), m.diff({lending_limit: {cpus: 2}}, {lending_limit: {}})]`,
			want: `[[{"path": "lending_limit", "kind": "added", "after": {}}],
			  [{"path": "lending_limit", "kind": "added", "after": {}}, {"path": "lending_limit.cpus", "kind": "removed", "before": 2}]]`,
		},
		"diff of a deletion removes every field": {
			module: "diff.js",
			expr:   `m.diff({qps: 2}, null)`,
			want:   `[{"path": "qps", "kind": "removed", "before": 2}]`,
		},
		"diff compares arrays whole": {
			module: "diff.js",
			expr:   `m.diff({roles: ['a']}, {roles: ['a', 'b']})`,
			want:   `[{"path": "roles", "kind": "changed", "before": ["a"], "after": ["a", "b"]}]`,
		},
		"diff shows values as JSON": {
			module: "diff.js",
			expr:   `[m.show("2"), m.show(2), m.show(null), m.show(undefined)]`,
			want:   `["\"2\"", "2", "null", "—"]`,
		},
		"servers are listed by id, as people count them": {
			module: "views/cluster.js",
			expr: `(() => {
			const servers = ['m1', 'm3', 'm10', 'm2'].map((id) => ({id, suffrage: 'voter', leader: id === 'm3'}));
			const denied = {ok: false, status: 403, error: {}};
			const nodes = m.default.render({params: {}}, {cluster: {ok: true, data: {leader: {id: 'm3'}, servers}},
			  agents: denied, frameworks: denied, tasks: denied}, {now: new Date(), origin: ''});
			const d = document.createElement('div'); d.append(...nodes.filter(Boolean));
			return [...d.querySelectorAll('table[data-table="servers"] tbody tr')].map((r) => r.dataset.id); })()`,
			want: `["m1", "m2", "m3", "m10"]`,
		},
		"a role's detail and the tree agree on an upper bound of consumption": {
			module: "views/roles.js",
			expr: `(() => {
			const roles = [{role: 'eng/ml', weight: 1, quota: {guarantees: {cpus: 0.5}, limits: {cpus: 2, mem: 512}}, allocated: {}, offered: {}, reserved: {}}];
			const denied = {ok: false, status: 403, error: {}};
			const nodes = m.default.render({id: 'eng/ml', params: {}}, {roles: {ok: true, data: {roles}}, frameworks: denied, metrics: denied, quotas: denied},
			  {now: new Date(), origin: '', metrics: null});
			const d = document.createElement('div'); d.append(...nodes.filter(Boolean));
			return [d.querySelector('[data-detail="role"] dd[data-field="consumed-quota"]').textContent.replace(/\u00a0/g, ' '),
			  [...d.querySelectorAll('tr[data-id="eng/ml"] [data-field="consumed"]')].map((e) => e.textContent)]; })()`,
			want: `["cpus ≤ 0 · mem ≤ 0 MiB", ["≤ 0", "≤ 0"]]`,
		},
		"roles refused: the tree comes from the quotas the token may read": {
			module: "views/roles.js",
			expr: `(() => {
			const denied = {ok: false, status: 403, error: {code: 'permission_denied', message: 'token lacks read role for some role'}};
			const quotas = {ok: true, data: {quotas: [{role: 'eng/ml', guarantees: {}, limits: {cpus: 2}, version: 4}]}};
			const nodes = m.default.render({id: '', params: {}}, {roles: denied, frameworks: denied, metrics: denied, quotas},
			  {now: new Date(), origin: '', metrics: null});
			const d = document.createElement('div'); d.append(...nodes.filter(Boolean));
			const rows = [...d.querySelectorAll('table[data-table="roles"] tbody tr')];
			return [d.querySelector('[data-problem="roles-from-quotas"]').textContent.includes('token lacks read role for some role'),
			  rows.map((r) => r.dataset.id),
			  rows[1].querySelector('[data-field="consumed"]').textContent, rows[1].querySelector('[data-field="limit"]').textContent,
			  rows[1].querySelector('[data-col="weight"]').textContent]; })()`,
			want: `[true, ["eng", "eng/ml"], "—", "2", "—"]`,
		},
		"roles refused and no quota readable: the refusal": {
			module: "views/roles.js",
			expr: `(() => {
			const denied = {ok: false, status: 403, error: {code: 'permission_denied', message: 'no'}};
			const n = m.default.render({id: '', params: {}}, {roles: denied, frameworks: denied, metrics: denied, quotas: denied}, {now: new Date(), metrics: null});
			return n.dataset.problem; })()`,
			want: `"permission_denied"`,
		},
		"numbers": {
			module: "format.js",
			expr:   `[m.num(2048), m.num(0.25), m.num(1234.5), m.num(0.001), m.num(0), m.num(null), m.num(undefined)]`,
			want:   `["2,048", "0.25", "1,234.5", "0.001", "0", "—", "—"]`,
		},
		"resources in order with units": {
			module: "format.js",
			expr:   `[m.resources({gpus: 1, disk: 10, mem: 2048, cpus: 1.5}), m.resources({}), m.resources(null)]`,
			want:   `["cpus\u00a01.5 · mem\u00a02,048\u00a0MiB · disk\u00a010\u00a0MiB · gpus\u00a01", "none", "—"]`,
		},
		"limits: Infinity is ∞, none is —": {
			module: "format.js",
			expr:   `[m.limit('Infinity'), m.limit(2), m.limit(undefined), m.limit(0.5)]`,
			want:   `["∞", "2", "—", "0.5"]`,
		},
		"rates": {
			module: "format.js",
			expr:   `[m.rate(0), m.rate(2.345), m.rate(12.34), m.rate(null)]`,
			want:   `["0/s", "2.35/s", "12.3/s", "—"]`,
		},
		"task states have colours": {
			module: "format.js",
			expr:   `['TASK_RUNNING', 'TASK_FAILED', 'TASK_KILLED', 'TASK_LOST', 'TASK_STAGING'].map(m.stateClass)`,
			want:   `["state running", "state failed", "state killed", "state lost", "state starting"]`,
		},
		"routes keep a role's slashes": {
			module: "router.js",
			expr:   `m.parse('#/roles/eng/ml')`,
			want:   `{"view": "roles", "id": "eng/ml", "params": {}}`,
		},
		"routes read filters": {
			module: "router.js",
			expr:   `m.parse('#/tasks?role=eng%2Fml&framework=fw-1&state=TASK_RUNNING,TASK_STAGING&agent=')`,
			want:   `{"view": "tasks", "id": "", "params": {"role": "eng/ml", "framework": "fw-1", "state": "TASK_RUNNING,TASK_STAGING"}}`,
		},
		"an empty route is the cluster": {
			module: "router.js",
			expr:   `m.parse('')`,
			want:   `{"view": "cluster", "id": "", "params": {}}`,
		},
		"a broken escape does not throw": {
			module: "router.js",
			expr:   `m.parse('#/audit?q=%E0%A4%A')`,
			want:   `{"view": "audit", "id": "", "params": {"q": "%E0%A4%A"}}`,
		},
		"links are readable and round-trip": {
			module: "router.js",
			expr:   `(() => { const h = m.href('tasks', '', {role: 'eng/ml', framework: 'a b&c', state: '', agent: null}); return [h, m.parse(h).params]; })()`,
			want:   `["#/tasks?role=eng/ml&framework=a%20b%26c", {"role": "eng/ml", "framework": "a b&c"}]`,
		},
		"the DOM builder shows markup as text": {
			module: "dom.js",
			expr:   `(() => { const e = m.h('td', {title: '"><b>'}, '<img src=x onerror=alert(1)>'); return [e.children.length, e.textContent, e.getAttribute('title')]; })()`,
			want:   `[0, "<img src=x onerror=alert(1)>", "\"><b>"]`,
		},
		"the DOM builder refuses inline styles and handlers": {
			module: "dom.js",
			expr:   `[['style', 'color: red'], ['onclick', 'x()']].map(([k, v]) => { try { m.h('p', {[k]: v}); return 'built'; } catch (e) { return 'refused'; } })`,
			want:   `["refused", "refused"]`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got any
			expr := fmt.Sprintf(`import('/ui/js/%s').then((m) => %s)`, tc.module, tc.expr)
			err := b.eval(expr, &got)
			if err != nil && strings.Contains(err.Error(), "Failed to fetch dynamically imported module") {
				// A failed module fetch is kept for the document's life
				// (see browser.open).
				t.Logf("%v; loading the page again", err)
				b.open(srv.URL + "/ui/")
				err = b.eval(expr, &got)
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.expr, err)
			}
			var want any
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatalf("bad want %s: %v", tc.want, err)
			}
			if !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				t.Errorf("%s\n got %s\nwant %s", tc.expr, g, tc.want)
			}
		})
	}
}
