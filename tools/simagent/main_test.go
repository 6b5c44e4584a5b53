package main

import (
	"bytes"
	"context"
	"io"
	"log"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/agentsim"
	"github.com/allot/allot/masterd/agentsim/fakemaster"
	"github.com/allot/allot/masterd/api"
)

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-master", "http://a:1, http://b:2", "-name", "node-7",
		"-resources", "cpus:2;mem:1024", "-capabilities", "TASK_RESOURCE_LIMITS, X"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := api.AgentInfo{Name: "node-7", Hostname: "node-7", Resources: api.Resources{"cpus": 2, "mem": 1024},
		Capabilities: []string{api.CapabilityTaskResourceLimits, "X"}}
	if !slices.Equal(cfg.addresses, []string{"http://a:1", "http://b:2"}) || cfg.info.Name != want.Name ||
		cfg.info.Hostname != want.Hostname || cfg.info.Resources.String() != want.Resources.String() ||
		!slices.Equal(cfg.info.Capabilities, want.Capabilities) {
		t.Fatalf("parseFlags = %+v, want addresses a and b and %+v", cfg, want)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-master", ","}, "no masterd URL"},
		{[]string{"-name", ""}, "-name must not be empty"},
		{[]string{"-resources", "cpus=2"}, `-resources "cpus=2"`},
		{[]string{"-resources", "cpus:-1"}, "must not be negative"},
		{[]string{"-resources", ""}, "needs some resources"},
		{[]string{"node-1"}, "unexpected arguments"},
		{[]string{"-oversubscribed", "cpus=1"}, `-oversubscribed "cpus=1"`},
		{[]string{"-oversubscribed", "gpus:1"}, "the agent has no gpus"},
		{[]string{"-resources", "cpus:2", "-oversubscribed", "cpus:3"}, "cpus 3 is more than the agent's 2"},
	} {
		_, err := parseFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseFlags(%q) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

// With -oversubscribed the agent reports its estimate after registering,
// and again after every later registration; without it, never.
func TestOversubscribedIsReportedAfterEveryRegistration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := fakemaster.New(fakemaster.Options{})
	defer m.Close()
	estimates := func(c fakemaster.Call) bool {
		return c.Agent != nil && c.Agent.Type == api.AgentCallUpdateOversubscribed
	}

	agent := startFromFlags(ctx, t, "-master", m.URL, "-name", "node-1", "-resources", "cpus:4;mem:1024",
		"-oversubscribed", "cpus:1.5;mem:256")
	defer agent.Stop()
	for n := 1; n <= 2; n++ {
		streams, err := m.WaitStreams(ctx, api.AgentProtocolPath, n)
		if err != nil {
			t.Fatal(err)
		}
		calls, err := m.WaitCalls(ctx, n, estimates)
		if err != nil {
			t.Fatal(err)
		}
		c := calls[n-1]
		if c.StreamID != streams[n-1].ID || c.Agent.UpdateOversubscribed.Resources.String() != "cpus:1.5;mem:256" {
			t.Fatalf("registration %d: UPDATE_OVERSUBSCRIBED %+v on stream %s, want cpus:1.5;mem:256 on %s",
				n, c.Agent.UpdateOversubscribed, c.StreamID, streams[n-1].ID)
		}
		m.Cut(streams[n-1].ID) // the session ends: the agent registers again
	}

	quiet := startFromFlags(ctx, t, "-master", m.URL, "-name", "node-2")
	defer quiet.Stop()
	if err := quiet.Client().WaitRegistered(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// A heartbeat comes after anything sent at registration.
	if _, err := m.WaitCalls(ctx, 1, func(c fakemaster.Call) bool {
		return c.Agent != nil && c.Agent.Type == api.AgentCallHeartbeat && c.Agent.AgentID == quiet.AgentID()
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range m.Calls(estimates) {
		if c.Agent.AgentID == quiet.AgentID() {
			t.Fatalf("an agent without -oversubscribed sent %+v", c.Agent)
		}
	}
}

// startFromFlags starts a simulated agent as simagent run with args does.
func startFromFlags(ctx context.Context, t *testing.T, args ...string) *agentsim.Agent {
	t.Helper()
	cfg, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	agent, err := start(ctx, cfg, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	return agent
}

// The task log names each launch and each end once, whether the task is
// still reported when it ended or was already settled.
func TestTaskLogLogsLaunchesAndEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := fakemaster.New(fakemaster.Options{})
	defer m.Close()
	agent, err := agentsim.New([]string{m.URL}, "", api.AgentInfo{Name: "node-1", Resources: api.Resources{"cpus": 4}}, agentsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer agent.Stop()
	streams, err := m.WaitStreams(ctx, api.AgentProtocolPath, 1)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	tasks := newTaskLog(agent, log.New(&out, "", 0))
	launch := func(id, command string) {
		t.Helper()
		err := m.Send(streams[0].ID, api.AgentEvent{Type: api.AgentEventLaunch, Launch: &api.AgentLaunch{FrameworkID: "fw-1",
			Tasks: []api.AgentTask{{FrameworkID: "fw-1", Role: "*", Task: api.TaskInfo{TaskID: id, Name: id,
				Resources: api.Resources{"cpus": 1}, Command: &api.CommandInfo{Value: command}}}}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		if err := agent.WaitUntil(ctx, cond); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// t1 runs until killed; its end is seen while it is still reported.
	launch("t1", "serve")
	wait("t1 running", func() bool { return agent.State("t1") == api.TaskRunning })
	tasks.logChanges()
	if err := m.Send(streams[0].ID, api.AgentEvent{Type: api.AgentEventKill, Kill: &api.AgentKill{FrameworkID: "fw-1", TaskID: "t1"}}); err != nil {
		t.Fatal(err)
	}
	wait("t1 killed", func() bool { return agent.State("t1") == api.TaskKilled })
	tasks.logChanges()
	tasks.logChanges() // nothing new

	// t2's end is acknowledged before the next look: the task has left the
	// report, and its end is read from the agent's record of settled tasks.
	launch("t2", "serve")
	wait("t2 running", func() bool { return agent.State("t2") == api.TaskRunning })
	tasks.logChanges()
	m.SetAutoAcknowledge(true)
	if err := m.Send(streams[0].ID, api.AgentEvent{Type: api.AgentEventKill, Kill: &api.AgentKill{FrameworkID: "fw-1", TaskID: "t2"}}); err != nil {
		t.Fatal(err)
	}
	wait("t2 settled", func() bool {
		return agent.State("t2") == api.TaskKilled && !slices.ContainsFunc(agent.Tasks(), func(t api.AgentTask) bool { return t.Task.TaskID == "t2" })
	})
	tasks.logChanges()

	want := []string{
		"launched task t1 of framework fw-1 (cpus:1): serve",
		"task t1 of framework fw-1 ended: TASK_KILLED",
		"launched task t2 of framework fw-1 (cpus:1): serve",
		"task t2 of framework fw-1 ended: TASK_KILLED",
	}
	if got := strings.Split(strings.TrimSpace(out.String()), "\n"); !slices.Equal(got, want) {
		t.Fatalf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
