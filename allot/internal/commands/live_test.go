package commands

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/allot/allot/allot/internal/output"
	"github.com/allot/allot/masterd/agentsim"
	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// liveCluster is a cluster with one simulated agent (the real agent
// protocol, tasks in memory) and two frameworks of one role each, which
// launched a task each: web-1 (role web) with limits, mem "Infinity";
// batch-1 (role batch) without.
type liveCluster struct {
	*testcluster.Cluster
	agent      *agentsim.Agent
	frameworks map[string]string // name → id
}

func startLive(t *testing.T) *liveCluster {
	t.Helper()
	c := startCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	agent, err := agentsim.New(c.Addresses(), "", api.AgentInfo{Name: "live-node", Hostname: "live-node.test",
		Resources: api.Resources{"cpus": 4, "mem": 4096}, Capabilities: []string{api.CapabilityTaskResourceLimits}}, agentsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The agent and the frameworks live until the test ends.
	life, end := context.WithCancel(context.Background())
	t.Cleanup(end)
	if err := agent.Start(life); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.Stop)
	if err := agent.Client().WaitRegistered(ctx, 1); err != nil {
		t.Fatal(err)
	}

	lc := &liveCluster{Cluster: c, agent: agent, frameworks: map[string]string{}}
	lc.frameworks["live-web"] = launchOne(ctx, life, t, c, "live-web", "web", api.TaskInfo{TaskID: "web-1", Name: "web",
		Resources: api.Resources{"cpus": 1, "mem": 256}, Limits: api.Limits{"cpus": {Value: 2}, "mem": {Infinite: true}},
		Command: &api.CommandInfo{Value: "serve"}})
	lc.frameworks["live-batch"] = launchOne(ctx, life, t, c, "live-batch", "batch", api.TaskInfo{TaskID: "batch-1", Name: "batch",
		Resources: api.Resources{"cpus": 0.5, "mem": 128}, Command: &api.CommandInfo{Value: "crunch"}})
	for _, id := range []string{"web-1", "batch-1"} {
		if err := agent.WaitState(ctx, id, api.TaskRunning); err != nil {
			t.Fatalf("task %s: %v", id, err)
		}
	}
	// The leader's task list says RUNNING once the updates got there.
	cl := client(t, c)
	for {
		running, err := cl.TasksWhere(ctx, api.TaskFilter{States: []string{api.TaskRunning}})
		if err != nil {
			t.Fatal(err)
		}
		if len(running) == 2 {
			return lc
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the leader lists %d running tasks, want 2", len(running))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// launchOne subscribes a framework of one role, launches task on its first
// offer, declines the rest and acknowledges every update until life ends.
// It returns the framework's id.
func launchOne(ctx, life context.Context, t *testing.T, c *testcluster.Cluster, name, role string, task api.TaskInfo) string {
	t.Helper()
	sched, err := api.NewSchedulerClient(c.Addresses(), "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := sched.Subscribe(life, api.FrameworkInfo{Name: name, Principal: name, Roles: []string{role}, FailoverTimeoutSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			s.Close()
		}
	}()
	var offer api.Offer
	for offer.ID == "" {
		select {
		case ev := <-s.Events():
			if ev.Type == api.EventOffers {
				offer = ev.Offers.Offers[0]
			}
		case <-ctx.Done():
			t.Fatalf("%s: waiting for an offer: %v", name, ctx.Err())
		}
	}
	task.AgentID = offer.AgentID
	if err := s.Accept(ctx, []string{offer.ID}, []api.Operation{{Type: api.OperationLaunch, Launch: &api.Launch{Tasks: []api.TaskInfo{task}}}}, nil); err != nil {
		t.Fatalf("%s: accept: %v", name, err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		refuse := 3600.0
		for ev := range s.Events() {
			switch ev.Type {
			case api.EventUpdate:
				_ = s.AcknowledgeStatus(life, ev.Update.Status)
			case api.EventOffers:
				for _, o := range ev.Offers.Offers {
					_ = s.Decline(life, []string{o.ID}, &api.Filters{RefuseSeconds: &refuse})
				}
			}
		}
	}()
	// Close ends the events, then the goroutine.
	t.Cleanup(func() { s.Close(); wg.Wait() })
	return s.FrameworkID()
}

// Agents, frameworks and tasks through the tool, -json checked against the
// API; the task table shows requests and limits side by side, "Infinity"
// as ∞; the filters narrow as the API's do.
func TestLiveStateCommands(t *testing.T) {
	c := startLive(t)
	e := clusterEnv(c.Cluster)
	cl := client(t, c.Cluster)
	ctx := context.Background()
	agentID := c.agent.AgentID()

	var tasks api.TaskList
	decode(t, &tasks, e, "task", "list", "-json")
	want, err := cl.Tasks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tasks.Tasks, want) || len(want) != 2 {
		t.Fatalf("task list -json = %+v, the API has %+v", tasks.Tasks, want)
	}
	table := ok(t, e, "task", "list").stdout
	if !rowHas(table, "web-1", "web", "TASK_RUNNING", "-", "web", agentID, "cpus:1 mem:256", "cpus:2 mem:"+output.Infinity, "no") ||
		!rowHas(table, "batch-1", "batch", "TASK_RUNNING", "-", "batch", agentID, "cpus:0.5 mem:128", "-", "no") {
		t.Errorf("task list:\n%s", table)
	}
	for _, f := range []struct {
		args []string
		want []string
	}{
		{[]string{"-role", "web"}, []string{"web-1"}},
		{[]string{"-role", "batch", "-state", "running"}, []string{"batch-1"}},
		{[]string{"-state", "TASK_FINISHED,TASK_FAILED"}, nil},
		{[]string{"-agent", agentID}, []string{"batch-1", "web-1"}},
		{[]string{"-agent", "agent-nosuch"}, nil},
	} {
		var got api.TaskList
		decode(t, &got, e, append([]string{"task", "list", "-json"}, f.args...)...)
		var ids []string
		for _, task := range got.Tasks {
			ids = append(ids, task.TaskID)
		}
		slices.Sort(ids)
		if !slices.Equal(ids, f.want) {
			t.Errorf("task list %v = %v, want %v", f.args, ids, f.want)
		}
	}

	var frameworks api.FrameworkList
	decode(t, &frameworks, e, "framework", "list", "-json")
	wantFrameworks, err := cl.Frameworks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(frameworks.Frameworks, wantFrameworks) || len(wantFrameworks) != 2 {
		t.Errorf("framework list -json = %+v, the API has %+v", frameworks.Frameworks, wantFrameworks)
	}
	if table := ok(t, e, "framework", "list").stdout; !rowHas(table, c.frameworks["live-web"], "live-web", "live-web", "web", "yes", "cpus:1 mem:256") ||
		!rowHas(table, c.frameworks["live-batch"], "live-batch", "live-batch", "batch", "yes", "cpus:0.5 mem:128") {
		t.Errorf("framework list:\n%s", table)
	}

	var agents api.AgentList
	decode(t, &agents, e, "agent", "list", "-json")
	wantAgents, err := cl.Agents(ctx, api.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(agents.Agents, wantAgents) {
		t.Errorf("agent list -json = %+v, the API has %+v", agents.Agents, wantAgents)
	}
	if table := ok(t, e, "agent", "list").stdout; !rowHas(table, agentID, "live-node", "live-node.test", "yes", "cpus:4 mem:4096", "cpus:1.5 mem:384") {
		t.Errorf("agent list:\n%s", table)
	}
	// By id, and by name.
	for _, key := range []string{agentID, "live-node"} {
		var got api.Agent
		decode(t, &got, e, "agent", "get", key, "-json")
		if !reflect.DeepEqual(got, wantAgents[0]) {
			t.Errorf("agent get %s -json = %+v, the API has %+v", key, got, wantAgents[0])
		}
	}
	fails(t, ExitNotFound, e, "agent", "get", "nosuch")

	// status: the cluster as GET /v1/cluster has it, and the counts.
	var st Status
	decode(t, &st, e, "status", "-json")
	cluster, err := cl.Cluster(ctx, api.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Agents != (AgentCounts{Connected: 1, Total: 1}) || st.Frameworks == nil || *st.Frameworks != 2 ||
		!reflect.DeepEqual(st.Tasks, map[string]int{api.TaskRunning: 2}) ||
		!reflect.DeepEqual(st.Cluster.Total, cluster.Total) || !reflect.DeepEqual(st.Cluster.Allocated, api.Resources{"cpus": 1.5, "mem": 384}) ||
		st.Cluster.Leader == nil || st.Cluster.Leader.ID != c.ID(0) || len(st.Cluster.Servers) != 1 {
		t.Errorf("status -json = %+v (cluster %+v), the API has %+v", st, st.Cluster, cluster)
	}
	text := ok(t, e, "status").stdout
	for _, row := range [][]string{
		{"Leader", c.ID(0) + " (" + c.Address(0) + ")"},
		{"Recovery", "no (offers flow)"},
		{"Agents", "1 connected, 1 admitted"},
		{"Frameworks", "2"},
		{"Tasks", "2 TASK_RUNNING"},
		{c.ID(0), c.Address(0), c.RaftAddress(0), "voter", "yes"},
		{"cpus", "4", "1.5"},
		{"mem", "4096", "384"},
	} {
		if !rowHas(text, row...) {
			t.Errorf("status lacks the row %q:\n%s", row, text)
		}
	}
	if !strings.Contains(text, "REVOCABLE ALLOCATED") {
		t.Errorf("status shows no revocable totals:\n%s", text)
	}
}
