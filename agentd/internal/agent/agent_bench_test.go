package agent

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

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
