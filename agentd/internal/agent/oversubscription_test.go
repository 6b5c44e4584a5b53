package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/agentd/internal/cgroups"
	"github.com/allot/allot/agentd/internal/estimator"
	"github.com/allot/allot/agentd/internal/qos"
	"github.com/allot/allot/masterd/agentsim/fakemaster"
	"github.com/allot/allot/masterd/api"
)

func oversubscribedCalls(m *fakemaster.Master, streamID string) []api.Resources {
	var out []api.Resources
	for _, c := range m.Calls(func(c fakemaster.Call) bool {
		return c.StreamID == streamID && c.Agent != nil && c.Agent.Type == api.AgentCallUpdateOversubscribed
	}) {
		out = append(out, c.Agent.UpdateOversubscribed.Resources)
	}
	return out
}

// The fixed estimate reaches the master once per session: not again while
// it does not change, and again after a new registration.
func TestFixedEstimateReported(t *testing.T) {
	master, root := testEnv(t, fakemaster.Options{AutoAcknowledge: true, HeartbeatIntervalSeconds: 3600})
	a := newTestAgentWith(t, master, t.TempDir(), root, api.Resources{"cpus": 2, "mem": 1024}, func(c *Config) {
		c.Estimator = estimator.Config{Kind: estimator.KindFixed, Fixed: api.Resources{"cpus": 1}}
		c.OversubscribedInterval = 20 * time.Millisecond
	})
	defer a.stop()
	first := a.stream(1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.client.WaitOversubscribed(ctx, api.Resources{"cpus": 1}); err != nil {
		t.Fatal(err)
	}
	base := a.stats.estimates.Load()
	waitFor(t, "five more estimates", func() bool { return a.stats.estimates.Load() >= base+5 })
	if got := oversubscribedCalls(master, first.ID); len(got) != 1 || got[0].String() != "cpus:1" {
		t.Fatalf("UPDATE_OVERSUBSCRIBED calls %v, want one of cpus:1", got)
	}
	master.Cut(first.ID)
	second := a.stream(2)
	waitFor(t, "the estimate sent in the new session", func() bool { return len(oversubscribedCalls(master, second.ID)) == 1 })
}

// With the noop estimator the agent says nothing about slack: no
// UPDATE_OVERSUBSCRIBED, not even an empty one, after registering.
func TestNoopEstimateNotReported(t *testing.T) {
	master, root := testEnv(t, fakemaster.Options{AutoAcknowledge: true})
	a := newTestAgentWith(t, master, t.TempDir(), root, api.Resources{"cpus": 2, "mem": 1024}, func(c *Config) {
		c.OversubscribedInterval = 20 * time.Millisecond
	})
	defer a.stop()
	s := a.stream(1)
	// A task's RUNNING reaches the master after the registration: an
	// estimate sent at registration would be there by then.
	a.running(s, regular, newTaskInfo("task", "sleep 3600", api.Resources{"cpus": 1, "mem": 32}, nil))
	if got := oversubscribedCalls(master, s.ID); len(got) != 0 {
		t.Fatalf("UPDATE_OVERSUBSCRIBED calls %v with the noop estimator, want none", got)
	}
	if n := a.stats.estimates.Load(); n != 0 {
		t.Errorf("%d estimates made with the noop estimator, want none", n)
	}
}

// The usage estimator lends what the agent's regular tasks were allocated
// and do not use, from their cgroups: an idle 1-cpu task leaves about 0.9
// (10% margin); revocable tasks lend nothing; a busy task takes its slack
// back.
func TestUsageEstimateFollowsTheTasks(t *testing.T) {
	master, root := testEnv(t, fakemaster.Options{AutoAcknowledge: true})
	a := newTestAgentWith(t, master, t.TempDir(), root, api.Resources{"cpus": 2, "mem": 1024}, func(c *Config) {
		c.Estimator = estimator.Config{Kind: estimator.KindUsage, Margin: 0.1}
		c.OversubscribedInterval = 50 * time.Millisecond
	})
	defer a.stop()
	s := a.stream(1)
	estimate := func() float64 {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.slack["cpus"]
	}
	a.running(s, regular, newTaskInfo("idle", "sleep 3600", api.Resources{"cpus": 1, "mem": 32}, nil))
	a.running(s, borrowed, newTaskInfo("borrower", "sleep 3600", api.Resources{"cpus": 0.5, "mem": 32}, nil))
	waitFor(t, "an estimate of the idle task's slack", func() bool { e := estimate(); return e >= 0.8 && e <= 0.9 })
	if e := estimate(); e > 0.9 {
		t.Fatalf("estimate %v: the borrower's allocation was lent too", e)
	}
	a.send(s, api.AgentEvent{Type: api.AgentEventKill, Kill: &api.AgentKill{FrameworkID: "fw", TaskID: "idle"}})
	a.lastUpdate("idle", api.TaskKilled)
	a.running(s, regular, newTaskInfo("busy", "while :; do :; done", api.Resources{"cpus": 1, "mem": 32}, api.Limits{"cpus": {Value: 1}}))
	waitFor(t, "the busy task to take its slack back", func() bool { return estimate() < 0.8 })
}

// fakeProc is a /proc with a loadavg the test writes.
func fakeProc(t *testing.T, load5 float64) (dir string, set func(float64)) {
	dir = t.TempDir()
	set = func(l float64) {
		data := fmt.Sprintf("%.2f %.2f %.2f 1/100 4242\n", l, l, l)
		if err := os.WriteFile(filepath.Join(dir, "loadavg.tmp"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "loadavg.tmp"), filepath.Join(dir, "loadavg")); err != nil {
			t.Fatal(err)
		}
	}
	set(load5)
	return dir, set
}

// The load controller's corrections are carried out: revocable tasks that
// use cpu are killed as preempted with the controller's reading in the
// message, regular tasks never; once the load is back under its threshold
// nothing more is killed.
func TestQoSLoadCorrectionsKillRevocableTasks(t *testing.T) {
	master, root := testEnv(t, fakemaster.Options{AutoAcknowledge: true})
	proc, setLoad := fakeProc(t, 0.5)
	a := newTestAgentWith(t, master, t.TempDir(), root, api.Resources{"cpus": 2, "mem": 1024}, func(c *Config) {
		c.QoS = qos.Config{Kind: qos.KindLoad, Load5: 1, ProcDir: proc}
		c.QoSInterval = 50 * time.Millisecond
	})
	defer a.stop()
	s := a.stream(1)
	busy := func(id string, where placement) {
		a.running(s, where, newTaskInfo(id, "while :; do :; done", api.Resources{"cpus": 0.1, "mem": 32}, api.Limits{"cpus": {Value: 0.1}}))
	}
	busy("regular", regular)
	busy("on-slack", slack)
	busy("borrower", borrowed)
	base := a.stats.qosRounds.Load()
	waitFor(t, "QoS rounds under the threshold", func() bool { return a.stats.qosRounds.Load() >= base+5 })
	if n := a.stats.preempted.Load(); n != 0 {
		t.Fatalf("%d tasks killed under the threshold", n)
	}

	// 8 over a threshold of 1: more than every revocable task frees; both go.
	setLoad(8)
	for _, id := range []string{"on-slack", "borrower"} {
		st := a.lastUpdate(id, api.TaskKilled, api.TaskFailed)
		if st.State != api.TaskKilled || st.Reason != api.ReasonContainerPreempted || !strings.Contains(st.Message, "qos load: 5-minute load") {
			t.Errorf("%s: %+v, want TASK_KILLED, REASON_CONTAINER_PREEMPTED by the load controller", id, st)
		}
	}
	setLoad(0.5)
	busy("later", slack)
	base = a.stats.qosRounds.Load()
	waitFor(t, "QoS rounds after the load ended", func() bool { return a.stats.qosRounds.Load() >= base+5 })
	for _, id := range []string{"regular", "later"} {
		if got := a.states(id); len(got) != 1 || got[0] != api.TaskRunning {
			t.Errorf("%s: %v, want it left running", id, got)
		}
	}
}

// A task growing far past its memory request in a nearly full node is
// killed by the pressure controller as soon as the root cgroup's memory
// crosses its fraction (the containerizer's threshold event, or the
// agent's own check every 100 ms, not -qos-interval), before the kernel's
// OOM killer has to act; the well-behaved task stays.
func TestMemoryHogEvictedBeforeTheOOMKiller(t *testing.T) {
	master, root := testEnv(t, fakemaster.Options{AutoAcknowledge: true})
	a := newTestAgentWith(t, master, t.TempDir(), root, api.Resources{"cpus": 2, "mem": 256}, func(c *Config) {
		// Only the root cgroup's memory fraction: the machine's own PSI
		// must not decide this test.
		c.QoS = qos.Config{Kind: qos.KindPressure, MemoryFraction: 0.5}
		c.QoSInterval = time.Hour
	})
	defer a.stop()
	s := a.stream(1)
	a.running(s, regular, newTaskInfo("calm", "sleep 3600", api.Resources{"cpus": 0.1, "mem": 64}, nil))
	// 4 MiB every 20 ms, kept by tail (no newline ever ends its line): past
	// 128 MiB in about 0.6 s, at the node's 256 MiB about 0.6 s later.
	hog := newTaskInfo("hog", "(while :; do head -c 4194304 /dev/zero; sleep 0.02; done) | tail", api.Resources{"cpus": 0.1, "mem": 32}, api.Limits{"mem": {Infinite: true}})
	a.running(s, regular, hog)
	st := a.lastUpdate("hog", api.TaskKilled, api.TaskFailed)
	if st.State != api.TaskKilled || st.Reason != api.ReasonContainerPreempted || !strings.Contains(st.Message, "qos pressure") {
		t.Fatalf("hog: %+v, want TASK_KILLED, REASON_CONTAINER_PREEMPTED by the pressure controller", st)
	}
	if n := a.stats.qosRounds.Load(); n == 0 {
		t.Fatal("no QoS round ran: the kill came from elsewhere")
	}
	if cgroups.DetectMode() == cgroups.V1 { // v2 roots are tested on a fake hierarchy only
		if got := readCgroupFile(t, "/"+root, "memory/memory.oom_control"); !strings.Contains(got, "oom_kill 0") {
			t.Errorf("the root cgroup's OOM killer acted:\n%s", got)
		}
	}
	if got := a.states("calm"); len(got) != 1 || got[0] != api.TaskRunning {
		t.Errorf("calm: %v, want it left running", got)
	}
}

// Page cache is no reason to kill: under node memory pressure a regular
// task within its request that wrote a large file (its cgroup is charged
// with the cache, which the kernel drops at will) is not taken for a task
// far above its request; the hog whose own memory pushed the node's working
// set over the line is.
func TestMemoryPressureJudgesTasksByTheirWorkingSet(t *testing.T) {
	master, root := testEnv(t, fakemaster.Options{AutoAcknowledge: true})
	a := newTestAgentWith(t, master, t.TempDir(), root, api.Resources{"cpus": 2, "mem": 512}, func(c *Config) {
		c.QoS = qos.Config{Kind: qos.KindPressure, MemoryFraction: 0.25}
		c.QoSInterval = time.Hour
	})
	defer a.stop()
	s := a.stream(1)
	written := filepath.Join(t.TempDir(), "written")
	// 256 MiB of page cache beside a few MiB of its own: by usage it is
	// further above its request than the hog will be at 128 MiB.
	a.running(s, regular, newTaskInfo("cached",
		fmt.Sprintf(`head -c 268435456 /dev/zero > "$ALLOT_SANDBOX_DIRECTORY/data" && touch %s && exec sleep 3600`, written),
		api.Resources{"cpus": 0.1, "mem": 32}, api.Limits{"mem": {Infinite: true}}))
	// Bounded only to catch a task that never writes it: a node busy
	// with other tests' load may take its time.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(written); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cached did not write its file in 2 minutes: %v", a.updates("cached"))
		}
	}
	a.running(s, regular, newTaskInfo("hog", "(while :; do head -c 4194304 /dev/zero; sleep 0.02; done) | tail",
		api.Resources{"cpus": 0.1, "mem": 32}, api.Limits{"mem": {Infinite: true}}))
	st := a.lastUpdate("hog", api.TaskKilled, api.TaskFailed)
	if st.State != api.TaskKilled || st.Reason != api.ReasonContainerPreempted {
		t.Fatalf("hog: %+v, want TASK_KILLED, REASON_CONTAINER_PREEMPTED by the pressure controller", st)
	}
	if got := a.states("cached"); len(got) != 1 || got[0] != api.TaskRunning {
		t.Errorf("cached: %v, want it left running (its page cache is not its memory)", a.updates("cached"))
	}
}
