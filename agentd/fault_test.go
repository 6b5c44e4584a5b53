package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// The fault tests put an agentd through what a node suffers in the middle
// of a launch (issue #13, the agent's side): killed with SIGKILL and
// restarted with the same work dir, or cut from the masters and reconnected.
// A task the framework was told about must end in one running or terminal
// state, be started at most once (counted on the host, not asked of
// agentd), and the framework's record must agree with the agent's and the
// host's.

// faultSeeds are the seeds of TestAgentdKilledMidLaunch's rounds: each
// picks where the kill lands. Fixed, so that a failure replays.
var faultSeeds = []uint64{1, 2, 3, 4}

// faultTasks is how many tasks one LAUNCH carries: enough that their starts
// (≈10 ms each) span a window a kill can land in.
const faultTasks = 16

// An agentd killed with SIGKILL at a random point of a 16-task LAUNCH and
// restarted with the same work dir loses no task and starts none twice, for
// several kill points.
func TestAgentdKilledMidLaunch(t *testing.T) {
	c := testcluster.Start(t, 1, fastMaster)
	if _, err := c.WaitLeader(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	agent := startAgent(t, c.Addresses(), "fault-kill", "cpus:4;mem:4096;disk:1024")
	f := startFaultFramework(t, ctx, c.Addresses(), "fault-kill")
	keepOnFailure(t, agent)
	starts := t.TempDir()
	for _, seed := range faultSeeds {
		r := killMidLaunch(t, ctx, agent, f, starts, seed)
		t.Logf("seed %d: killed %s; reconciled %s after the restart; %v", seed, r.killPoint, r.reconcile, r.outcome)
	}
}

// killRound is what one kill-and-restart round did.
type killRound struct {
	killPoint string
	reconcile time.Duration // from agentd's restart to every task reconciled
	outcome   map[string]int
}

// killMidLaunch launches faultTasks tasks in one LAUNCH, kills agentd at a
// point the seed picks, restarts it and checks every task.
func killMidLaunch(tb testing.TB, ctx context.Context, agent *agentProcess, f *faultFramework, starts string, seed uint64) killRound {
	tb.Helper()
	rng := rand.New(rand.NewPCG(seed, 13))
	tasks := faultTaskSet(fmt.Sprintf("s%d", seed), starts, rng)
	point := pickLaunchPoint(rng, agent.workDir)
	f.launchAll(ctx, tasks...)
	point.wait(tb)
	agent.kill9()
	restarted := time.Now()
	agent.start()
	ids := taskIDs(tasks)
	waitReconciled(tb, agent, f, ids, 60*time.Second)
	round := killRound{killPoint: point.name, reconcile: time.Since(restarted)}
	round.outcome = checkTasks(tb, agent, f, starts, ids)
	return round
}

// faultTaskSet is faultTasks tasks named prefix-N: most run until killed,
// some end at once with a code of their own, some soon after they start, so
// that ends race with the kill too. Each appends its pid to starts/<task id>
// as its first act: the host's own count of its starts.
func faultTaskSet(prefix, starts string, rng *rand.Rand) []api.TaskInfo {
	res := api.Resources{"cpus": 0.01, "mem": 16}
	var out []api.TaskInfo
	for i := range faultTasks {
		id := fmt.Sprintf("%s-%d", prefix, i)
		body := "exec sleep 3600"
		switch rng.IntN(4) {
		case 0:
			body = fmt.Sprintf("exit %d", 3+i)
		case 1:
			body = "sleep 0.3"
		}
		cmd := fmt.Sprintf(`echo $$ >> %s/"$ALLOT_TASK_ID"; %s`, starts, body)
		out = append(out, sleepTask(id, cmd, res, nil))
	}
	return out
}

func taskIDs(tasks []api.TaskInfo) []string {
	var ids []string
	for _, ti := range tasks {
		ids = append(ids, ti.TaskID)
	}
	return ids
}

// launchPoint is a moment of a launch, observed in agentd's work dir.
type launchPoint struct {
	name  string
	reach func() bool
}

// pickLaunchPoint picks where a fault lands: at once (the LAUNCH may not
// have reached the agent), after k tasks are checkpointed, after k
// containers have records (the cgroup and monitor follow), or after k
// monitors started their task. Counts are relative to what the work dir
// holds now.
func pickLaunchPoint(rng *rand.Rand, workDir string) launchPoint {
	k := 1 + rng.IntN(faultTasks-1)
	checkpoints := func() int { return countEntries(filepath.Join(workDir, "meta", "tasks"), ".json") }
	records := func() int { return countEntries(filepath.Join(workDir, "containers"), "") }
	monitors := func() int { return countFiles(filepath.Join(workDir, "containers"), "monitor.json") }
	switch rng.IntN(4) {
	case 0:
		return launchPoint{name: "right after the ACCEPT", reach: func() bool { return true }}
	case 1:
		base := records() // checkpoints of ended tasks go; records stay
		return launchPoint{name: fmt.Sprintf("after %d task checkpoints", k), reach: func() bool {
			return checkpoints() >= k || records()-base >= k
		}}
	case 2:
		base := records()
		return launchPoint{name: fmt.Sprintf("after %d containers had records", k), reach: func() bool { return records()-base >= k }}
	default:
		base := monitors()
		return launchPoint{name: fmt.Sprintf("after %d monitors started their task", k), reach: func() bool { return monitors()-base >= k }}
	}
}

// wait polls the work dir until the point is reached: tightly, since the
// whole launch takes a fraction of a second.
func (p launchPoint) wait(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !p.reach() {
		if time.Now().After(deadline) {
			tb.Fatalf("the launch never reached the fault point %q", p.name)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func countEntries(dir, suffix string) int {
	entries, _ := os.ReadDir(dir)
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), suffix) {
			n++
		}
	}
	return n
}

func countFiles(dir, name string) int {
	entries, _ := os.ReadDir(dir)
	n := 0
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(dir, e.Name(), name)); err == nil {
			n++
		}
	}
	return n
}

// waitReconciled waits until the framework, the agent and the host agree:
// every task's latest state at the framework is running or terminal, the
// agent is connected with no update unacknowledged, and the tasks it runs
// are exactly those the framework was last told run.
func waitReconciled(tb testing.TB, agent *agentProcess, f *faultFramework, ids []string, timeout time.Duration) {
	tb.Helper()
	eventually(tb, "framework and agent to agree on every task", timeout, func() error {
		running := map[string]bool{}
		for _, id := range ids {
			st := f.last(id)
			switch {
			case st.State == api.TaskRunning:
				running[id] = true
			case !api.IsTerminal(st.State):
				return fmt.Errorf("task %s: latest state %q (%v)", id, st.State, f.states(id))
			}
		}
		m, err := agentMetrics(agent)
		if err != nil {
			return err
		}
		if m["allot_agent_connected"] != 1 || m["allot_agent_pending_updates"] != 0 {
			return fmt.Errorf("agent connected %v, pending updates %v", m["allot_agent_connected"], m["allot_agent_pending_updates"])
		}
		list, err := agent.containers()
		if err != nil {
			return err
		}
		onAgent := map[string]bool{}
		for _, ct := range list {
			if slices.Contains(ids, ct.TaskID) {
				onAgent[ct.TaskID] = true
			}
		}
		for _, id := range ids {
			if onAgent[id] != running[id] {
				return fmt.Errorf("task %s: running at the framework %v, on the agent %v", id, running[id], onAgent[id])
			}
		}
		return nil
	})
}

// checkTasks checks the tasks once reconciled and counts their final
// states.
func checkTasks(tb testing.TB, agent *agentProcess, f *faultFramework, starts string, ids []string) map[string]int {
	tb.Helper()
	outcome := map[string]int{}
	for _, id := range ids {
		history := f.history(id)
		final := history[len(history)-1]
		outcome[final.State]++
		// Terminal is final: nothing after it but the same end again (a
		// retry), from whichever source.
		for i, st := range history {
			if api.IsTerminal(st.State) {
				for _, later := range history[i+1:] {
					if later.State != st.State {
						tb.Errorf("task %s: %s after %s: %v", id, later.State, st.State, describe(history))
					}
				}
				break
			}
		}
		if n := f.launches(id); n != 1 {
			tb.Errorf("task %s: the framework launched it %d times", id, n)
		}
		n := startsOf(starts, id)
		if n > 1 {
			tb.Errorf("task %s started %d times on the host: %v", id, n, describe(history))
		}
		startedOK := final.State == api.TaskRunning || final.State == api.TaskFinished ||
			(final.State == api.TaskFailed && strings.Contains(final.Message, "code"))
		if startedOK && n != 1 {
			tb.Errorf("task %s: ended %s (%s) but started %d times on the host", id, final.State, final.Message, n)
		}
		// Lost, dropped or found without a monitor: the framework may
		// launch it again, so it must never have run.
		neverRan := final.State == api.TaskLost || final.State == api.TaskDropped ||
			final.Reason == api.ReasonCommandExecutorFailed
		if neverRan && n != 0 {
			tb.Errorf("task %s: ended %s %s but started %d times on the host: %s", id, final.State, final.Reason, n, describe(history))
		}
	}
	// A task that ends now (a short one started late) is told to the
	// framework a moment before its container and cgroup go: the agent and
	// the host are given that moment to agree.
	eventually(tb, "the agent and the host to agree with the framework", 15*time.Second, func() error {
		return hostAgrees(agent, f, ids)
	})
	return outcome
}

// hostAgrees compares the framework's latest state of each task with the
// agent's containers and the host's processes and cgroups.
func hostAgrees(agent *agentProcess, f *faultFramework, ids []string) error {
	hostTasks := taskProcesses()
	list, err := agent.containers()
	if err != nil {
		return err
	}
	containers := map[string][]api.Container{}
	for _, ct := range list {
		containers[ct.TaskID] = append(containers[ct.TaskID], ct)
	}
	for _, id := range ids {
		final := f.last(id)
		cgs := hostTasks[id]
		switch {
		case final.State == api.TaskRunning:
			if len(containers[id]) != 1 || len(cgs) != 1 || containers[id][0].Cgroup != cgs[0] {
				return fmt.Errorf("task %s runs at the framework; agent containers %+v, host cgroups %v", id, containers[id], cgs)
			}
		case len(containers[id]) > 0 || len(cgs) > 0:
			return fmt.Errorf("task %s ended %s at the framework; agent containers %+v, host cgroups %v", id, final.State, containers[id], cgs)
		}
	}
	// No cgroup outlives its container. (A container may end between the
	// two reads, so only cgroups without one count.)
	named := map[string]bool{}
	for _, ct := range list {
		named[filepath.Base(ct.Cgroup)] = true
	}
	dirs, _ := os.ReadDir(filepath.Join("/sys/fs/cgroup/memory", agent.root))
	for _, d := range dirs {
		if d.IsDir() && !named[d.Name()] {
			return fmt.Errorf("cgroup /%s/%s belongs to no container of the agent", agent.root, d.Name())
		}
	}
	return nil
}

// keepOnFailure keeps, when the test fails, agentd's log and work dir
// (checkpoints, container records, monitor logs) for a post-mortem: the
// temporary dirs go with the test.
func keepOnFailure(t *testing.T, agent *agentProcess) {
	t.Cleanup(func() { // before agentd's own cleanup, which kills it
		if !t.Failed() {
			return
		}
		dir, err := os.MkdirTemp("", "agentd-fault-")
		if err != nil {
			return
		}
		_ = exec.Command("cp", "-a", agent.logPath, agent.workDir, dir).Run()
		t.Logf("agentd's log and work dir kept in %s", dir)
	})
}

func describe(history []api.TaskStatus) string {
	var parts []string
	for _, st := range history {
		who := "agent"
		if st.UUID == "" {
			who = "master"
		}
		parts = append(parts, fmt.Sprintf("%s(%s %s: %s)", st.State, who, st.Reason, st.Message))
	}
	return strings.Join(parts, " → ")
}

// startsOf counts the lines the task wrote to its starts file.
func startsOf(dir, taskID string) int {
	data, err := os.ReadFile(filepath.Join(dir, taskID))
	if err != nil {
		return 0
	}
	return bytes.Count(data, []byte("\n"))
}

// taskProcesses maps every task id that a live process on the host carries
// in its environment (ALLOT_TASK_ID) to the distinct memory cgroups those
// processes are in: one task in two cgroups runs twice.
func taskProcesses() map[string][]string {
	out := map[string][]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !processAlive(pid) {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			continue
		}
		var id string
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte("ALLOT_TASK_ID=")); ok {
				id = string(v)
			}
		}
		if id == "" {
			continue
		}
		cg := memoryCgroup(pid)
		if !slices.Contains(out[id], cg) {
			out[id] = append(out[id], cg)
		}
	}
	return out
}

func memoryCgroup(pid int) string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	for _, line := range strings.Split(string(data), "\n") {
		// hierarchy-id:controllers:path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), "memory") {
			return parts[2]
		}
	}
	return ""
}

// agentMetrics reads the agent's unlabelled gauges and counters.
func agentMetrics(a *agentProcess) (map[string]float64, error) {
	resp, err := http.Get("http://" + a.http + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}

// An agentd cut from the masters while a LAUNCH starts, past the master's
// -agent-ping-timeout (its tasks become unreachable), and then reconnected,
// keeps running what it launched meanwhile, reports what ended meanwhile
// with its real status, and nothing is launched again. Two cuts: the
// network (a proxy between agent and master that stops passing bytes, as a
// dropped route does) and SIGSTOP of agentd.
func TestAgentdCutFromMastersMidLaunch(t *testing.T) {
	c := testcluster.Start(t, 1, fastMaster)
	if _, err := c.WaitLeader(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	proxy := startBlackholeProxy(t, strings.TrimPrefix(c.Address(0), "http://"))
	agent := startAgent(t, []string{"http://" + proxy.addr}, "fault-cut", "cpus:4;mem:4096;disk:1024")
	f := startFaultFramework(t, ctx, c.Addresses(), "fault-cut")
	keepOnFailure(t, agent)
	starts := t.TempDir()

	cuts := []struct {
		name      string
		cut, heal func()
	}{
		{"network", proxy.cut, proxy.heal},
		{"SIGSTOP", func() { _ = agent.cmd.Process.Signal(syscall.SIGSTOP) }, func() { _ = agent.cmd.Process.Signal(syscall.SIGCONT) }},
	}
	for i, cut := range cuts {
		rng := rand.New(rand.NewPCG(uint64(i), 13))
		tasks := faultTaskSet(fmt.Sprintf("cut%d", i), starts, rng)
		ids := taskIDs(tasks)
		// Cut once the first container has records: the whole LAUNCH
		// (one event) has reached the agent, and most tasks still start.
		base := countEntries(filepath.Join(agent.workDir, "containers"), "")
		point := launchPoint{name: "after the first container had records", reach: func() bool {
			return countEntries(filepath.Join(agent.workDir, "containers"), "") > base
		}}
		f.launchAll(ctx, tasks...)
		point.wait(t)
		cut.cut()
		// Past the ping timeout: the master has given the agent up and
		// told the framework its tasks are unreachable.
		eventually(t, "the master to find the agent unreachable", 30*time.Second, func() error {
			for _, id := range ids {
				if f.last(id).State == api.TaskUnreachable {
					return nil
				}
			}
			return fmt.Errorf("no task unreachable yet")
		})
		if cut.name == "network" {
			// Cut but alive, the agent starts every task meanwhile.
			eventually(t, "the agent to start every task while cut", 30*time.Second, func() error {
				if n := countFiles(filepath.Join(agent.workDir, "containers"), "monitor.json") - base; n < len(ids) {
					return fmt.Errorf("%d of %d started", n, len(ids))
				}
				return nil
			})
		}
		healed := time.Now()
		cut.heal()
		waitReconciled(t, agent, f, ids, 60*time.Second)
		reconcile := time.Since(healed)
		outcome := checkTasks(t, agent, f, starts, ids)
		// The LAUNCH had reached the agent before the cut: every task
		// started, exactly once, and its end is the agent's own.
		for _, id := range ids {
			h := f.history(id)
			final := h[len(h)-1]
			if n := startsOf(starts, id); n != 1 {
				t.Errorf("%s cut: task %s started %d times: %s", cut.name, id, n, describe(h))
			}
			if final.State != api.TaskRunning && (final.UUID == "" || final.State == api.TaskLost) {
				t.Errorf("%s cut: task %s ended %s without the agent's word: %s", cut.name, id, final.State, describe(h))
			}
		}
		t.Logf("%s cut: reconciled %s after the heal; %v", cut.name, reconcile, outcome)
	}
}

// blackholeProxy passes TCP between the agent and a master until cut; cut,
// it holds every byte either way and new connections reach nothing, as a
// dropped route does (no reset, no FIN); healed, what it held goes through.
type blackholeProxy struct {
	addr   string
	target string
	mu     sync.Mutex
	open   chan struct{} // closed while traffic passes
}

func startBlackholeProxy(tb testing.TB, target string) *blackholeProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &blackholeProxy{addr: ln.Addr().String(), target: target, open: make(chan struct{})}
	close(p.open)
	var conns sync.WaitGroup
	var mu sync.Mutex
	var all []net.Conn
	tb.Cleanup(func() {
		ln.Close()
		p.heal()
		mu.Lock()
		for _, c := range all {
			c.Close()
		}
		mu.Unlock()
		conns.Wait()
	})
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				p.passable()
				out, err := net.Dial("tcp", p.target)
				if err != nil {
					in.Close()
					return
				}
				mu.Lock()
				all = append(all, in, out)
				mu.Unlock()
				done := make(chan struct{}, 2)
				go func() { p.pump(out, in); done <- struct{}{} }()
				go func() { p.pump(in, out); done <- struct{}{} }()
				<-done
				in.Close()
				out.Close()
				<-done
			}()
		}
	}()
	return p
}

// passable waits until traffic passes.
func (p *blackholeProxy) passable() {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	<-open
}

// pump copies src to dst, each chunk once traffic passes.
func (p *blackholeProxy) pump(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.passable()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			if tc, ok := dst.(*net.TCPConn); ok {
				p.passable()
				_ = tc.CloseWrite()
			}
			return
		}
	}
}

func (p *blackholeProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default:
	}
}

func (p *blackholeProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

// faultFramework is a queueFramework read through every update it got, in
// order: the agents' (with a uuid) and the master's own (unreachable, lost,
// reconciliation answers), which a framework acts on just the same. Its
// tasks are regular (not revocable), so each LAUNCH carries all queued
// tasks that fit in the offer's regular resources.
type faultFramework struct {
	q *queueFramework
}

func startFaultFramework(tb testing.TB, ctx context.Context, masters []string, name string) *faultFramework {
	tb.Helper()
	q := newQueueFramework(tb, ctx, masters, api.FrameworkInfo{Name: name, Roles: []string{"*"}, FailoverTimeoutSeconds: 3600})
	go q.run(ctx, q.session) // no reconciliation after re-subscribing
	return &faultFramework{q: q}
}

// launchAll queues tasks, to go in one ACCEPT, and revives offers.
func (f *faultFramework) launchAll(ctx context.Context, tasks ...api.TaskInfo) {
	f.q.add(ctx, tasks...)
}

// launches is how many ACCEPTs carried the task.
func (f *faultFramework) launches(taskID string) int {
	f.q.mu.Lock()
	defer f.q.mu.Unlock()
	return f.q.launches[taskID]
}

// history is every update of a task, in the order they came, each distinct
// agent update (uuid) once.
func (f *faultFramework) history(taskID string) []api.TaskStatus {
	f.q.mu.Lock()
	defer f.q.mu.Unlock()
	var out []api.TaskStatus
	seen := map[string]bool{}
	for _, st := range f.q.received[taskID] {
		if st.UUID != "" && seen[st.UUID] {
			continue
		}
		seen[st.UUID] = true
		out = append(out, st)
	}
	return out
}

func (f *faultFramework) last(taskID string) api.TaskStatus {
	h := f.history(taskID)
	if len(h) == 0 {
		return api.TaskStatus{}
	}
	return h[len(h)-1]
}

func (f *faultFramework) states(taskID string) []string {
	var out []string
	for _, st := range f.history(taskID) {
		out = append(out, st.State)
	}
	return out
}

// BenchmarkAgentdRestartReconcile measures, for a kill -9 at a random
// point of a 16-task LAUNCH, the time from agentd's restart to every task
// reconciled between the framework, the agent and the host.
func BenchmarkAgentdRestartReconcile(b *testing.B) {
	b.Run(fmt.Sprintf("tasks=%d", faultTasks), benchRestartReconcile)
}

func benchRestartReconcile(b *testing.B) {
	c := testcluster.Start(b, 1, fastMaster)
	if _, err := c.WaitLeader(context.Background()); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	agent := startAgent(b, c.Addresses(), "fault-bench", "cpus:16;mem:65536;disk:1024")
	f := startFaultFramework(b, ctx, c.Addresses(), "fault-bench")
	starts := b.TempDir()
	var total time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		total += killMidLaunch(b, ctx, agent, f, starts, uint64(100+i)).reconcile
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/reconcile")
}
