package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// TestUIOnAClusterWithAgentsAndFrameworks runs what an operator would look
// at: three masterd servers with ACLs, a real agentd running tasks in
// cgroups, two frameworks (one launching tasks with limits, Infinity among
// them, and one killed at its memory limit), a quota tree, a role weight, a
// reservation and rate limits. It then checks every view against the API,
// follows the links role → framework → tasks → agent, opens a follower's UI,
// and checks the token box (401 without a token, 403 on what a token may
// not read) and the banner when the servers lose their leader.
func TestUIOnAClusterWithAgentsAndFrameworks(t *testing.T) {
	b := newBrowser(t, 4*time.Minute)
	realAgentsOrSkip(t)
	began := time.Now()
	agentd := binary(t, "./agentd")
	framework := binary(t, "./examples/framework")

	operator := randomToken(t)
	c := testcluster.Start(t, 3, testcluster.WithOperatorToken(operator), testcluster.WithArgs("-acl"))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	base := c.Address(leader)
	client, err := api.NewClient([]string{base}, operator)
	if err != nil {
		t.Fatal(err)
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// Who may do what: the agent registers, two frameworks' principals
	// subscribe to the eng roles, ci only reads the cluster (and is rate
	// limited hard), viewer reads the cluster and nothing else.
	for name, rules := range map[string][]api.ACLRule{
		"agents":         {{Object: api.ACLObjectAgent, Access: api.ACLRegister}},
		"eng-frameworks": {{Object: api.ACLObjectFramework, Access: api.ACLRegister, Roles: []string{"eng", "eng/*"}}},
		"cluster-reader": {{Object: api.ACLObjectCluster, Access: api.ACLRead}},
		"eng-quotas":     {{Object: api.ACLObjectQuota, Access: api.ACLWrite, Roles: []string{"eng/*"}}},
	} {
		_, err := client.PutACLPolicy(ctx, name, api.ACLPolicyRequest{Description: name, Rules: rules}, api.WriteOptions{})
		must("policy "+name, err)
	}
	secrets := t.TempDir()
	tokens := map[string]string{}
	for accessor, policy := range map[string]string{"node-1": "agents", "spark": "eng-frameworks", "hdfs": "eng-frameworks", "ci": "cluster-reader", "viewer": "cluster-reader", "quota-admin": "eng-quotas"} {
		tok, err := client.PutACLToken(ctx, accessor, api.ACLTokenRequest{Description: accessor, Policies: []string{policy}, Principal: accessor}, api.WriteOptions{})
		must("token "+accessor, err)
		tokens[accessor] = tok.Secret
	}

	// One real agent. Its cgroups go when the test ends, after agentd
	// (cleanups run last registered first).
	root := fmt.Sprintf("allot-ui-e2e-%d", os.Getpid())
	t.Cleanup(func() { removeCgroups(t, root) })
	start(t, "agentd", agentd, "-master", strings.Join(c.Addresses(), ","), "-name", "node-1",
		"-work-dir", filepath.Join(t.TempDir(), "work"), "-http", freeAddr(t),
		"-resources", "cpus:4;mem:2048;disk:4096", "-cgroup-root", root,
		"-token-file", writeFile(t, secrets, "node-1", tokens["node-1"]),
		"-estimator", "fixed", "-estimator-fixed", "cpus:1")
	var agentID string
	eventually(t, "agentd registers", func() error {
		agents, err := client.Agents(ctx, api.ReadOptions{})
		if err != nil {
			return err
		}
		if len(agents) != 1 || !agents[0].Connected {
			return fmt.Errorf("agents: %+v", agents)
		}
		agentID = agents[0].ID
		return nil
	})

	// The policy an operator would have set.
	two := 2.0
	_, err = client.PutRole(ctx, "eng/ml", api.RoleRequest{Weight: &two}, api.WriteOptions{})
	must("role weight", err)
	_, err = client.PutQuota(ctx, "eng", api.QuotaRequest{Guarantees: api.Resources{"cpus": 1, "mem": 256}, Limits: api.Resources{"cpus": 3, "mem": 1024}}, api.WriteOptions{})
	must("quota eng", err)
	_, err = client.PutQuota(ctx, "eng/ml", api.QuotaRequest{Guarantees: api.Resources{"cpus": 0.5}, Limits: api.Resources{"cpus": 2, "mem": 512}}, api.WriteOptions{})
	must("quota eng/ml", err)
	_, err = client.PutReservation(ctx, "db-node-1", api.ReservationRequest{Agent: "node-1", Role: "eng/ml", Resources: api.Resources{"cpus": 0.5, "mem": 128}}, api.WriteOptions{})
	must("reservation", err)
	qps := func(v float64) *float64 { return &v }
	intp := func(v int) *int { return &v }
	_, err = client.PutRateLimit(ctx, "spark", api.RateLimitRequest{QPS: qps(50), Burst: intp(10)}, api.WriteOptions{})
	must("rate limit spark", err)
	_, err = client.PutLabeledRateLimit(ctx, "spark", "web", api.RateLimitRequest{QPS: qps(20)}, api.WriteOptions{})
	must("rate limit spark/web", err)
	_, err = client.PutRateLimit(ctx, "ci", api.RateLimitRequest{QPS: qps(0.5), Burst: intp(1), Capacity: intp(0)}, api.WriteOptions{})
	must("rate limit ci", err)
	_, err = client.PutRateLimitDefault(ctx, api.RateLimitRequest{QPS: qps(100)}, api.WriteOptions{})
	must("default rate limit", err)

	// Two frameworks whose tasks run until the test ends them. web's three
	// tasks carry limits (one unbounded memory, one none at all).
	masters := strings.Join(c.Addresses(), ",")
	web := start(t, "framework web", framework, "-master", masters, "-name", "web", "-role", "eng/ml", "-label", "web",
		"-token-file", writeFile(t, secrets, "spark", tokens["spark"]), "-tasks", "3", "-command", "sleep 600",
		"-cpus", "0.25", "-mem", "32", "-limits", "cpus:1;mem:Infinity", "-limits", "cpus:0.5;mem:64", "-limits", "", "-timeout", "10m")
	batch := start(t, "framework batch", framework, "-master", masters, "-name", "batch", "-role", "eng",
		"-token-file", writeFile(t, secrets, "hdfs", tokens["hdfs"]), "-tasks", "2", "-command", "sleep 600",
		"-cpus", "0.5", "-mem", "64", "-timeout", "10m")
	// A third runs two tasks that end: one finishes, the other outgrows
	// its memory and the kernel kills it at its cgroup's limit.
	etl := start(t, "framework etl", framework, "-master", masters, "-name", "etl", "-role", "eng",
		"-token-file", filepath.Join(secrets, "hdfs"), "-tasks", "2", "-cpus", "0.1", "-mem", "32", "-timeout", "10m",
		"-command", `if [ "$ALLOT_TASK_ID" = etl-0 ]; then exit 0; fi; exec tail /dev/zero`)
	var webID string
	eventually(t, "five tasks running, one finished, one killed at its memory limit", func() error {
		tasks, err := client.Tasks(ctx)
		if err != nil {
			return err
		}
		states := map[string]int{}
		for _, task := range tasks {
			states[task.State]++
			if task.Role == "eng/ml" {
				webID = task.FrameworkID
			}
			if task.TaskID == "etl-1" && task.State == api.TaskFailed && task.Reason != api.ReasonContainerLimitationMemory {
				return fmt.Errorf("etl-1 failed with reason %q, want %s", task.Reason, api.ReasonContainerLimitationMemory)
			}
		}
		if states[api.TaskRunning] != 5 || states[api.TaskFinished] != 1 || states[api.TaskFailed] != 1 {
			return fmt.Errorf("tasks by state: %v", states)
		}
		return nil
	})
	etl.stop() // it has ended, or ends now
	// A change the audit trail shows as a diff.
	_, err = client.PutQuota(ctx, "eng/ml", api.QuotaRequest{Guarantees: api.Resources{"cpus": 0.5}, Limits: api.Resources{"cpus": 2.5, "mem": 512}}, api.WriteOptions{})
	must("quota eng/ml update", err)
	// ci calls faster than its limit lets it: all but the first are refused.
	rejected := 0
	for range 5 {
		if status, _ := call(base, "/v1/cluster", tokens["ci"]); status == http.StatusTooManyRequests {
			rejected++
		}
	}
	if rejected == 0 {
		t.Fatal("ci called 5 times at once under qps 0.5, burst 1, capacity 0, and no call was refused")
	}
	t.Logf("cluster, agent, frameworks and policy ready after %v", time.Since(began).Round(time.Millisecond))

	// 1. Without a token the page asks for one, with the API's reason.
	_, unauth := call(base, "/v1/cluster", "")
	b.open(base + "/ui/")
	b.waitFor("the token box", `!document.getElementById('token-box').hidden && document.getElementById('view').dataset.state === 'unauthenticated'`)
	if got := b.text("#token-reason"); !strings.Contains(got, unauth.Message) || unauth.Message == "" {
		t.Errorf("token box says %q; want the API's message %q", got, unauth.Message)
	}
	b.screenshot("01-token")
	b.do(chromedp.SendKeys(chromedp.ID("token-input"), operator), chromedp.Click(chromedp.ID("token-submit")))
	b.waitView("cluster")
	b.waitFor("the token box to close", `document.getElementById('token-box').hidden`)
	if who := b.text("#whoami"); who != "as operator" {
		t.Errorf("header says %q, want %q", who, "as operator")
	}

	// 2. Cluster: servers and totals as GET /v1/cluster says.
	eventually(t, "the cluster view shows GET /v1/cluster", func() error {
		cl, err := client.Cluster(ctx, api.ReadOptions{})
		if err != nil {
			return err
		}
		tables := b.tables()
		servers := map[string]map[string]string{}
		for _, s := range cl.Servers {
			role := "follower"
			if s.Leader {
				role = "leader"
			}
			store := "—"
			if s.StoreVersion != 0 {
				store = strconv.Itoa(int(s.StoreVersion))
			}
			servers[s.ID] = map[string]string{"api": s.APIAddress, "raft": s.RaftAddress, "suffrage": s.Suffrage, "leader": role, "store": store}
		}
		if err := diffRows("servers", tables["servers"], servers); err != nil {
			return err
		}
		if ids := rowIDs(tables["servers"]); !slices.IsSortedFunc(ids, api.CompareNatural) {
			return fmt.Errorf("servers listed as %v, want them sorted by id", ids)
		}
		totals := map[string]map[string]string{}
		columns := map[string]api.Resources{"total": cl.Total, "allocated": cl.Allocated, "offered": cl.Offered,
			"reserved": cl.Reserved, "revocable": cl.Revocable, "revocable_allocated": cl.RevocableAllocated}
		for _, n := range resourceNames(cl.Total, cl.Allocated, cl.Offered, cl.Reserved, cl.Revocable, cl.RevocableAllocated) {
			totals[n] = map[string]string{}
			for col, m := range columns {
				if m == nil {
					totals[n][col] = "—"
				} else {
					totals[n][col] = num(m[n])
				}
			}
		}
		if err := diffRows("totals", tables["totals"], totals); err != nil {
			return err
		}
		for card, want := range map[string]string{"agents": "1 / 1", "frameworks": "2 / 2", "tasks": "5", "leader": cl.Leader.ID, "recovery": "off"} {
			if got := b.text(fmt.Sprintf(`[data-card=%q] .card-value`, card)); got != want {
				return fmt.Errorf("card %s shows %q, want %q", card, got, want)
			}
		}
		return nil
	})
	checkCardsFit(t, b)
	b.screenshot("02-cluster")

	// 3. Roles: the tree, weights, and quota bars against what the quota
	// counts (allot_quota_consumed of the leader).
	b.goTo("#/roles", "roles")
	eventually(t, "the roles view shows GET /v1/roles", func() error {
		roles, err := client.Roles(ctx, api.ReadOptions{})
		if err != nil {
			return err
		}
		m, err := scrape(base, operator)
		if err != nil {
			return err
		}
		names := frameworkNames(ctx, client)
		want := map[string]map[string]string{}
		for _, r := range roles {
			w := map[string]string{"depth": strconv.Itoa(strings.Count(r.Role, "/")), "weight": num(r.Weight),
				"allocated": resources(r.Allocated), "reserved": resources(r.Reserved), "lent": resources(r.Lent)}
			fws := make([]string, len(r.Frameworks))
			for i, id := range r.Frameworks {
				fws[i] = names[id]
			}
			w["frameworks"] = strings.Join(fws, " ")
			if len(fws) == 0 {
				w["frameworks"] = "none"
			}
			if r.Quota != nil {
				for _, n := range resourceNames(r.Quota.Guarantees, r.Quota.Limits) {
					consumed, _ := m.value("allot_quota_consumed", map[string]string{"role": r.Role, "resource": n})
					w["quota."+n+".consumed"] = num(consumed)
					w["quota."+n+".limit"] = "no limit"
					if l, ok := r.Quota.Limits[n]; ok {
						w["quota."+n+".limit"] = amount(n, l)
					}
					if g, ok := r.Quota.Guarantees[n]; ok {
						w["quota."+n+".guarantee"] = amount(n, g)
					}
				}
			}
			want[r.Role] = w
		}
		got := b.tables()["roles"]
		for i := range got {
			got[i].Cells["depth"] = got[i].Depth
		}
		return diffRows("roles", got, want)
	})
	b.screenshot("03-roles")

	// 4. The links: role → its framework's tasks → the task's agent.
	b.click(`#view table[data-table="roles"] tr[data-id="eng/ml"] a[data-link="role"]`, "#/roles/eng/ml")
	b.waitFor("the detail of eng/ml", `!!document.querySelector('[data-detail="role"][data-id="eng/ml"]')`)
	b.screenshot("04-role-detail")
	b.click(fmt.Sprintf(`[data-detail="role"] a[data-link="framework-tasks"][data-framework=%q]`, webID), "#/tasks?role=eng/ml&framework="+webID)
	b.waitView("tasks")
	eventually(t, "the web framework's tasks", func() error {
		return checkTasks(ctx, b, client, api.TaskFilter{Role: "eng/ml"}, webID)
	})
	b.click(`#view table[data-table="tasks"] tbody tr:first-child a[data-link="agent"]`, "#/agents/"+agentID)
	b.waitFor("the agent's detail", fmt.Sprintf(`!!document.querySelector('[data-detail="agent"][data-id=%q] table[data-table="tasks"]')`, agentID))
	eventually(t, "the agent's tasks", func() error {
		return checkTasks(ctx, b, client, api.TaskFilter{Agent: agentID}, "")
	})
	b.screenshot("05-agent-detail")

	// 5. Tasks: every task with its state, requests and limits; filters.
	b.goTo("#/tasks", "tasks")
	eventually(t, "the tasks view shows GET /v1/tasks", func() error {
		return checkTasks(ctx, b, client, api.TaskFilter{}, "")
	})
	if got := b.text(`#view tr[data-id="web-0"] td[data-col="mem-limit"]`); got != "∞" {
		t.Errorf("web-0's memory limit is Infinity; the page shows %q", got)
	}
	b.screenshot("06-tasks")
	if got := b.text(`#view tr[data-id="etl-1"] td[data-col="status"]`); !strings.HasPrefix(got, api.ReasonContainerLimitationMemory) {
		t.Errorf("etl-1 was killed at its memory limit; its status reads %q", got)
	}
	setState := func(state string) {
		t.Helper()
		b.mustEval(fmt.Sprintf(`(() => { const s = document.getElementById('filter-state'); s.value = %q; s.dispatchEvent(new Event('change')); })()`, state), nil)
		b.waitFor("the state filter in the URL", fmt.Sprintf(`location.hash === '#/tasks?state=%s'`, state))
	}
	setState(api.TaskFailed)
	eventually(t, "failed tasks", func() error {
		return checkTasks(ctx, b, client, api.TaskFilter{States: []string{api.TaskFailed}}, "")
	})
	setState(api.TaskGone)
	b.waitFor("no gone tasks", `!!document.querySelector('#view [data-empty]')`)
	if got := b.text("#view [data-empty]"); !strings.Contains(got, "No tasks match these filters.") {
		t.Errorf("no task is gone, but the filtered view shows %q", got)
	}
	setState(api.TaskRunning)
	b.do(chromedp.SendKeys(chromedp.ID("filter-role"), "eng\r"))
	b.waitFor("the role filter in the URL", `location.hash === '#/tasks?state=TASK_RUNNING&role=eng'`)
	b.waitView("tasks")
	eventually(t, "running tasks of role eng", func() error {
		return checkTasks(ctx, b, client, api.TaskFilter{States: []string{api.TaskRunning}, Role: "eng"}, "")
	})

	// 6. Agents.
	b.goTo("#/agents", "agents")
	eventually(t, "the agents view shows GET /v1/agents", func() error {
		agents, err := client.Agents(ctx, api.ReadOptions{})
		if err != nil {
			return err
		}
		tasks, err := client.Tasks(ctx)
		if err != nil {
			return err
		}
		want := map[string]map[string]string{}
		for _, a := range agents {
			w := map[string]string{"status": "connected", "reserved": resources(a.Reserved), "revocable": resources(a.Revocable),
				"revocable_allocated": resources(a.RevocableAllocated), "capabilities": strings.Join(a.Capabilities, " ")}
			if !a.Connected {
				w["status"] = "disconnected"
			}
			for _, n := range resourceNames(a.Resources) {
				w["res-"+n] = num(a.Allocated[n]) + " / " + num(a.Resources[n])
			}
			count := 0
			for _, task := range tasks {
				if task.AgentID == a.ID {
					count++
				}
			}
			w["tasks"] = strconv.Itoa(count)
			want[a.ID] = w
		}
		return diffRows("agents", b.tables()["agents"], want)
	})
	b.screenshot("07-agents")

	// 7. Frameworks.
	b.goTo("#/frameworks", "frameworks")
	eventually(t, "the frameworks view shows GET /v1/frameworks", func() error {
		fws, err := client.Frameworks(ctx)
		if err != nil {
			return err
		}
		tasks, err := client.Tasks(ctx)
		if err != nil {
			return err
		}
		want := map[string]map[string]string{}
		for _, f := range fws {
			running, all := 0, 0
			for _, task := range tasks {
				if task.FrameworkID == f.ID {
					all++
					if task.State == api.TaskRunning {
						running++
					}
				}
			}
			principal := f.Principal
			if f.Label != "" {
				principal += " (label " + f.Label + ")"
			}
			want[f.ID] = map[string]string{"framework": f.Name + " " + f.ID, "principal": principal, "roles": strings.Join(f.Roles, " "),
				"allocated": resources(f.Allocated), "offered": resources(f.Offered), "tasks": fmt.Sprintf("%d / %d", running, all)}
		}
		return diffRows("frameworks", b.tables()["frameworks"], want)
	})
	b.screenshot("08-frameworks")

	// 8. Rate limits: the configuration, and the counters of principals
	// that are quiet now (the operator's own calls, the page's, move on).
	b.goTo("#/ratelimits", "ratelimits")
	b.waitView("ratelimits") // a second scrape: rates need two
	eventually(t, "the rate-limits view shows the configuration and /metrics", func() error {
		m, err := scrape(base, operator)
		if err != nil {
			return err
		}
		if got, _ := m.value("allot_ratelimit_rejected_total", map[string]string{"principal": "ci"}); int(got) != rejected {
			return fmt.Errorf("allot_ratelimit_rejected_total{principal=ci} is %v; the test saw %d calls refused", got, rejected)
		}
		total := func(name, principal string, label *string) string {
			match := map[string]string{"principal": principal}
			if label != nil {
				match["label"] = *label
			}
			v, ok := m.value(name, match)
			if !ok {
				return "—"
			}
			return num(v)
		}
		want := map[string]map[string]string{
			"spark":     {"qps": "50", "burst": "10", "capacity": "1,000"},
			"spark/web": {"qps": "20", "burst": "20", "capacity": "1,000"},
			"ci":        {"qps": "0.5", "burst": "1", "capacity": "0"},
			"hdfs":      {"qps": "none (default)", "burst": "—", "capacity": "—"},
		}
		for id, w := range want {
			principal, label, labeled := strings.Cut(id, "/")
			var l *string
			if labeled {
				l = &label
			}
			for _, c := range []struct{ col, metric string }{{"received", "allot_framework_messages_received_total"},
				{"processed", "allot_framework_messages_processed_total"}, {"rejected", "allot_ratelimit_rejected_total"}, {"queue", "allot_ratelimit_queue_depth"}} {
				w[c.col] = total(c.metric, principal, l)
			}
		}
		_ = web
		got := b.tables()["ratelimits"]
		var mine []row
		rate := regexp.MustCompile(`^[\d,.]+/s$`)
		for _, r := range got {
			if _, ok := want[r.ID]; ok {
				mine = append(mine, r)
				for _, col := range []string{"received-rate", "processed-rate", "rejected-rate"} {
					if !rate.MatchString(r.Cells[col]) {
						return fmt.Errorf("row %s %s: %q is not a rate", r.ID, col, r.Cells[col])
					}
				}
			}
		}
		if !slices.ContainsFunc(got, func(r row) bool { return r.ID == "operator" }) {
			return fmt.Errorf("no row for the operator, whose calls the page itself makes")
		}
		return diffRows("ratelimits", mine, want)
	})
	if got := b.text(`#view [data-field="default"]`); !strings.Contains(got, "100 qps") {
		t.Errorf("the aggregate default reads %q, want 100 qps", got)
	}
	b.screenshot("09-ratelimits")

	// 9. Audit: every entry, newest first, with the fields it changed.
	b.goTo("#/audit", "audit")
	eventually(t, "the audit view shows GET /v1/audit", func() error {
		entries, err := client.Audit(ctx, 0)
		if err != nil {
			return err
		}
		got := b.tables()["audit"]
		if len(got) != min(len(entries), 100) {
			return fmt.Errorf("the page shows %d entries, the API has %d", len(got), len(entries))
		}
		want := map[string]map[string]string{}
		for i, e := range entries {
			if i < len(entries)-len(got) {
				continue
			}
			want[strconv.FormatUint(e.Index, 10)] = map[string]string{"principal": e.Principal, "action": e.Action, "object": e.Object}
		}
		if err := diffRows("audit", got, want); err != nil {
			return err
		}
		byIndex := map[string]api.AuditEntry{}
		for _, e := range entries {
			byIndex[strconv.FormatUint(e.Index, 10)] = e
		}
		for i, r := range got {
			if i > 0 {
				prev, _ := strconv.Atoi(got[i-1].ID)
				this, _ := strconv.Atoi(r.ID)
				if this >= prev {
					return fmt.Errorf("entry %s follows %s: want newest first", r.ID, got[i-1].ID)
				}
			}
			e := byIndex[r.ID]
			wantChanges, err := changes(e.Before, e.After)
			if err != nil {
				return err
			}
			if !slices.Equal(r.Changes, wantChanges) {
				return fmt.Errorf("entry %s (%s %s) shows changes %v, want %v", r.ID, e.Action, e.Object, r.Changes, wantChanges)
			}
		}
		return nil
	})
	update := b.text(`#view table[data-table="audit"] tbody tr:first-child td[data-col="changes"]`)
	if !strings.Contains(update, "limits.cpus 2 → 2.5") {
		t.Errorf("the last quota update shows %q, want limits.cpus 2 → 2.5", update)
	}
	b.screenshot("10-audit")
	b.do(chromedp.SendKeys(chromedp.ID("filter-audit"), "quota/\r"))
	b.waitFor("the audit filter in the URL", `location.hash === '#/audit?q=quota/'`)
	b.waitView("audit")
	for _, r := range b.tables()["audit"] {
		if !strings.HasPrefix(r.Cells["object"], "quota/") {
			t.Errorf("filtered on quota/, the page shows %s %s", r.ID, r.Cells["object"])
		}
	}

	// 10. A follower's UI: another origin, so the token is asked for again;
	// its counters are its own (the page says so and links to the
	// leader's), and without the leader's allot_quota_consumed the quota
	// bars show an upper bound.
	follower := c.Address(c.Followers()[0])
	b.open(follower + "/ui/#/ratelimits")
	b.waitFor("the follower's token box", `!document.getElementById('token-box').hidden`)
	b.do(chromedp.SendKeys(chromedp.ID("token-input"), operator), chromedp.Click(chromedp.ID("token-submit")))
	b.waitView("ratelimits")
	if got := b.text(`#view [data-field="source"]`); !strings.Contains(got, "a follower") {
		t.Errorf("a follower's rate-limit view says %q; want it to say its counters are a follower's", got)
	}
	var leaderLink string
	b.mustEval(`document.querySelector('#view [data-field="source"] a').getAttribute('href')`, &leaderLink)
	if leaderLink != base+"/ui/#/ratelimits" {
		t.Errorf("a follower's rate-limit view links to %q, want the leader's %q", leaderLink, base+"/ui/#/ratelimits")
	}
	b.goTo("#/roles", "roles")
	b.waitFor("the upper-bound hint", `!!document.querySelector('#view [data-hint="consumption-estimated"]')`)
	roleRows := b.tables()["roles"]
	if len(roleRows) != 2 {
		t.Errorf("a follower's roles view shows %d roles, want eng and eng/ml", len(roleRows))
	}
	for _, r := range roleRows {
		if v := r.Fields["quota.cpus.consumed"]; !strings.HasPrefix(v, "≤ ") {
			t.Errorf("on a follower, role %s's consumption reads %q; want an upper bound (≤)", r.ID, v)
		}
	}
	// The detail of a role says what its bars say.
	b.click(`#view table[data-table="roles"] tr[data-id="eng/ml"] a[data-link="role"]`, "#/roles/eng/ml")
	b.waitFor("the follower's detail of eng/ml", `!!document.querySelector('[data-detail="role"][data-id="eng/ml"]')`)
	eventually(t, "the detail and the tree agree", func() error {
		detail := b.text(`[data-detail="role"] dd[data-field="consumed-quota"]`)
		var tree []string
		for _, r := range b.tables()["roles"] {
			if r.ID != "eng/ml" {
				continue
			}
			for _, n := range []string{"cpus", "mem"} {
				tree = append(tree, n+" "+r.Fields["quota."+n+".consumed"]+map[string]string{"cpus": "", "mem": " MiB"}[n])
			}
		}
		if want := strings.Join(tree, " · "); detail != want {
			return fmt.Errorf("eng/ml's detail says consumed %q, its bars %q", detail, want)
		}
		return nil
	})
	b.screenshot("11-follower-roles")
	b.open(base + "/ui/#/cluster") // the leader's origin still has its token
	b.waitView("cluster")

	// 11. A token that may read the cluster but not roles: the roles view
	// says what is missing, the cluster view still works.
	status, denied := call(base, "/v1/roles", tokens["viewer"])
	if status != http.StatusForbidden {
		t.Fatalf("GET /v1/roles with the viewer token: %d, want 403", status)
	}
	b.do(chromedp.Click(chromedp.ID("token-button")))
	b.waitFor("the token box", `!document.getElementById('token-box').hidden`)
	b.do(chromedp.SendKeys(chromedp.ID("token-input"), tokens["viewer"]), chromedp.Click(chromedp.ID("token-submit")))
	b.waitFor("the token box to close", `document.getElementById('token-box').hidden`)
	b.goTo("#/roles", "roles")
	b.waitFor("the permission problem", `!!document.querySelector('#view .problem.denied')`)
	if got := b.text("#view .problem.denied"); !strings.Contains(got, denied.Message) || denied.Message == "" {
		t.Errorf("the roles view says %q; want the API's message %q", got, denied.Message)
	}
	b.screenshot("12-roles-denied")
	// A token that may write eng/* quotas but not read roles: the tree of
	// the quotas it may read, and what is missing.
	useToken(t, b, tokens["quota-admin"])
	b.goTo("#/roles", "roles")
	b.waitFor("the roles built from quotas", `!!document.querySelector('#view [data-problem="roles-from-quotas"]')`)
	if _, refused := call(base, "/v1/roles", tokens["quota-admin"]); !strings.Contains(b.text(`#view [data-problem="roles-from-quotas"]`), refused.Message) || refused.Message == "" {
		t.Errorf("the roles view says %q; want the API's message %q", b.text(`#view [data-problem="roles-from-quotas"]`), refused.Message)
	}
	quotaRows := map[string]row{}
	for _, r := range b.tables()["roles"] {
		quotaRows[r.ID] = r
	}
	if r, ok := quotaRows["eng/ml"]; !ok || r.Fields["quota.cpus.limit"] != "2.5" || r.Fields["quota.mem.limit"] != "512 MiB" {
		t.Errorf("with quota write on eng/*, the roles view shows eng/ml as %+v; want its quota (cpus 2.5, mem 512 MiB)", r)
	}
	if r := quotaRows["eng"]; r.Cells["quota"] != "no policy of its own" {
		t.Errorf("eng's quota is not this token's to read; its row shows %+v", r)
	}
	b.screenshot("12-roles-from-quotas")
	useToken(t, b, tokens["viewer"])

	b.goTo("#/cluster", "cluster")
	if n := len(b.tables()["servers"]); n != 3 {
		t.Errorf("with the viewer token the cluster view shows %d servers, want 3", n)
	}

	// 12. The servers lose their leader: the frameworks end first (their
	// teardown needs one), then two of three servers die.
	web.stop()
	batch.stop()
	for _, i := range c.Followers() {
		must("kill a follower", c.Kill(i))
	}
	b.waitFor("the no-leader banner", `(() => { const e = document.getElementById('banner');
		return !e.hidden && e.dataset.kind === 'no-leader'; })()`)
	b.screenshot("13-no-leader")
	t.Logf("browser test done %v after it began (builds included)", time.Since(began).Round(time.Millisecond))
}

// checkTasks compares the tasks table with GET /v1/tasks under filter (and
// one framework's tasks, when framework is set).
func checkTasks(ctx context.Context, b *browser, client *api.Client, filter api.TaskFilter, framework string) error {
	tasks, err := client.TasksWhere(ctx, filter)
	if err != nil {
		return err
	}
	fws := frameworkNames(ctx, client)
	agents, err := client.Agents(ctx, api.ReadOptions{})
	if err != nil {
		return err
	}
	agentNames := map[string]string{}
	for _, a := range agents {
		agentNames[a.ID] = a.Name
	}
	want := map[string]map[string]string{}
	for _, task := range tasks {
		if framework != "" && task.FrameworkID != framework {
			continue
		}
		status := strings.TrimSpace(task.Reason + " " + task.Message)
		if status == "" {
			status = "—"
		}
		fw, known := fws[task.FrameworkID]
		if !known {
			fw = task.FrameworkID // torn down: the page has only its id
		}
		want[task.TaskID] = map[string]string{
			"framework": fw, "role": task.Role, "agent": agentNames[task.AgentID],
			"state": task.State, "status": strings.Join(strings.Fields(status), " "),
			"cpus-request": orDash(task.Resources, "cpus"), "cpus-limit": limit(task.Limits, "cpus"),
			"mem-request": orDash(task.Resources, "mem"), "mem-limit": limit(task.Limits, "mem"),
		}
	}
	return diffRows("tasks", b.tables()["tasks"], want)
}

func frameworkNames(ctx context.Context, client *api.Client) map[string]string {
	out := map[string]string{}
	fws, _ := client.Frameworks(ctx)
	for _, f := range fws {
		out[f.ID] = f.Name
	}
	return out
}

// call makes one GET and returns its status and, for an error, the API's error.
func call(base, path, token string) (int, api.Error) {
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, api.Error{Message: err.Error()}
	}
	defer resp.Body.Close()
	var body api.ErrorBody
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if body.Error == nil {
		return resp.StatusCode, api.Error{}
	}
	return resp.StatusCode, *body.Error
}

// scrape reads /metrics of the server at base.
func scrape(base, token string) (metrics, error) {
	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return parseMetrics(text)
}

// useToken gives the page another token through the token box.
func useToken(t *testing.T, b *browser, token string) {
	t.Helper()
	b.do(chromedp.Click(chromedp.ID("token-button")))
	b.waitFor("the token box", `!document.getElementById('token-box').hidden`)
	b.do(chromedp.SendKeys(chromedp.ID("token-input"), token), chromedp.Click(chromedp.ID("token-submit")))
	b.waitFor("the token box to close", `document.getElementById('token-box').hidden`)
}
