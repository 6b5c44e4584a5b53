package agent

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/allot/allot/agentd/internal/qos"
	"github.com/allot/allot/masterd/agentsim/fakemaster"
	"github.com/allot/allot/masterd/api"
)

// BenchmarkAgentLaunch times a LAUNCH event, sent by a master, to the
// agent's TASK_RUNNING update reaching that master: checkpoint, cgroup,
// monitor, the process running in its cgroup, and the update's HTTP call.
// Tasks stay running until the benchmark ends (-benchtime 200x launches 200).
func BenchmarkAgentLaunch(b *testing.B) {
	master := fakemaster.New(fakemaster.Options{AutoAcknowledge: true})
	defer master.Close()
	root := fmt.Sprintf("allot-agent-bench-%d", time.Now().UnixNano())
	cleanupRoot(b, root)
	ta := newTestAgent(b, master, b.TempDir(), root)
	defer ta.stop()
	s := ta.stream(1)
	res := api.Resources{"cpus": 0.001, "mem": 4}
	latencies := make([]time.Duration, 0, b.N)
	var launchMu sync.Mutex
	launches := make([]time.Duration, 0, b.N)
	onLaunch := func(d time.Duration) {
		launchMu.Lock()
		defer launchMu.Unlock()
		launches = append(launches, d)
	}
	ta.stats.onLaunch.Store(&onLaunch)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("bench-%d", i)
		begin := time.Now()
		if err := master.Send(s.ID, launchEvent("fw", newTaskInfo(id, "sleep 3600", res, nil))); err != nil {
			b.Fatal(err)
		}
		if st := ta.lastUpdate(id, api.TaskRunning, api.TaskFailed, api.TaskError); st.State != api.TaskRunning {
			b.Fatalf("%s: %+v", id, st)
		}
		latencies = append(latencies, time.Since(begin))
	}
	b.StopTimer()
	launchMu.Lock()
	reportPercentiles(b, launches, "")
	launchMu.Unlock()
	reportPercentiles(b, latencies, "update-")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range b.N {
		_ = master.Send(s.ID, api.AgentEvent{Type: api.AgentEventKill, Kill: &api.AgentKill{FrameworkID: "fw", TaskID: fmt.Sprintf("bench-%d", i)}})
	}
	_, _ = master.WaitCalls(ctx, b.N, func(c fakemaster.Call) bool {
		return c.Agent != nil && c.Agent.Update != nil && c.Agent.Update.Status.State == api.TaskKilled
	})
}

// reportPercentiles reports the p50 and p99 of durations in milliseconds.
func reportPercentiles(b *testing.B, durations []time.Duration, prefix string) {
	slices.Sort(durations)
	b.ReportMetric(float64(durations[len(durations)/2].Microseconds())/1000, prefix+"p50-ms")
	b.ReportMetric(float64(durations[len(durations)*99/100].Microseconds())/1000, prefix+"p99-ms")
}

// BenchmarkLenderLaunch times a lender's LAUNCH on its lent-out
// reservation to its TASK_RUNNING update reaching the master, on real
// cgroups: with evict=1 the node is full of borrowers and one of them is
// evicted first (SIGTERM, its end recorded and reported), with evict=0 the
// lender's task fits at once (the same path without eviction). Each
// iteration fills the node again, untimed.
func BenchmarkLenderLaunch(b *testing.B) {
	for _, evict := range []int{0, 1} {
		b.Run(fmt.Sprintf("borrowers=4/evict=%d", evict), func(b *testing.B) {
			master := fakemaster.New(fakemaster.Options{AutoAcknowledge: true})
			defer master.Close()
			root := fmt.Sprintf("allot-agent-bench-%d", time.Now().UnixNano())
			cleanupRoot(b, root)
			// 4 borrowers of 0.5 cpus fill 2 of the node's cpus; the lender
			// asks 0.5: without room left, one borrower must go.
			total := api.Resources{"cpus": 2.5 - 0.5*float64(evict), "mem": 1024}
			ta := newTestAgentWith(b, master, b.TempDir(), root, total)
			defer ta.stop()
			s := ta.stream(1)
			latencies := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				var ids []string
				for j := range 4 {
					id := fmt.Sprintf("b%d-borrower-%d", i, j)
					ta.running(s, borrowed, newTaskInfo(id, "sleep 3600", api.Resources{"cpus": 0.5, "mem": 64}, nil))
					ids = append(ids, id)
				}
				lenderID := fmt.Sprintf("b%d-db", i)
				b.StartTimer()
				begin := time.Now()
				ta.send(s, placedLaunch("fw-db", lender, newTaskInfo(lenderID, "sleep 3600", api.Resources{"cpus": 0.5, "mem": 64}, nil)))
				if st := ta.lastUpdate(lenderID, api.TaskRunning, api.TaskFailed, api.TaskDropped); st.State != api.TaskRunning {
					b.Fatalf("%s: %+v", lenderID, st)
				}
				latencies = append(latencies, time.Since(begin))
				b.StopTimer()
				evicted := 0
				for _, id := range ids {
					if len(ta.states(id)) > 1 {
						evicted++
					}
				}
				if evicted != evict {
					b.Fatalf("%d borrowers evicted, want %d", evicted, evict)
				}
				ta.send(s, api.AgentEvent{Type: api.AgentEventKill, Kill: &api.AgentKill{FrameworkID: "fw-db", TaskID: lenderID}})
				for _, id := range ids {
					ta.send(s, api.AgentEvent{Type: api.AgentEventKill, Kill: &api.AgentKill{FrameworkID: "fw", TaskID: id}})
				}
				for {
					if len(ta.ctz.Containers()) == 0 {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
				b.StartTimer()
			}
			b.StopTimer()
			reportPercentiles(b, latencies, "")
		})
	}
}

// BenchmarkMemoryPressureEviction times memory pressure onset → first
// eviction, on real cgroups with the pressure controller: a task grows past
// its request (4 MiB every 20 ms) in a 256 MiB node; onset is when the
// root cgroup's working set reaches half its limit
// (-qos-pressure-memory-fraction 0.5), as the benchmark sees it reading
// the root cgroup every millisecond (the kernel's threshold events are not
// a reliable clock: they miss a crossing now and then); "kill" is when the
// agent decides to kill the task, "update" when its TASK_KILLED reaches the
// master.
func BenchmarkMemoryPressureEviction(b *testing.B) {
	master := fakemaster.New(fakemaster.Options{AutoAcknowledge: true})
	defer master.Close()
	root := fmt.Sprintf("allot-agent-bench-%d", time.Now().UnixNano())
	cleanupRoot(b, root)
	ta := newTestAgentWith(b, master, b.TempDir(), root, api.Resources{"cpus": 2, "mem": 256}, func(c *Config) {
		c.QoS = qos.Config{Kind: qos.KindPressure, MemoryFraction: 0.5}
		c.QoSInterval = time.Hour // only the root cgroup's memory triggers a round
	})
	defer ta.stop()
	s := ta.stream(1)
	preempted := make(chan time.Time, 16)
	onPreempt := func(string) { preempted <- time.Now() }
	ta.stats.onPreempt.Store(&onPreempt)
	gateDir := b.TempDir()
	var kills, updates []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		gate := fmt.Sprintf("%s/gate-%d", gateDir, i)
		id := fmt.Sprintf("hog-%d", i)
		ta.running(s, regular, newTaskInfo(id, fmt.Sprintf("while [ ! -e %s ]; do sleep 0.01; done; (while :; do head -c 4194304 /dev/zero; sleep 0.02; done) | tail", gate),
			api.Resources{"cpus": 0.1, "mem": 32}, api.Limits{"mem": {Infinite: true}}))
		onset := make(chan time.Time, 1)
		stop := make(chan struct{})
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if used, limit, err := ta.ctz.RootMemory(); err == nil && used >= limit/2 {
					onset <- time.Now()
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
		b.StartTimer()
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			b.Fatal(err)
		}
		var killedAt time.Time
		select {
		case killedAt = <-preempted:
		case <-time.After(time.Minute):
			b.Fatalf("%s: not preempted (its updates: %v)", id, ta.states(id))
		}
		st := ta.lastUpdate(id, api.TaskKilled, api.TaskFailed)
		updatedAt := time.Now()
		b.StopTimer()
		close(stop)
		var began time.Time
		select {
		case began = <-onset:
		default:
			// Killed before the benchmark's reading saw the crossing:
			// within its millisecond.
			began = killedAt
		}
		if st.State != api.TaskKilled || st.Reason != api.ReasonContainerPreempted {
			b.Fatalf("%s: %+v", id, st)
		}
		kills = append(kills, killedAt.Sub(began))
		updates = append(updates, updatedAt.Sub(began))
		for len(ta.ctz.Containers()) > 0 {
			time.Sleep(5 * time.Millisecond)
		}
		b.StartTimer()
	}
	b.StopTimer()
	reportPercentiles(b, kills, "kill-")
	reportPercentiles(b, updates, "update-")
}
