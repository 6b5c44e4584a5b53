package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

var fastMaster = testcluster.WithArgs("-allocation-interval", "100ms", "-agent-ping-timeout", "3s",
	"-heartbeat-interval", "1s", "-offer-timeout", "10s", "-recovery-agent-ratio", "1", "-recovery-timeout", "5m")

// An agentd killed with SIGKILL while it runs three tasks, one of which ends
// while it is down, comes back with the same agent id: it keeps the two,
// reports the third with its real exit status, and when all have ended no
// cgroup, task or monitor process is left.
func TestAgentdRestartKeepsTasks(t *testing.T) {
	c := testcluster.Start(t, 1, fastMaster)
	if _, err := c.WaitLeader(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	agent := startAgent(t, c.Addresses(), "restart-node", "cpus:2;mem:512;disk:1024")
	f := startQueueFramework(t, ctx, c.Addresses(), "restart")

	gate := filepath.Join(t.TempDir(), "go")
	res := api.Resources{"cpus": 0.1, "mem": 32}
	f.add(ctx,
		sleepTask("keep-1", "sleep 3600", res, nil),
		sleepTask("keep-2", "sleep 3600", res, api.Limits{"mem": {Value: 64}, "cpus": {Value: 0.5}}),
		sleepTask("ends", fmt.Sprintf("while [ ! -e %s ]; do sleep 0.05; done; exit 7", gate), res, nil))
	for _, id := range []string{"keep-1", "keep-2", "ends"} {
		f.waitState(ctx, id, api.TaskRunning, 30*time.Second)
	}
	before := containersByTask(t, agent)
	agentID := f.last("ends").AgentID
	if n := len(monitorProcesses(agent.workDir)); n != 3 {
		t.Fatalf("%d monitor processes for 3 tasks", n)
	}
	// The local API shows each task's requests and limits beside what its
	// cgroup says.
	k2 := before["keep-2"]
	if k2.Requests["mem"] != 32 || k2.Limits["mem"].Value != 64 || k2.Limits["cpus"].Value != 0.5 || k2.OOMScoreAdj != 938 ||
		!strings.HasPrefix(k2.Cgroup, "/"+agent.root+"/") || len(k2.Pids) == 0 || k2.Usage.Mem <= 0 || k2.FrameworkID == "" {
		t.Fatalf("GET /v1/containers shows keep-2 as %+v", k2)
	}

	agent.kill9()
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the gated task to exit while agentd is down", 30*time.Second, func() error {
		for _, pid := range before["ends"].Pids {
			if processAlive(pid) {
				return fmt.Errorf("pid %d still runs", pid)
			}
		}
		return nil
	})
	agent.start()

	st := f.waitState(ctx, "ends", api.TaskFailed, 30*time.Second)
	if !strings.Contains(st.Message, "code 7") || st.AgentID != agentID {
		t.Fatalf("the task that ended while agentd was down: %+v, want exit code 7 on agent %s", st, agentID)
	}
	f.mu.Lock()
	first := f.firstEnd["ends"]
	f.mu.Unlock()
	if !strings.Contains(first.Message, "code 7") {
		t.Fatalf("the framework first heard of the end as %+v, without its exit code", first)
	}
	after := containersByTask(t, agent)
	for _, id := range []string{"keep-1", "keep-2"} {
		if f.last(id).State != api.TaskRunning {
			t.Fatalf("%s: %v after the restart", id, f.states(id))
		}
		if after[id].ContainerID != before[id].ContainerID || fmt.Sprint(after[id].Pids) != fmt.Sprint(before[id].Pids) {
			t.Fatalf("%s: container %+v after the restart, was %+v", id, after[id], before[id])
		}
	}
	if got := agent.logLines("agentd: registered:"); len(got) == 0 || !strings.Contains(got[len(got)-1], agentID) {
		t.Fatalf("agentd did not re-register as %s: %v", agentID, got)
	}

	for _, id := range []string{"keep-1", "keep-2"} {
		f.kill(ctx, id)
		f.waitState(ctx, id, api.TaskKilled, 30*time.Second)
	}
	eventually(t, "no container left", 30*time.Second, func() error {
		list, err := agent.containers()
		if err != nil || len(list) > 0 {
			return fmt.Errorf("containers %v, %v", list, err)
		}
		return nil
	})
	for id, ct := range before {
		for _, pid := range ct.Pids {
			if processAlive(pid) {
				t.Errorf("task %s: pid %d still runs", id, pid)
			}
		}
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/memory", ct.Cgroup)); !os.IsNotExist(err) {
			t.Errorf("task %s: cgroup %s still exists (%v)", id, ct.Cgroup, err)
		}
	}
	if monitors := monitorProcesses(agent.workDir); len(monitors) > 0 {
		t.Errorf("monitor processes left: %v", monitors)
	}
}

// Three masterd servers, two agentd: the leader is killed while tasks run;
// the agents re-register with their tasks, nothing is launched twice, and
// every update reaches the framework.
func TestAgentdLeaderFailover(t *testing.T) {
	c := testcluster.Start(t, 3, fastMaster)
	first, err := c.WaitLeader(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	agents := []*agentProcess{
		startAgent(t, c.Addresses(), "failover-a", "cpus:1;mem:256;disk:512"),
		startAgent(t, c.Addresses(), "failover-b", "cpus:1;mem:256;disk:512"),
	}
	f := startQueueFramework(t, ctx, c.Addresses(), "failover")
	res := api.Resources{"cpus": 0.25, "mem": 32}
	var ids []string
	for i := range 6 {
		id := fmt.Sprintf("before-%d", i)
		ids = append(ids, id)
		f.add(ctx, sleepTask(id, "sleep 3600", res, api.Limits{"mem": {Value: 48}, "cpus": {Infinite: true}}))
	}
	for _, id := range ids {
		f.waitState(ctx, id, api.TaskRunning, 60*time.Second)
	}
	before := map[string]api.Container{}
	for _, a := range agents {
		for id, ct := range containersByTask(t, a) {
			before[id] = ct
		}
	}
	if len(before) != len(ids) {
		t.Fatalf("%d containers on the agents, want %d", len(before), len(ids))
	}

	if err := c.Kill(first); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	// Both agents re-register with their tasks; the framework sees them run.
	for _, a := range agents {
		a := a
		eventually(t, "agent re-registered", 60*time.Second, func() error {
			if n := len(a.logLines("agentd: registered:")); n < 2 {
				return fmt.Errorf("%d registrations", n)
			}
			return nil
		})
	}
	for i := range 2 {
		id := fmt.Sprintf("after-%d", i)
		ids = append(ids, id)
		f.add(ctx, sleepTask(id, "sleep 3600", res, nil))
	}
	for _, id := range ids {
		f.waitState(ctx, id, api.TaskRunning, 60*time.Second)
	}
	for _, id := range ids {
		f.kill(ctx, id)
	}
	for _, id := range ids {
		f.waitState(ctx, id, api.TaskKilled, 60*time.Second)
	}

	for _, id := range ids {
		if got := f.states(id); strings.Join(got, ",") != "TASK_RUNNING,TASK_KILLED" {
			t.Errorf("task %s: updates %v, want TASK_RUNNING then TASK_KILLED, each once", id, got)
		}
		f.mu.Lock()
		launches := f.launches[id]
		f.mu.Unlock()
		if launches != 1 {
			t.Errorf("task %s was launched %d times", id, launches)
		}
	}
	started := 0
	for _, a := range agents {
		started += len(a.logLines(`state=TASK_RUNNING`))
	}
	if started != len(ids) {
		t.Errorf("the agents started %d tasks, want %d", started, len(ids))
	}
	for id, ct := range before {
		for _, pid := range ct.Pids {
			if processAlive(pid) {
				t.Errorf("task %s: pid %d still runs", id, pid)
			}
		}
	}
}

// containersByTask maps task ids to the agent's containers.
func containersByTask(t testing.TB, a *agentProcess) map[string]api.Container {
	t.Helper()
	list, err := a.containers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]api.Container{}
	for _, c := range list {
		out[c.TaskID] = c
	}
	return out
}

// monitorProcesses lists the live monitor processes of the containers in
// workDir: agentd's binary run as "monitor", working in a container's
// records directory (a spare monitor, not yet given a container, is not
// one of them).
func monitorProcesses(workDir string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !processAlive(pid) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if args := strings.Split(string(cmdline), "\x00"); err == nil && len(args) > 1 && args[1] == "monitor" &&
			strings.HasPrefix(cwd, filepath.Join(workDir, "containers")+"/") {
			out = append(out, pid)
		}
	}
	return out
}
