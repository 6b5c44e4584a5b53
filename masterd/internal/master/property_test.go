package master

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/allocator"
	"github.com/allot/allot/raftstore"
)

// TestPropertyAccounting drives a few agents and frameworks through random
// sequences of launches, declines, kills, status updates, disconnections and
// re-registrations while the allocation loop runs (and time passes on the
// harness's clock, so that offers expire and filters end on the way), and
// checks after every step that no agent is over-allocated and that the
// master's books (live tasks, executors, outstanding offers) add up to what
// the allocator counts on every agent. At the end every task ends, and nothing may stay
// allocated.
func TestPropertyAccounting(t *testing.T) {
	steps := 300
	if testing.Short() {
		steps = 100
	}
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) {
			newAccountingRun(t, seed).run(steps)
		})
	}
}

type propAgent struct {
	sim       *simAgent
	connected bool
	tasks     map[taskKey]api.AgentTask // what the agent runs
	executors map[execKey]api.AgentExecutor
	kills     map[taskKey]bool
	// ended are updates already sent for tasks that ended, to repeat as an
	// agent does whose acknowledgement was lost.
	ended []api.AgentUpdate
}

type propFramework struct {
	sim       *simFramework
	connected bool
	offers    map[string]api.Offer
	live      map[string]bool // task ids it launched that have not ended
}

type accountingRun struct {
	t          *testing.T
	h          *harness
	rng        *rand.Rand
	agents     []*propAgent
	frameworks []*propFramework
	nextTask   int
	// seen counts the operations done and the task states reported, to show
	// what a run covered.
	seen map[string]int
}

func newAccountingRun(t *testing.T, seed uint64) *accountingRun {
	h := newHarness(t, func(o *Options) {
		o.AllocationInterval = 5 * time.Millisecond
		o.OfferTimeout = 300 * time.Millisecond
		o.DefaultRefuseSeconds = 0.05
		o.Seed = seed
	})
	r := &accountingRun{t: t, h: h, rng: rand.New(rand.NewPCG(seed, 7)), seen: map[string]int{}}
	specs := []struct {
		name string
		res  api.Resources
		caps []string
	}{
		{"a0", api.Resources{"cpus": 4, "mem": 4096}, nil},
		{"a1", api.Resources{"cpus": 2, "mem": 2048}, []string{api.CapabilityTaskResourceLimits}},
		{"a2", api.Resources{"cpus": 8, "mem": 1024}, nil},
	}
	for _, s := range specs {
		r.agents = append(r.agents, &propAgent{sim: h.registerAgent(s.name, s.res, s.caps...), connected: true,
			tasks: map[taskKey]api.AgentTask{}, executors: map[execKey]api.AgentExecutor{}, kills: map[taskKey]bool{}})
	}
	h.write(&raftstore.ReservationSet{WriteMeta: raftstore.WriteMeta{Time: h.clock.Now()},
		Name: "a0-db", Agent: "a0", Role: "db", Resources: api.Resources{"cpus": 1, "mem": 512}})
	for _, info := range []api.FrameworkInfo{fwInfo("f0", "*"), fwInfo("f1", "db", "*"), fwInfo("f2", "db")} {
		r.frameworks = append(r.frameworks, &propFramework{sim: h.subscribe(info), connected: true,
			offers: map[string]api.Offer{}, live: map[string]bool{}})
	}
	return r
}

func (r *accountingRun) run(steps int) {
	ops := []struct {
		name   string
		weight int
		do     func() bool // false: nothing to do in this state
	}{
		{"accept", 10, r.accept},
		{"decline", 3, r.decline},
		{"kill", 3, r.kill},
		{"agent progress", 12, r.agentProgress},
		{"repeated update", 2, r.repeatUpdate},
		{"agent disconnect", 2, r.disconnectAgent},
		{"agent re-registration", 4, r.reregisterAgent},
		{"agent new incarnation", 1, r.newIncarnation},
		{"framework disconnect", 2, r.disconnectFramework},
		{"framework re-subscription", 4, r.resubscribe},
		{"framework teardown", 1, r.teardown},
		{"new term", 1, r.newTerm},
	}
	total := 0
	for _, op := range ops {
		total += op.weight
	}
	for step := 0; step < steps; step++ {
		// Let the loop make offers now and then; otherwise a kicked cycle
		// the loop waits to run runs alongside the step.
		if r.rng.IntN(2) == 0 {
			r.h.waitCycles(2)
		} else {
			r.h.passGap()
		}
		r.pump()
		pick := r.rng.IntN(total)
		for _, op := range ops {
			if pick < op.weight {
				if op.do() {
					r.seen[op.name]++
				}
				break
			}
			pick -= op.weight
		}
		r.pump()
		r.check(fmt.Sprint("step ", step))
	}
	r.finish()
	r.t.Logf("%d steps: %v", steps, r.seen)
}

// pump reads every session's queued events and acts on them as agents and
// schedulers do.
func (r *accountingRun) pump() {
	for _, a := range r.agents {
		a.sim.poll()
		for _, e := range a.sim.backlog {
			switch e.Type {
			case api.AgentEventLaunch:
				l := e.Launch
				if l.Executor != nil {
					a.executors[execKey{l.FrameworkID, l.Executor.ExecutorID}] = *l.Executor
				}
				r.seen["launched"] += len(l.Tasks)
				for _, lt := range l.Tasks {
					lt.State = api.TaskStaging
					a.tasks[taskKey{lt.FrameworkID, lt.Task.TaskID}] = lt
				}
			case api.AgentEventKill:
				a.kills[taskKey{e.Kill.FrameworkID, e.Kill.TaskID}] = true
			}
		}
		a.sim.backlog = nil
	}
	for _, f := range r.frameworks {
		if !f.connected {
			continue
		}
		f.sim.poll()
		for _, e := range f.sim.backlog {
			switch e.Type {
			case api.EventOffers:
				for _, o := range e.Offers.Offers {
					f.offers[o.ID] = o
				}
			case api.EventRescind:
				r.seen["rescinded"]++
				delete(f.offers, e.Rescind.OfferID)
			case api.EventUpdate:
				st := e.Update.Status
				r.seen[st.State]++
				if api.IsTerminal(st.State) {
					delete(f.live, st.TaskID)
				}
				if st.UUID != "" && r.rng.IntN(5) > 0 {
					e := f.sim.call(api.Call{Type: api.CallAcknowledge, Acknowledge: &api.Acknowledge{
						AgentID: st.AgentID, TaskID: st.TaskID, UUID: st.UUID}})
					// The agent may have been replaced by a new incarnation.
					if e != nil && e.Code != api.CodeNotFound {
						r.t.Fatalf("ACKNOWLEDGE %s: %v", st.TaskID, e)
					}
				}
			}
		}
		f.sim.backlog = nil
	}
}

func pickKey[K comparable, V any](rng *rand.Rand, m map[K]V, less func(a, b K) int) (K, bool) {
	var zero K
	if len(m) == 0 {
		return zero, false
	}
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, less) // map order is random; the seed must replay
	return keys[rng.IntN(len(keys))], true
}

func cmpTaskKey(a, b taskKey) int {
	if c := strings.Compare(a.framework, b.framework); c != 0 {
		return c
	}
	return strings.Compare(a.task, b.task)
}

func (r *accountingRun) connectedFramework() *propFramework {
	var up []*propFramework
	for _, f := range r.frameworks {
		if f.connected {
			up = append(up, f)
		}
	}
	if len(up) == 0 {
		return nil
	}
	return up[r.rng.IntN(len(up))]
}

func (r *accountingRun) filters() *api.Filters {
	return refuse([]float64{0, 0, 0.02}[r.rng.IntN(3)])
}

func (r *accountingRun) randomTask(f *propFramework, agentID string) api.TaskInfo {
	r.nextTask++
	id := fmt.Sprint("t", r.nextTask)
	if dup, ok := pickKey(r.rng, f.live, strings.Compare); ok && r.rng.IntN(20) == 0 {
		id = dup // refused: the id is taken
	}
	if r.rng.IntN(20) == 0 {
		agentID = "agent-elsewhere" // refused: not the offer's agent
	}
	res := api.Resources{"cpus": float64(1+r.rng.IntN(8)) / 10, "mem": float64(32 * (1 + r.rng.IntN(8)))}
	f.live[id] = true
	return taskInfo(id, agentID, res)
}

// accept launches tasks (sometimes too big, sometimes invalid, sometimes a
// task group) on one or two offers of one agent and role.
func (r *accountingRun) accept() bool {
	f := r.connectedFramework()
	if f == nil {
		return false
	}
	id, ok := pickKey(r.rng, f.offers, strings.Compare)
	if !ok {
		return false
	}
	o := f.offers[id]
	ids := []string{id}
	for _, oid := range slices.Sorted(maps.Keys(f.offers)) {
		if other := f.offers[oid]; oid != id && other.AgentID == o.AgentID && r.rng.IntN(2) == 0 && sameRoleOffer(other, o) {
			ids = append(ids, oid)
			break
		}
	}
	var ops []api.Operation
	for range 1 + r.rng.IntN(2) {
		if r.rng.IntN(4) == 0 {
			r.nextTask++
			var tasks []api.TaskInfo
			for range 1 + r.rng.IntN(2) {
				tasks = append(tasks, r.randomTask(f, o.AgentID))
			}
			ops = append(ops, groupOp(fmt.Sprint("ex", r.nextTask), api.Resources{"cpus": 0.1, "mem": 32}, tasks...))
		} else {
			ops = append(ops, launchOp(r.randomTask(f, o.AgentID)))
		}
	}
	if r.rng.IntN(20) == 0 {
		ids = append(ids, "offer-gone") // all dropped
	}
	if e := f.sim.call(api.Call{Type: api.CallAccept, Accept: &api.Accept{OfferIDs: ids, Operations: ops, Filters: r.filters()}}); e != nil {
		r.t.Fatalf("ACCEPT: %v", e)
	}
	for _, id := range ids {
		delete(f.offers, id)
	}
	return true
}

// sameRoleOffer tells whether two offers of an agent are for the same role
// as far as the offer shows it: the reservations they carry.
func sameRoleOffer(a, b api.Offer) bool {
	roles := func(o api.Offer) []string {
		var out []string
		for _, p := range o.Resources {
			out = append(out, p.Role)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(roles(a), roles(b))
}

func (r *accountingRun) decline() bool {
	f := r.connectedFramework()
	if f == nil {
		return false
	}
	id, ok := pickKey(r.rng, f.offers, strings.Compare)
	if !ok {
		return false
	}
	if e := f.sim.call(api.Call{Type: api.CallDecline, Decline: &api.Decline{OfferIDs: []string{id}, Filters: r.filters()}}); e != nil {
		r.t.Fatalf("DECLINE: %v", e)
	}
	delete(f.offers, id)
	return true
}

func (r *accountingRun) kill() bool {
	f := r.connectedFramework()
	if f == nil {
		return false
	}
	id, ok := pickKey(r.rng, f.live, strings.Compare)
	if !ok {
		return false
	}
	if e := f.sim.call(api.Call{Type: api.CallKill, Kill: &api.Kill{TaskID: id}}); e != nil {
		r.t.Fatalf("KILL: %v", e)
	}
	return true
}

func (r *accountingRun) connectedAgent() *propAgent {
	var up []*propAgent
	for _, a := range r.agents {
		if a.connected {
			up = append(up, a)
		}
	}
	if len(up) == 0 {
		return nil
	}
	return up[r.rng.IntN(len(up))]
}

// send sends a task's update from its agent and keeps the agent's own books.
func (r *accountingRun) send(a *propAgent, k taskKey, state string) {
	uuid := a.sim.update(k.framework, k.task, state)
	if !api.IsTerminal(state) {
		t := a.tasks[k]
		t.State = state
		a.tasks[k] = t
		return
	}
	ex := a.tasks[k].ExecutorID
	delete(a.tasks, k)
	delete(a.kills, k)
	a.ended = append(a.ended, api.AgentUpdate{FrameworkID: k.framework, Status: api.TaskStatus{TaskID: k.task, State: state, UUID: uuid}})
	if ex == "" {
		return
	}
	for _, t := range a.tasks {
		if t.FrameworkID == k.framework && t.ExecutorID == ex {
			return
		}
	}
	delete(a.executors, execKey{k.framework, ex})
}

// agentProgress has an agent act on a kill or move one task on.
func (r *accountingRun) agentProgress() bool {
	a := r.connectedAgent()
	if a == nil {
		return false
	}
	if k, ok := pickKey(r.rng, a.kills, cmpTaskKey); ok {
		if _, runs := a.tasks[k]; runs {
			r.send(a, k, api.TaskKilled)
		} else {
			delete(a.kills, k)
		}
		return true
	}
	k, ok := pickKey(r.rng, a.tasks, cmpTaskKey)
	if !ok {
		return false
	}
	states := []string{api.TaskStarting, api.TaskRunning, api.TaskRunning, api.TaskFinished, api.TaskFailed}
	r.send(a, k, states[r.rng.IntN(len(states))])
	return true
}

func (r *accountingRun) repeatUpdate() bool {
	a := r.connectedAgent()
	if a == nil || len(a.ended) == 0 {
		return false
	}
	u := a.ended[r.rng.IntN(len(a.ended))]
	a.sim.updateWith(u.FrameworkID, u.Status)
	return true
}

func (r *accountingRun) disconnectAgent() bool {
	a := r.connectedAgent()
	if a == nil {
		return false
	}
	a.sim.disconnect()
	a.connected = false
	return true
}

// report is what a restarting agent reports; each task may have died with
// the agent (the master then declares it lost).
func (r *accountingRun) report(a *propAgent) ([]api.AgentTask, []api.AgentExecutor) {
	for _, k := range slices.SortedFunc(maps.Keys(a.tasks), cmpTaskKey) {
		if r.rng.IntN(5) == 0 {
			ex := a.tasks[k].ExecutorID
			delete(a.tasks, k)
			delete(a.kills, k)
			if ex != "" && !slices.ContainsFunc(slices.Collect(maps.Values(a.tasks)), func(t api.AgentTask) bool {
				return t.FrameworkID == k.framework && t.ExecutorID == ex
			}) {
				delete(a.executors, execKey{k.framework, ex})
			}
		}
	}
	var tasks []api.AgentTask
	for _, k := range slices.SortedFunc(maps.Keys(a.tasks), cmpTaskKey) {
		tasks = append(tasks, a.tasks[k])
	}
	var execs []api.AgentExecutor
	for _, k := range slices.SortedFunc(maps.Keys(a.executors), func(x, y execKey) int {
		if c := strings.Compare(x.framework, y.framework); c != 0 {
			return c
		}
		return strings.Compare(x.executor, y.executor)
	}) {
		execs = append(execs, a.executors[k])
	}
	return tasks, execs
}

func (r *accountingRun) reregisterAgent() bool {
	var down []*propAgent
	for _, a := range r.agents {
		if !a.connected {
			down = append(down, a)
		}
	}
	if len(down) == 0 {
		return false
	}
	a := down[r.rng.IntN(len(down))]
	tasks, execs := r.report(a)
	a.sim.reregister(tasks, execs)
	a.connected = true
	return true
}

// newIncarnation restarts an agent that lost its id: its tasks are gone.
func (r *accountingRun) newIncarnation() bool {
	a := r.agents[r.rng.IntN(len(r.agents))]
	a.sim.register(api.AgentCall{Type: api.AgentCallRegister, Register: &api.AgentRegister{AgentInfo: a.sim.info}})
	a.connected = true
	clear(a.tasks)
	clear(a.executors)
	clear(a.kills)
	a.ended = nil
	return true
}

func (r *accountingRun) disconnectFramework() bool {
	f := r.connectedFramework()
	if f == nil {
		return false
	}
	f.sim.disconnect()
	f.connected = false
	clear(f.offers) // rescinded
	return true
}

func (r *accountingRun) resubscribe() bool {
	for _, f := range r.frameworks {
		if !f.connected {
			f.sim = f.sim.resubscribe()
			f.connected = true
			return true
		}
	}
	return false
}

// teardown removes a framework; a new one with the same name and roles takes
// its place.
func (r *accountingRun) teardown() bool {
	f := r.connectedFramework()
	if f == nil {
		return false
	}
	if e := f.sim.call(api.Call{Type: api.CallTeardown}); e != nil {
		r.t.Fatalf("TEARDOWN: %v", e)
	}
	info := f.sim.info
	info.ID = ""
	f.sim = r.h.subscribe(info)
	clear(f.offers)
	clear(f.live)
	return true
}

// newTerm replaces the Master as a leader change does: every session ends,
// and the new Master learns the tasks from the agents as they come back.
func (r *accountingRun) newTerm() bool {
	r.h.startTerm()
	for _, a := range r.agents {
		a.connected = false
	}
	for _, f := range r.frameworks {
		f.connected = false
		clear(f.offers)
	}
	return true
}

// check compares the master's books with the allocator's, atomically.
func (r *accountingRun) check(when string) {
	r.t.Helper()
	m := r.h.m()
	m.mu.Lock()
	defer m.mu.Unlock()
	offered := 0
	for id, ag := range m.agents {
		stats, ok := m.alloc.Agent(id)
		if !ok {
			r.t.Fatalf("%s: agent %s is unknown to the allocator", when, ag.name)
		}
		held := api.Resources{}.Add(stats.Allocated).Add(stats.Offered)
		if !stats.Total.Contains(held) {
			r.t.Fatalf("%s: agent %s over-allocated: allocated %v + offered %v > total %v",
				when, ag.name, stats.Allocated, stats.Offered, stats.Total)
		}
		used := api.Resources{}
		for _, t := range ag.tasks {
			if !t.released {
				used.Add(sumPieces(t.allocation))
			}
		}
		for _, ex := range ag.executors {
			used.Add(sumPieces(ex.allocation))
		}
		if !sameResources(used, stats.Allocated) {
			r.t.Fatalf("%s: agent %s: live tasks and executors hold %v, the allocator counts %v in use",
				when, ag.name, used, stats.Allocated)
		}
		inOffers := api.Resources{}
		for oid, o := range m.offers {
			if o.alloc.AgentID != ag.id {
				continue
			}
			if o.id != oid || m.frameworks[o.alloc.FrameworkID] == nil {
				r.t.Fatalf("%s: offer %s is filed wrongly or its framework is gone", when, oid)
			}
			if !slices.Contains(m.agentOffers(ag.id), o) {
				r.t.Fatalf("%s: offer %s is not on its agent's list", when, oid)
			}
			inOffers.Add(sumPieces(o.alloc.Pieces))
			offered++
		}
		for _, o := range m.agentOffers(ag.id) {
			if m.offers[o.id] != o {
				r.t.Fatalf("%s: agent %s lists offer %s the book does not have", when, ag.name, o.id)
			}
		}
		if !sameResources(inOffers, stats.Offered) {
			r.t.Fatalf("%s: agent %s: outstanding offers hold %v, the allocator counts %v offered",
				when, ag.name, inOffers, stats.Offered)
		}
	}
	if offered != len(m.offers) {
		r.t.Fatalf("%s: %d offers in the book, %d on agents", when, len(m.offers), offered)
	}
}

// finish brings everyone back, ends every task and checks that nothing
// stays allocated and that every agent is offered in full again.
func (r *accountingRun) finish() {
	for r.resubscribe() {
	}
	for _, a := range r.agents {
		if !a.connected {
			tasks, execs := r.report(a)
			a.sim.reregister(tasks, execs)
			a.connected = true
		}
	}
	r.pump()
	for _, a := range r.agents {
		for _, k := range slices.SortedFunc(maps.Keys(a.tasks), cmpTaskKey) {
			r.send(a, k, api.TaskFinished)
		}
		if len(a.executors) != 0 {
			r.t.Fatalf("agent %s keeps executors without tasks: %+v", a.sim.info.Name, a.executors)
		}
	}
	r.pump()
	r.check("the end")
	m := r.h.m()
	m.mu.Lock()
	for id, ag := range m.agents {
		stats, _ := m.alloc.Agent(id)
		if len(ag.tasks) != 0 || len(ag.executors) != 0 || !stats.Allocated.IsZero() {
			m.mu.Unlock()
			r.t.Fatalf("agent %s after every task ended: %d tasks, %d executors, %v allocated",
				ag.name, len(ag.tasks), len(ag.executors), stats.Allocated)
		}
	}
	m.mu.Unlock()
	// Past every filter (the longest is the default refusal), so that
	// declined agents are offered again.
	r.h.pass(secondsDuration(r.h.opts.DefaultRefuseSeconds))
	r.h.waitFor("every agent to be offered in full", func() bool {
		r.pump()
		for _, a := range r.agents {
			u, _ := func() (allocator.AgentStats, bool) {
				m.mu.Lock()
				defer m.mu.Unlock()
				return m.alloc.Agent(a.sim.id)
			}()
			if !sameResources(u.Offered, u.Total) {
				return false
			}
		}
		return true
	})
}
