package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// The acceptance test through a real masterd and a real agentd:
// role db's reservation (half the node) is idle and lent as revocable
// resources to a tenant framework, whose borrowers (random sizes) fill it
// while its regular tasks fill the rest of the node; db then launches a
// task on part of its reservation. Exactly the needed borrowers die
// (TASK_KILLED, REASON_CONTAINER_PREEMPTED, naming db's task and role: a
// fewest-task set that makes room, none of it spared), the regular tasks
// live on, and db's task runs — never refused. Repeated with random sizes
// 50 times (ALLOT_LENDER_E2E_REPS changes it; seeded, the seed logged,
// ALLOT_TEST_SEED repeats a run).
func TestLenderEvictionThroughTheMaster(t *testing.T) {
	reps := 50
	if s := os.Getenv("ALLOT_LENDER_E2E_REPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("ALLOT_LENDER_E2E_REPS=%q: want a positive number", s)
		}
		reps = n
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ALLOT_TEST_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d (ALLOT_TEST_SEED=%d repeats this run)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reserved := api.Resources{"cpus": 2, "mem": 1024}
	c, agent, tenants := startLendNode(t, ctx, "lend-node", reserved)

	overEvictions, refused, evictions := 0, 0, 0
	for rep := range reps {
		where := fmt.Sprintf("repetition %d (seed %d)", rep, seed)
		sizes := splitReservation(rng, reserved, 2+rng.IntN(4))
		var borrowers []string
		for i, res := range sizes {
			id := fmt.Sprintf("r%d-borrower-%d", rep, i)
			ti := sleepTask(id, "sleep 3600", res, nil)
			ti.Revocable = true
			borrowers = append(borrowers, id)
			tenants.add(ctx, ti)
		}
		for _, id := range borrowers {
			tenants.waitState(ctx, id, api.TaskRunning, 60*time.Second)
		}
		byTask := containersByTask(t, agent)
		for _, id := range borrowers {
			if !byTask[id].Revocable {
				t.Fatalf("%s: borrower %s runs as %+v, not revocable", where, id, byTask[id])
			}
		}

		need := api.Resources{
			"cpus": 0.05 * float64(1+rng.IntN(int(reserved["cpus"]/0.05))),
			"mem":  16 * float64(1+rng.IntN(int(reserved["mem"]/16))),
		}.Normalized()
		lenderID := fmt.Sprintf("r%d-db", rep)
		st, lender := launchAsLender(t, ctx, c.Addresses(), sleepTask(lenderID, "sleep 3600", need, nil))
		if st.State != api.TaskRunning {
			refused++
			t.Errorf("%s: db's task %+v", where, st)
		}

		// The node is full: db's task lacks exactly what it needs. It
		// starts once the evicted are gone: their containers are.
		var evicted []int
		live := containersByTask(t, agent)
		for i, id := range borrowers {
			if _, ok := live[id]; ok {
				continue
			}
			end := tenants.waitEnded(ctx, id, 60*time.Second)
			if end.State != api.TaskKilled || end.Reason != api.ReasonContainerPreempted ||
				!strings.Contains(end.Message, "task "+lenderID+" ") || !strings.Contains(end.Message, "role db") {
				t.Errorf("%s: borrower %s ended %+v, want TASK_KILLED, REASON_CONTAINER_PREEMPTED naming %s and role db", where, id, end, lenderID)
			}
			evicted = append(evicted, i)
		}
		evictions += len(evicted)
		freed := api.Resources{}
		for _, i := range evicted {
			freed.Add(sizes[i])
		}
		if !freed.Contains(need) {
			t.Errorf("%s: evicted %v freeing %v, db needs %v", where, evicted, freed, need)
		}
		for _, i := range evicted {
			if freed.Clone().Subtract(sizes[i]).Contains(need) {
				overEvictions++
				t.Errorf("%s: borrower %d could have been spared (evicted %v of %v for %v)", where, i, evicted, sizes, need)
			}
		}
		if fewest := fewestCovering(need, sizes); len(evicted) != fewest {
			overEvictions++
			t.Errorf("%s: %d borrowers evicted, %d would do (sizes %v, need %v)", where, len(evicted), fewest, sizes, need)
		}

		// db leaves (its reservation is idle again) and the tenant ends the
		// rest of its borrowers.
		if err := lender.Teardown(ctx); err != nil {
			t.Fatal(err)
		}
		for _, id := range borrowers {
			if tenants.firstEndOf(id).State == "" {
				tenants.kill(ctx, id)
			}
		}
		for _, id := range borrowers {
			tenants.waitEnded(ctx, id, 60*time.Second)
		}
	}
	harmed := 0
	for _, id := range lendNodeRegulars {
		if got := tenants.states(id); !slices.Equal(got, []string{api.TaskRunning}) {
			harmed++
			t.Errorf("regular task %s: %v, want it left running", id, got)
		}
	}
	t.Logf("%d repetitions through the master: %d borrowers evicted; %d over-evictions, %d regular tasks harmed, %d lender tasks refused",
		reps, evictions, overEvictions, harmed, refused)
}

// launchAsLender subscribes as role db, launches ti on the first offer of
// db's reservation that holds it, and returns the task's first state past
// staging with the session (declined offers are not offered again soon).
func launchAsLender(t *testing.T, ctx context.Context, masters []string, ti api.TaskInfo) (api.TaskStatus, *api.SchedulerSession) {
	t.Helper()
	cl, err := api.NewSchedulerClient(masters, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := cl.Subscribe(ctx, api.FrameworkInfo{Name: "db", Roles: []string{"db"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	long := 3600.0
	launched := false
	for {
		var e api.Event
		select {
		case <-ctx.Done():
			t.Fatalf("db's task %s: no offer or update in time (launched %v)", ti.TaskID, launched)
		case e = <-s.Events():
		}
		switch e.Type {
		case api.EventOffers:
			for _, o := range e.Offers.Offers {
				own := api.Resources{}
				for _, r := range o.Resources {
					if r.Role == "db" && !r.Revocable {
						own.Add(r.Scalars)
					}
				}
				if launched || !own.Contains(ti.Resources) {
					_ = s.Decline(ctx, []string{o.ID}, &api.Filters{RefuseSeconds: &long})
					continue
				}
				ti.AgentID = o.AgentID
				op := api.Operation{Type: api.OperationLaunch, Launch: &api.Launch{Tasks: []api.TaskInfo{ti}}}
				if err := s.Accept(ctx, []string{o.ID}, []api.Operation{op}, &api.Filters{RefuseSeconds: &long}); err != nil {
					t.Fatal(err)
				}
				launched = true
			}
		case api.EventUpdate:
			st := e.Update.Status
			_ = s.AcknowledgeStatus(ctx, st)
			if st.TaskID == ti.TaskID && st.State != api.TaskStaging {
				return st, s
			}
		}
	}
}

// firstEndOf is the first terminal update of a task ("" state: none yet).
func (f *queueFramework) firstEndOf(taskID string) api.TaskStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.firstEnd[taskID]
}

// waitEnded waits for a task's first terminal update.
func (f *queueFramework) waitEnded(ctx context.Context, taskID string, timeout time.Duration) api.TaskStatus {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		f.mu.Lock()
		st, ok := f.firstEnd[taskID]
		changed := f.changed
		f.mu.Unlock()
		if ok {
			return st
		}
		select {
		case <-ctx.Done():
			f.t.Fatalf("task %s: no end, updates so far %v", taskID, f.states(taskID))
		case <-changed:
		}
	}
}

// splitReservation cuts r into n random positive parts (cpus in 0.05, mem
// in 16 MiB steps) that add up to r.
func splitReservation(rng *rand.Rand, r api.Resources, n int) []api.Resources {
	parts := make([]api.Resources, n)
	for i := range parts {
		parts[i] = api.Resources{"cpus": 0.05, "mem": 16}
	}
	left := api.Resources{"cpus": r["cpus"] - 0.05*float64(n), "mem": r["mem"] - 16*float64(n)}.Normalized()
	for left["cpus"] > 0.001 {
		parts[rng.IntN(n)].Add(api.Resources{"cpus": 0.05})
		left.Subtract(api.Resources{"cpus": 0.05})
	}
	for left["mem"] > 0 {
		parts[rng.IntN(n)].Add(api.Resources{"mem": 16})
		left.Subtract(api.Resources{"mem": 16})
	}
	return parts
}

// fewestCovering is the size of the smallest set of sizes holding need.
func fewestCovering(need api.Resources, sizes []api.Resources) int {
	best := len(sizes) + 1
	for mask := 0; mask < 1<<len(sizes); mask++ {
		sum, n := api.Resources{}, 0
		for i := range sizes {
			if mask&(1<<i) != 0 {
				sum.Add(sizes[i])
				n++
			}
		}
		if n < best && sum.Contains(need) {
			best = n
		}
	}
	return best
}

// Usage slack end to end: agentd's fixed estimate reaches the master (GET
// /v1/agents shows it as revocable), a framework with REVOCABLE_RESOURCES
// runs a revocable task on a throttleable offer, and the same agentd
// restarted with the noop estimator lends nothing.
func TestAgentdLendsUsageSlack(t *testing.T) {
	c := testcluster.Start(t, 1, fastMaster)
	if _, err := c.WaitLeader(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	agent := startAgent(t, c.Addresses(), "slack-node", "cpus:2;mem:512;disk:512",
		"-estimator", "fixed", "-estimator-fixed", "cpus:1", "-oversubscribed-interval", "200ms")
	client, err := api.NewClient(c.Addresses(), "")
	if err != nil {
		t.Fatal(err)
	}
	revocable := func() (api.Resources, error) {
		agents, err := client.Agents(ctx, api.ReadOptions{})
		if err != nil || len(agents) != 1 {
			return nil, fmt.Errorf("agents %v, %v", agents, err)
		}
		return agents[0].Revocable, nil
	}
	eventually(t, "the estimate at the master", 30*time.Second, func() error {
		if r, err := revocable(); err != nil || r["cpus"] != 1 {
			return fmt.Errorf("revocable %v, %v", r, err)
		}
		return nil
	})

	// The slack offer holds cpus only (mem is not lent without
	// -estimator-memory): the task takes its cpus there and its mem from
	// a regular offer of the same agent, accepted together.
	cl, err := api.NewSchedulerClient(c.Addresses(), "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := cl.Subscribe(ctx, api.FrameworkInfo{Name: "best-effort", Roles: []string{"batch"},
		Capabilities: []string{api.CapabilityRevocableResources}})
	if err != nil {
		t.Fatal(err)
	}
	ti := sleepTask("on-slack", "sleep 3600", api.Resources{"cpus": 1, "mem": 32}, nil)
	ti.Revocable = true
	var slackOffer, regularOffer *api.Offer
	deadline := time.After(60 * time.Second)
	for slackOffer == nil || regularOffer == nil {
		select {
		case <-deadline:
			t.Fatalf("no slack offer (%v) and regular offer (%v)", slackOffer, regularOffer)
		case e := <-s.Events():
			if e.Type != api.EventOffers {
				continue
			}
			for _, o := range e.Offers.Offers {
				o := o
				switch {
				case len(o.Resources) > 0 && o.Resources[0].Revocable:
					if !o.Resources[0].Throttleable || o.Resources[0].Scalars["cpus"] != 1 {
						t.Fatalf("the slack offer %+v: want 1 throttleable revocable cpu", o)
					}
					slackOffer = &o
				default:
					regularOffer = &o
				}
			}
		}
	}
	ti.AgentID = slackOffer.AgentID
	op := api.Operation{Type: api.OperationLaunch, Launch: &api.Launch{Tasks: []api.TaskInfo{ti}}}
	if err := s.Accept(ctx, []string{slackOffer.ID, regularOffer.ID}, []api.Operation{op}, nil); err != nil {
		t.Fatal(err)
	}
	for running := false; !running; {
		select {
		case <-deadline:
			t.Fatal("on-slack did not run")
		case e := <-s.Events():
			if e.Type != api.EventUpdate || e.Update.Status.TaskID != "on-slack" {
				continue
			}
			_ = s.AcknowledgeStatus(ctx, e.Update.Status)
			if st := e.Update.Status; st.State == api.TaskRunning {
				running = true
			} else if api.IsTerminal(st.State) {
				t.Fatalf("on-slack: %+v", st)
			}
		}
	}
	if ct := containersByTask(t, agent)["on-slack"]; !ct.Revocable {
		t.Fatalf("on-slack runs as %+v, not revocable", ct)
	}
	tasks, err := client.Tasks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		if task.TaskID == "on-slack" && !task.Revocable {
			t.Fatalf("the master has on-slack as %+v, not revocable", task)
		}
	}

	agent.kill()
	// The same agentd with the noop estimator (the default): the fixed
	// estimator's four arguments dropped.
	agent.args = append(agent.args[:len(agent.args)-6:len(agent.args)-6], "-oversubscribed-interval", "200ms")
	agent.start()
	eventually(t, "the slack withdrawn", 30*time.Second, func() error {
		if r, err := revocable(); err != nil || r["cpus"] != 0 {
			return fmt.Errorf("revocable %v, %v", r, err)
		}
		return nil
	})
}

// lendNodeRegulars are the regular tasks startLendNode runs on the node.
var lendNodeRegulars = []string{"regular-0", "regular-1"}

// startLendNode starts one master and an agentd called name with 4 cpus,
// reserves reserved on it for role db and fills the rest with
// lendNodeRegulars of the tenants framework, which gets revocable offers
// to borrow the reservation with.
func startLendNode(tb testing.TB, ctx context.Context, name string, reserved api.Resources) (*testcluster.Cluster, *agentProcess, *queueFramework) {
	tb.Helper()
	c := testcluster.Start(tb, 1, fastMaster)
	if _, err := c.WaitLeader(context.Background()); err != nil {
		tb.Fatal(err)
	}
	agent := startAgent(tb, c.Addresses(), name, "cpus:4;mem:2048;disk:1024")
	client, err := api.NewClient(c.Addresses(), "")
	if err != nil {
		tb.Fatal(err)
	}
	eventually(tb, "the agent to register", 30*time.Second, func() error {
		agents, err := client.Agents(ctx, api.ReadOptions{})
		if err != nil || len(agents) != 1 {
			return fmt.Errorf("agents %v, %v", agents, err)
		}
		return nil
	})
	if _, err := client.PutReservation(ctx, "db-on-"+name, api.ReservationRequest{Agent: name, Role: "db", Resources: reserved}, api.WriteOptions{}); err != nil {
		tb.Fatal(err)
	}
	tenants := startQueueFrameworkAs(tb, ctx, c.Addresses(), api.FrameworkInfo{Name: "tenants", Roles: []string{"tenants"},
		Capabilities: []string{api.CapabilityRevocableResources}, FailoverTimeoutSeconds: 3600})
	for _, id := range lendNodeRegulars {
		tenants.add(ctx, sleepTask(id, "sleep 3600", api.Resources{"cpus": 1, "mem": 512}, nil))
	}
	for _, id := range lendNodeRegulars {
		tenants.waitState(ctx, id, api.TaskRunning, 60*time.Second)
	}
	return c, agent, tenants
}
