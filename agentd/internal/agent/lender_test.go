package agent

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/agentsim/fakemaster"
	"github.com/allot/allot/masterd/api"
)

// These tests play the master at its protocol: they launch tasks with the
// allocation a master gives them — a borrower on role db's lent
// reservation ({"role": "db", "revocable": true}), the lender db on its own
// reservation, regular tasks on unreserved resources — and watch what the
// agent does with real processes in real cgroups.

const lenderRole = "db"

type placement int

const (
	regular  placement = iota // unreserved, role "*"
	borrowed                  // db's reservation, lent: revocable, not throttleable
	slack                     // usage slack: revocable, throttleable
	lender                    // db's reservation, launched by db
)

// placedLaunch is a LAUNCH of one task whose allocation is one piece.
func placedLaunch(frameworkID string, where placement, ti api.TaskInfo) api.AgentEvent {
	piece := api.OfferResource{Role: "*", Scalars: ti.Resources}
	role := "*"
	switch where {
	case borrowed:
		piece.Role, piece.Revocable = lenderRole, true
		ti.Revocable = true
		role = "tenants"
	case slack:
		piece.Revocable, piece.Throttleable = true, true
		ti.Revocable = true
		role = "tenants"
	case lender:
		piece.Role, role = lenderRole, lenderRole
	}
	return api.AgentEvent{Type: api.AgentEventLaunch, Launch: &api.AgentLaunch{FrameworkID: frameworkID, Tasks: []api.AgentTask{{
		FrameworkID: frameworkID, Role: role, Task: ti, Allocation: []api.OfferResource{piece},
	}}}}
}

func (ta *testAgent) send(s *fakemaster.Stream, ev api.AgentEvent) {
	ta.t.Helper()
	if err := ta.master.Send(s.ID, ev); err != nil {
		ta.t.Fatal(err)
	}
}

// updates lists every update of a task the master got, in order.
func (ta *testAgent) updates(taskID string) []api.TaskStatus {
	var out []api.TaskStatus
	seen := map[string]bool{}
	for _, c := range ta.master.Calls(func(c fakemaster.Call) bool {
		return c.Agent != nil && c.Agent.Update != nil && c.Agent.Update.Status.TaskID == taskID
	}) {
		if st := c.Agent.Update.Status; !seen[st.UUID] {
			seen[st.UUID] = true
			out = append(out, st)
		}
	}
	return out
}

func (ta *testAgent) states(taskID string) []string {
	var out []string
	for _, st := range ta.updates(taskID) {
		out = append(out, st.State)
	}
	return out
}

func (ta *testAgent) running(s *fakemaster.Stream, where placement, ti api.TaskInfo) {
	ta.t.Helper()
	ta.send(s, placedLaunch("fw", where, ti))
	if st := ta.lastUpdate(ti.TaskID, api.TaskRunning, api.TaskFailed, api.TaskError, api.TaskDropped); st.State != api.TaskRunning {
		ta.t.Fatalf("%s: %+v", ti.TaskID, st)
	}
}

func checkPreempted(t *testing.T, st api.TaskStatus, lenderTask string) {
	t.Helper()
	if st.State != api.TaskKilled || st.Reason != api.ReasonContainerPreempted ||
		!strings.Contains(st.Message, "task "+lenderTask+" ") || !strings.Contains(st.Message, "role "+lenderRole) {
		t.Errorf("evicted task %s: %+v, want TASK_KILLED, REASON_CONTAINER_PREEMPTED naming task %s and role %s", st.TaskID, st, lenderTask, lenderRole)
	}
}

// A lender launching on its reservation evicts the youngest borrower that
// makes room, not the others nor the regular task nor the one on usage
// slack, and runs once it is gone.
func TestLenderEvictsTheBorrowersItNeeds(t *testing.T) {
	master, root := testEnv(t, fakemaster.Options{AutoAcknowledge: true})
	a := newTestAgentWith(t, master, t.TempDir(), root, api.Resources{"cpus": 2, "mem": 1024})
	defer a.stop()
	s := a.stream(1)

	a.running(s, regular, newTaskInfo("regular", "sleep 3600", api.Resources{"cpus": 0.25, "mem": 128}, nil))
	a.running(s, slack, newTaskInfo("on-slack", "sleep 3600", api.Resources{"cpus": 1, "mem": 64}, nil))
	for i, res := range []api.Resources{{"cpus": 0.5, "mem": 128}, {"cpus": 0.5, "mem": 256}, {"cpus": 0.5, "mem": 128}} {
		a.running(s, borrowed, newTaskInfo(fmt.Sprintf("borrower-%d", i), "sleep 3600", res, nil))
	}
	// 0.25 + 1.5 lent cpus held of 2: the lender's 0.5 cpus lack 0.25, one
	// borrower's worth; memory fits (128 + 512 + 256 of 1024).
	a.send(s, placedLaunch("fw-db", lender, newTaskInfo("db-1", "sleep 3600", api.Resources{"cpus": 0.5, "mem": 256}, nil)))
	if st := a.lastUpdate("db-1", api.TaskRunning, api.TaskFailed, api.TaskError, api.TaskLost, api.TaskDropped); st.State != api.TaskRunning {
		t.Fatalf("lender: %+v", st)
	}
	checkPreempted(t, a.lastUpdate("borrower-2", api.TaskKilled, api.TaskFailed), "db-1")
	for _, id := range []string{"regular", "on-slack", "borrower-0", "borrower-1"} {
		if got := a.states(id); !slices.Equal(got, []string{api.TaskRunning}) {
			t.Errorf("%s: updates %v, want it left running", id, got)
		}
	}
	// borrower-2 was gone before db-1 started: its end came first.
	killed, run := a.lastUpdate("borrower-2", api.TaskKilled), a.lastUpdate("db-1", api.TaskRunning)
	if run.Timestamp.Before(killed.Timestamp) {
		t.Errorf("the lender ran at %v, before the borrower was gone at %v", run.Timestamp, killed.Timestamp)
	}
}

// A borrower whose lent resources were taken back is dropped with a reason
// the framework can act on; one that fits once the evictions under way are
// done is not (the seed's "unnecessary reject"), and waits for them.
func TestBorrowerThatDoesNotFitIsDropped(t *testing.T) {
	master, root := testEnv(t, fakemaster.Options{AutoAcknowledge: true})
	gate := filepath.Join(t.TempDir(), "gate")
	a := newTestAgentWith(t, master, t.TempDir(), root, api.Resources{"cpus": 2, "mem": 1024})
	defer a.stop()
	s := a.stream(1)

	// The youngest borrower holds a whole cpu and leaves slowly: it ignores
	// SIGTERM until the gate opens.
	a.running(s, borrowed, newTaskInfo("old", "sleep 3600", api.Resources{"cpus": 0.5, "mem": 64}, nil))
	a.runningStubborn(s, borrowed, "young", gate, api.Resources{"cpus": 1.5, "mem": 64})
	a.send(s, placedLaunch("fw-db", lender, newTaskInfo("db-1", "sleep 3600", api.Resources{"cpus": 1, "mem": 64}, nil)))
	waitFor(t, "young to be evicted", func() bool { return a.killing("young") })

	// old and db-1 stay, 1.5 cpus of 2: a 1-cpu borrower would need old
	// evicted: dropped.
	a.send(s, placedLaunch("fw", borrowed, newTaskInfo("too-big", "sleep 3600", api.Resources{"cpus": 1, "mem": 64}, nil)))
	st := a.lastUpdate("too-big", api.TaskDropped, api.TaskRunning, api.TaskError)
	if st.State != api.TaskDropped || st.Reason != api.ReasonInvalidOffers || !strings.Contains(st.Message, "no longer lendable") ||
		!strings.Contains(st.Message, "it needs cpus:1;mem:64, cpus:0.5;mem:896 is left") {
		t.Fatalf("too-big: %+v, want TASK_DROPPED, REASON_INVALID_OFFERS", st)
	}
	// A half-cpu borrower fits once young is gone, not before (the node is
	// full until then): it waits with db-1.
	a.send(s, placedLaunch("fw", borrowed, newTaskInfo("fits-later", "sleep 3600", api.Resources{"cpus": 0.5, "mem": 64}, nil)))
	waitFor(t, "fits-later to wait", func() bool { return a.waitingLaunches() == 2 })
	if got := a.states("fits-later"); len(got) != 0 {
		t.Fatalf("fits-later: %v before young is gone", got)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"db-1", "fits-later"} {
		if st := a.lastUpdate(id, api.TaskRunning, api.TaskFailed, api.TaskDropped); st.State != api.TaskRunning {
			t.Errorf("%s: %+v", id, st)
		}
	}
	checkPreempted(t, a.lastUpdate("young", api.TaskKilled, api.TaskFailed), "db-1")
	if got := a.states("old"); !slices.Equal(got, []string{api.TaskRunning}) {
		t.Errorf("old: %v, want it left running", got)
	}
}

// stubborn is a task that ignores SIGTERM until gate exists (its sleeps die
// of the signal; the loop goes on).
func stubborn(id, gate string, res api.Resources) api.TaskInfo {
	ti := newTaskInfo(id, fmt.Sprintf("trap '' TERM; : > %s; while [ ! -e %s ]; do sleep 0.05; done", trapped(gate, id), gate), res, nil)
	grace := 3600.0 // never SIGKILLed while the test runs
	ti.KillPolicy = &api.KillPolicy{GracePeriodSeconds: &grace}
	return ti
}

// trapped is the file a stubborn task writes once it ignores SIGTERM.
func trapped(gate, id string) string { return gate + "." + id + ".trapped" }

// runningStubborn starts a stubborn task and waits until it ignores
// SIGTERM: a kill that came between the start and the shell's trap (a
// loaded machine) would end it at once.
func (ta *testAgent) runningStubborn(s *fakemaster.Stream, where placement, id, gate string, res api.Resources) {
	ta.t.Helper()
	ta.running(s, where, stubborn(id, gate, res))
	deadline := time.Now().Add(10 * time.Second)
	for _, err := os.Stat(trapped(gate, id)); err != nil; _, err = os.Stat(trapped(gate, id)) {
		if time.Now().After(deadline) {
			ta.t.Fatalf("%s does not ignore SIGTERM: %v", id, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (ta *testAgent) killing(taskID string) bool {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	for _, t := range ta.tasks {
		if t.rec.Task.Task.TaskID == taskID {
			return t.rec.Killing
		}
	}
	return false
}

func (ta *testAgent) waitingLaunches() int {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	return len(ta.waiting)
}

// A second lender arriving while the first one's eviction is under way
// evicts nobody more when what is being freed makes room for both; a kill
// of a waiting lender ends it before it starts.
func TestNoEvictionWhileEnoughIsBeingFreed(t *testing.T) {
	master, root := testEnv(t, fakemaster.Options{AutoAcknowledge: true})
	gate := filepath.Join(t.TempDir(), "gate")
	a := newTestAgentWith(t, master, t.TempDir(), root, api.Resources{"cpus": 2, "mem": 1024})
	defer a.stop()
	s := a.stream(1)

	a.running(s, borrowed, newTaskInfo("b-0", "sleep 3600", api.Resources{"cpus": 0.5, "mem": 64}, nil))
	a.running(s, borrowed, newTaskInfo("b-1", "sleep 3600", api.Resources{"cpus": 0.5, "mem": 64}, nil))
	a.runningStubborn(s, borrowed, "b-big", gate, api.Resources{"cpus": 1, "mem": 64})
	// db-1 lacks 0.25: the fewest tasks is one, the youngest is b-big,
	// which frees a whole cpu: room for db-2 and db-killed too.
	a.send(s, placedLaunch("fw-db", lender, newTaskInfo("db-1", "sleep 3600", api.Resources{"cpus": 0.25, "mem": 64}, nil)))
	waitFor(t, "b-big to be evicted", func() bool { return a.killing("b-big") })
	a.send(s, placedLaunch("fw-db", lender, newTaskInfo("db-2", "sleep 3600", api.Resources{"cpus": 0.25, "mem": 64}, nil)))
	a.send(s, placedLaunch("fw-db", lender, newTaskInfo("db-killed", "sleep 3600", api.Resources{"cpus": 0.25, "mem": 64}, nil)))
	waitFor(t, "three lenders to wait", func() bool { return a.waitingLaunches() == 3 })
	a.send(s, api.AgentEvent{Type: api.AgentEventKill, Kill: &api.AgentKill{FrameworkID: "fw-db", TaskID: "db-killed"}})
	if st := a.lastUpdate("db-killed", api.TaskKilled, api.TaskRunning); st.Reason != api.ReasonTaskKilledDuringLaunch {
		t.Errorf("db-killed: %+v, want TASK_KILLED, REASON_TASK_KILLED_DURING_LAUNCH", st)
	}
	if a.killing("b-0") || a.killing("b-1") {
		t.Fatal("a second borrower was evicted while b-big's cpu made room for both lenders")
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"db-1", "db-2"} {
		if st := a.lastUpdate(id, api.TaskRunning, api.TaskFailed, api.TaskDropped); st.State != api.TaskRunning {
			t.Errorf("%s: %+v", id, st)
		}
	}
	checkPreempted(t, a.lastUpdate("b-big", api.TaskKilled, api.TaskFailed), "db-1")
	for _, id := range []string{"b-0", "b-1"} {
		if got := a.states(id); !slices.Equal(got, []string{api.TaskRunning}) {
			t.Errorf("%s: %v, want it left running", id, got)
		}
	}
}

// A lender waiting for an eviction when agentd stops waits again after the
// restart and runs once the borrower is gone; the borrower's end is still
// reported as its eviction.
func TestWaitingLenderSurvivesRestart(t *testing.T) {
	master, root := testEnv(t, fakemaster.Options{AutoAcknowledge: true})
	gate := filepath.Join(t.TempDir(), "gate")
	workDir := t.TempDir()
	res := api.Resources{"cpus": 2, "mem": 1024}
	a := newTestAgentWith(t, master, workDir, root, res)
	s := a.stream(1)
	a.runningStubborn(s, borrowed, "borrower", gate, api.Resources{"cpus": 2, "mem": 64})
	a.send(s, placedLaunch("fw-db", lender, newTaskInfo("db-1", "sleep 3600", api.Resources{"cpus": 1, "mem": 64}, nil)))
	waitFor(t, "the lender to wait", func() bool { return a.waitingLaunches() == 1 && a.killing("borrower") })
	a.stop()

	b := newTestAgentWith(t, master, workDir, root, res)
	defer b.stop()
	b.stream(2)
	if n := b.waitingLaunches(); n != 1 {
		t.Fatalf("%d launches wait after the restart, want the lender's", n)
	}
	tasks, _ := b.report()
	for _, at := range tasks {
		if at.Task.TaskID == "db-1" && at.State != api.TaskStaging {
			t.Errorf("db-1 reported %s at re-registration, want %s", at.State, api.TaskStaging)
		}
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if st := b.lastUpdate("db-1", api.TaskRunning, api.TaskFailed, api.TaskLost, api.TaskDropped); st.State != api.TaskRunning {
		t.Fatalf("db-1 after the restart: %+v", st)
	}
	checkPreempted(t, b.lastUpdate("borrower", api.TaskKilled, api.TaskFailed), "db-1")
	if got := b.states("db-1"); !slices.Equal(got, []string{api.TaskRunning}) {
		t.Errorf("db-1: updates %v, want one TASK_RUNNING", got)
	}
}

// The acceptance test, on real cgroups: a node filled with
// borrowers of random sizes beside a few regular tasks; a lender launches
// a task needing part of the node. Exactly the needed borrowers die (a
// fewest-task set that makes room, no task in it spared), with the reason;
// regular tasks are untouched; the lender's task runs. 50 repetitions,
// seeded (the seed is logged; ALLOT_TEST_SEED repeats a run).
func TestLenderEvictionRandomized(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ALLOT_TEST_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d (ALLOT_TEST_SEED=%d repeats this run)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	total := api.Resources{"cpus": 4, "mem": 2048}
	master, root := testEnv(t, fakemaster.Options{AutoAcknowledge: true})
	a := newTestAgentWith(t, master, t.TempDir(), root, total)
	defer a.stop()
	s := a.stream(1)

	const reps = 50
	overEvictions, harmed, refused, evictions, withoutEviction := 0, 0, 0, 0, 0
	for rep := range reps {
		where := fmt.Sprintf("repetition %d (seed %d)", rep, seed)
		// Regular tasks take a little of the node; borrowers (2–6) fill the
		// rest, the reservation lent to them, but for a little room left
		// free in some repetitions.
		var regulars []string
		used := api.Resources{}
		for i := range 1 + rng.IntN(3) {
			id := fmt.Sprintf("r%d-regular-%d", rep, i)
			res := api.Resources{"cpus": 0.05 * float64(1+rng.IntN(6)), "mem": 16 * float64(1+rng.IntN(8))}
			a.running(s, regular, newTaskInfo(id, "sleep 3600", res, nil))
			regulars = append(regulars, id)
			used.Add(res)
		}
		free := api.Resources{"cpus": 0.25 * float64(rng.IntN(3)), "mem": 128 * float64(rng.IntN(2))}
		reserved := total.Clone().Subtract(used).Subtract(free)
		sizes := splitRandomly(rng, reserved, 2+rng.IntN(5))
		var borrowerIDs []string
		for i, res := range sizes {
			id := fmt.Sprintf("r%d-borrower-%d", rep, i)
			a.running(s, borrowed, newTaskInfo(id, "sleep 3600", res, nil))
			borrowerIDs = append(borrowerIDs, id)
		}
		// The lender takes part of its reservation back, up to all of it.
		need := api.Resources{
			"cpus": 0.05 * float64(1+rng.IntN(int(reserved["cpus"]/0.05))),
			"mem":  16 * float64(1+rng.IntN(int(reserved["mem"]/16))),
		}.Normalized()
		lenderID := fmt.Sprintf("r%d-db", rep)
		a.send(s, placedLaunch("fw-db", lender, newTaskInfo(lenderID, "sleep 3600", need, nil)))
		if st := a.lastUpdate(lenderID, api.TaskRunning, api.TaskFailed, api.TaskError, api.TaskLost, api.TaskDropped); st.State != api.TaskRunning {
			refused++
			t.Errorf("%s: lender %+v", where, st)
		}

		// What the agent lacked, from the test's own figures.
		staying := used.Clone().Add(reserved).Add(need)
		short := shortfall(total, staying)
		var evicted []int
		for i, id := range borrowerIDs {
			if states := a.states(id); len(states) > 1 {
				checkPreempted(t, a.lastUpdate(id, api.TaskKilled), lenderID)
				evicted = append(evicted, i)
			}
		}
		evictions += len(evicted)
		if len(evicted) == 0 {
			withoutEviction++
		}
		freed := api.Resources{}
		for _, i := range evicted {
			freed.Add(sizes[i])
		}
		if shortfall(freed, short) != nil {
			t.Errorf("%s: evicted %v freeing %v, short %v", where, evicted, freed, short)
		}
		for _, i := range evicted {
			if shortfall(freed.Clone().Subtract(sizes[i]), short) == nil {
				overEvictions++
				t.Errorf("%s: borrower %d could have been spared (evicted %v of %v, short %v)", where, i, evicted, sizes, short)
			}
		}
		if fewest := fewestCover(short, sizes); len(evicted) != fewest {
			overEvictions++
			t.Errorf("%s: %d borrowers evicted, %d would do (sizes %v, short %v)", where, len(evicted), fewest, sizes, short)
		}
		for _, id := range regulars {
			if got := a.states(id); !slices.Equal(got, []string{api.TaskRunning}) {
				harmed++
				t.Errorf("%s: regular task %s: %v", where, id, got)
			}
		}
		// Clean the node for the next repetition.
		live := append(append(slices.Clone(regulars), lenderID), borrowerIDs...)
		for _, id := range live {
			fw := "fw"
			if id == lenderID {
				fw = "fw-db"
			}
			a.send(s, api.AgentEvent{Type: api.AgentEventKill, Kill: &api.AgentKill{FrameworkID: fw, TaskID: id}})
		}
		for _, id := range live {
			a.lastUpdate(id, api.TaskKilled, api.TaskFailed)
		}
		waitFor(t, "the node to be empty", func() bool { return len(a.ctz.Containers()) == 0 })
	}
	t.Logf("%d repetitions: %d borrowers evicted (%d repetitions needed none); %d over-evictions, %d regular tasks harmed, %d lender tasks refused",
		reps, evictions, withoutEviction, overEvictions, harmed, refused)
	if evictions == 0 {
		// Every repetition lends the reservation and takes part of it
		// back; none evicting means the lender never took anything back.
		t.Errorf("%d repetitions (seed %d) evicted no borrower", reps, seed)
	}
}

// splitRandomly cuts r into n random positive parts (cpus in 0.05, mem in
// 16 MiB steps) that add up to r.
func splitRandomly(rng *rand.Rand, r api.Resources, n int) []api.Resources {
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

// fewestCover is the size of the smallest set of sizes covering short, by
// trying every subset.
func fewestCover(short api.Resources, sizes []api.Resources) int {
	best := len(sizes) + 1
	for mask := 0; mask < 1<<len(sizes); mask++ {
		sum, n := api.Resources{}, 0
		for i := range sizes {
			if mask&(1<<i) != 0 {
				sum.Add(sizes[i])
				n++
			}
		}
		if n < best && shortfall(sum, short) == nil {
			best = n
		}
	}
	return best
}
