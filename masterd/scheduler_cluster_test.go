package main

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/allot/allot/masterd/agentsim"
	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// testFramework launches tasks on the offers it gets until it has launched
// want of them, and declines the rest. It acknowledges every update and
// re-subscribes with its id whenever its stream ends (a leader change).
type testFramework struct {
	t      *testing.T
	info   api.FrameworkInfo
	task   api.Resources
	prefix string

	mu       sync.Mutex
	want     int
	launched []string          // task ids, in launch order
	states   map[string]string // latest state per task id
	offers   int               // OFFERS events since the last subscription
	session  *api.SchedulerSession
}

func startFramework(t *testing.T, ctx context.Context, addrs []string, info api.FrameworkInfo, task api.Resources, want int) *testFramework {
	t.Helper()
	cl, err := api.NewSchedulerClient(addrs, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := cl.Subscribe(ctx, info)
	if err != nil {
		t.Fatalf("subscribe %s: %v", info.Name, err)
	}
	f := &testFramework{t: t, info: info, task: task, prefix: info.Name, want: want, states: map[string]string{}, session: s}
	go f.run(ctx)
	return f
}

func (f *testFramework) run(ctx context.Context) {
	s := f.session
	for {
		for e := range s.Events() {
			f.handle(ctx, s, e)
		}
		if ctx.Err() != nil {
			return
		}
		next, err := s.Resubscribe(ctx)
		if err != nil {
			return // ctx ended
		}
		f.mu.Lock()
		f.session, f.offers = next, 0
		f.mu.Unlock()
		s = next
		// Ask where the tasks stand, as a framework should after a failover.
		_ = s.Reconcile(ctx)
	}
}

func (f *testFramework) handle(ctx context.Context, s *api.SchedulerSession, e api.Event) {
	switch e.Type {
	case api.EventOffers:
		f.mu.Lock()
		f.offers++
		f.mu.Unlock()
		for _, o := range e.Offers.Offers {
			tasks, done := f.plan(o)
			if len(tasks) == 0 {
				refuse := 0.2
				_ = s.Decline(ctx, []string{o.ID}, &api.Filters{RefuseSeconds: &refuse})
				if done {
					// Nothing more to launch: stop offers (as frameworks
					// should), or this framework's declines and another's
					// keep a third from ever getting a whole agent.
					_ = s.Suppress(ctx)
					// setWant may have raised want meanwhile, its REVIVE
					// overtaken by this SUPPRESS.
					if !f.done() {
						_ = s.Revive(ctx)
					}
				}
				continue
			}
			op := api.Operation{Type: api.OperationLaunch, Launch: &api.Launch{Tasks: tasks}}
			if err := s.Accept(ctx, []string{o.ID}, []api.Operation{op}, nil); err != nil {
				f.t.Logf("%s: accept: %v", f.info.Name, err)
			}
		}
	case api.EventUpdate:
		st := e.Update.Status
		if st.State != api.TaskRunning && st.State != api.TaskStarting {
			f.t.Logf("%s: task %s %s %s %s", f.info.Name, st.TaskID, st.State, st.Reason, st.Message)
		}
		f.mu.Lock()
		f.states[st.TaskID] = st.State
		f.mu.Unlock()
		_ = s.AcknowledgeStatus(ctx, st)
	}
}

// plan picks the tasks to launch on an offer; each task id is used once.
// done tells that every wanted task is launched.
func (f *testFramework) plan(o api.Offer) (_ []api.TaskInfo, done bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	free := api.Resources{}
	for _, r := range o.Resources {
		free.Add(r.Scalars)
	}
	var out []api.TaskInfo
	for len(f.launched) < f.want && free.Contains(f.task) {
		id := fmt.Sprintf("%s-%d", f.prefix, len(f.launched))
		f.launched = append(f.launched, id)
		f.states[id] = api.TaskStaging
		free.Subtract(f.task)
		out = append(out, api.TaskInfo{TaskID: id, Name: id, AgentID: o.AgentID, Resources: f.task,
			Command: &api.CommandInfo{Value: "sleep 3600"}})
	}
	return out, len(f.launched) >= f.want
}

func (f *testFramework) done() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.launched) >= f.want
}

func (f *testFramework) setWant(n int) {
	f.mu.Lock()
	f.want = n
	f.mu.Unlock()
	// REVIVE lifts the SUPPRESS and the filters of earlier declines.
	f.mu.Lock()
	s := f.session
	f.mu.Unlock()
	_ = s.Revive(context.Background())
}

func (f *testFramework) running() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, st := range f.states {
		if st == api.TaskRunning {
			n++
		}
	}
	return n
}

// summary lists the tasks not running, for failure messages.
func (f *testFramework) summary() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := fmt.Sprintf("%d launched", len(f.launched))
	for _, id := range f.launched {
		if st := f.states[id]; st != api.TaskRunning {
			out += fmt.Sprintf(", %s %s", id, st)
		}
	}
	return out
}

func (f *testFramework) offersSinceSubscribe() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.offers
}

func (f *testFramework) id() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.session.FrameworkID()
}

func postNoRedirect(t *testing.T, url, body string) (int, string) {
	t.Helper()
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

// TestFrameworksAgentsAndLeaderFailover runs three real masterd processes,
// three simulated agents over the real agent protocol and two frameworks:
// offers, launches, status updates; then the leader is killed while the
// agents are away, and the new leader holds offers back (recovery) until the
// agents re-register with their tasks; offers then resume, and no task is
// ever launched twice.
func TestFrameworksAgentsAndLeaderFailover(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.WithArgs(
		"-allocation-interval", "100ms", "-agent-ping-timeout", "3s", "-heartbeat-interval", "1s",
		"-offer-timeout", "10s", "-recovery-agent-ratio", "1", "-recovery-timeout", "5m"))
	first := waitLeader(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	op := client(t, c.Addresses()...)

	// Followers send both protocols to the leader.
	follower := c.Followers()[0]
	for path, body := range map[string]string{
		api.SchedulerPath:     `{"type":"SUBSCRIBE","subscribe":{"framework_info":{"name":"x","roles":["*"]}}}`,
		api.AgentProtocolPath: `{"type":"REGISTER","register":{"agent_info":{"name":"x","resources":{"cpus":1}}}}`,
	} {
		if status, location := postNoRedirect(t, c.Address(follower)+path, body); status != http.StatusTemporaryRedirect || location != c.Address(first)+path {
			t.Fatalf("%s on a follower: %d Location %q, want 307 to %s", path, status, location, c.Address(first)+path)
		}
	}

	var agents []*agentsim.Agent
	for i := range 3 {
		a, err := agentsim.New(c.Addresses(), "", api.AgentInfo{Name: fmt.Sprintf("node-%d", i), Hostname: fmt.Sprintf("node-%d.test", i),
			Resources: api.Resources{"cpus": 4, "mem": 4096}}, agentsim.Options{UpdateRetryInterval: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Stop)
		agents = append(agents, a)
	}
	eventually(t, "three agents connected", func() error {
		list, err := op.Agents(ctx, api.ReadOptions{})
		if err != nil {
			return err
		}
		n := 0
		for _, a := range list {
			if a.Connected {
				n++
			}
		}
		if n != 3 {
			return fmt.Errorf("%d of 3 connected", n)
		}
		return nil
	})
	// A quota makes a new leader wait for the agents before it offers.
	if _, err := op.PutQuota(ctx, "web", api.QuotaRequest{Guarantees: api.Resources{"cpus": 2}, Limits: api.Resources{"cpus": 6}}, api.WriteOptions{}); err != nil {
		t.Fatal(err)
	}

	web := startFramework(t, ctx, c.Addresses(), api.FrameworkInfo{Name: "web", Principal: "web", Roles: []string{"web"},
		FailoverTimeoutSeconds: 300}, api.Resources{"cpus": 0.5, "mem": 128}, 4)
	batch := startFramework(t, ctx, c.Addresses(), api.FrameworkInfo{Name: "batch", Principal: "batch", Roles: []string{"*"},
		FailoverTimeoutSeconds: 300}, api.Resources{"cpus": 1, "mem": 256}, 4)
	eventually(t, "eight tasks running", func() error {
		if w, b := web.running(), batch.running(); w != 4 || b != 4 {
			return fmt.Errorf("web %d/4, batch %d/4 running", w, b)
		}
		return nil
	})

	// The agents go away, then the leader dies.
	for _, a := range agents {
		a.Disconnect()
	}
	old := c.Leader()
	if err := c.Kill(old); err != nil {
		t.Fatal(err)
	}
	leader := waitLeader(t, c)
	if leader == old {
		t.Fatal("the killed server still leads")
	}
	onLeader := client(t, c.Address(leader))
	eventually(t, "frameworks re-subscribed to the new leader", func() error {
		list, err := onLeader.Frameworks(ctx)
		if err != nil {
			return err
		}
		for _, f := range list {
			if !f.Connected {
				return fmt.Errorf("framework %s not connected", f.Name)
			}
		}
		if len(list) != 2 {
			return fmt.Errorf("%d frameworks", len(list))
		}
		return nil
	})
	info, err := onLeader.Cluster(ctx, api.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !info.Recovery.Active || info.Recovery.Expected != 3 || info.Recovery.Reregistered != 0 {
		t.Fatalf("recovery on the new leader: %+v, want active, 0 of 3 re-registered", info.Recovery)
	}
	if n := web.offersSinceSubscribe() + batch.offersSinceSubscribe(); n != 0 {
		t.Fatalf("%d OFFERS events during recovery", n)
	}
	if offers, err := onLeader.Offers(ctx); err != nil || len(offers) != 0 {
		t.Fatalf("offers during recovery: %v %v", offers, err)
	}

	// Two agents come back: recovery still holds their resources back.
	for _, a := range agents[:2] {
		if err := a.Reconnect(); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "two agents re-registered", func() error {
		info, err := onLeader.Cluster(ctx, api.ReadOptions{})
		if err != nil {
			return err
		}
		if !info.Recovery.Active || info.Recovery.Reregistered != 2 {
			return fmt.Errorf("recovery: %+v", info.Recovery)
		}
		return nil
	})
	time.Sleep(time.Second) // ten allocation intervals in which nothing may be offered
	if n := web.offersSinceSubscribe() + batch.offersSinceSubscribe(); n != 0 {
		t.Fatalf("%d OFFERS events during recovery", n)
	}
	if err := agents[2].Reconnect(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "recovery ends once the agents re-registered", func() error {
		info, err := onLeader.Cluster(ctx, api.ReadOptions{})
		if err != nil {
			return err
		}
		if info.Recovery.Active {
			return fmt.Errorf("recovery: %+v", info.Recovery)
		}
		return nil
	})
	eventually(t, "the new leader knows the eight tasks from the agents", func() error {
		tasks, err := onLeader.Tasks(ctx)
		if err != nil {
			return err
		}
		running := map[string]int{}
		for _, tk := range tasks {
			if tk.State == api.TaskRunning {
				running[tk.FrameworkID]++
			}
		}
		if running[web.id()] != 4 || running[batch.id()] != 4 {
			return fmt.Errorf("running per framework: %v", running)
		}
		return nil
	})

	// Offers resume: each framework launches two more tasks.
	web.setWant(6)
	batch.setWant(6)
	eventually(t, "twelve tasks running", func() error {
		if w, b := web.running(), batch.running(); w != 6 || b != 6 {
			offers, _ := onLeader.Offers(ctx)
			agents, _ := onLeader.Agents(ctx, api.ReadOptions{})
			var used []string
			for _, a := range agents {
				used = append(used, fmt.Sprintf("%s %v connected=%v", a.Name, a.Allocated, a.Connected))
			}
			return fmt.Errorf("web %d/6, batch %d/6 running (web %s; batch %s); offers %+v; agents %v", w, b, web.summary(), batch.summary(), offers, used)
		}
		return nil
	})

	// No task was launched twice, on any agent.
	launches := map[string]int{}
	for _, a := range agents {
		for _, f := range []*testFramework{web, batch} {
			f.mu.Lock()
			ids := append([]string(nil), f.launched...)
			f.mu.Unlock()
			for _, id := range ids {
				launches[id] += a.Launches(id)
			}
		}
	}
	var twice []string
	for id, n := range launches {
		if n != 1 {
			twice = append(twice, fmt.Sprintf("%s×%d", id, n))
		}
	}
	sort.Strings(twice)
	if len(launches) != 12 || len(twice) > 0 {
		t.Fatalf("launches: %d tasks, not launched exactly once: %v", len(launches), twice)
	}
	// Every status update reached its framework and was acknowledged.
	for _, a := range agents {
		sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
		err := a.Client().WaitUpdatesSettled(sctx)
		scancel()
		if err != nil {
			t.Fatalf("agent %s: updates not acknowledged: %v (%d pending)", a.AgentID(), err, a.Client().PendingUpdates())
		}
	}
}
