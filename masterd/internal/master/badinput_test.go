package master

import (
	"context"
	"math"
	"reflect"
	"testing"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

// liveSnapshot is everything a refused call must leave as it was.
type liveSnapshot struct {
	Frameworks []api.Framework
	Offers     []api.Offer
	Tasks      []api.Task
	Agents     []raftstore.AgentRecord
	Registered []raftstore.FrameworkRecord
	Allocated  api.Resources
}

func snapshotLive(h *harness, agentID string) liveSnapshot {
	s := liveSnapshot{Frameworks: h.m().Frameworks(), Offers: h.m().Offers(), Tasks: h.m().Tasks(),
		Allocated: h.m().AgentUsage(agentID).Allocated}
	h.read(func(st *raftstore.State) {
		s.Agents = st.Agents()
		s.Registered = st.Frameworks()
	})
	return s
}

// TestBadInputChangesNothing: calls the master refuses get the error
// API.md names and leave the live and the replicated state as they were.
func TestBadInputChangesNothing(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("node-1", api.Resources{"cpus": 4, "mem": 4096})
	fw := h.subscribe(fwInfo("web", "*"))
	fw.launchRunning(ag, "t1", api.Resources{"cpus": 1, "mem": 256})
	o := fw.offerOn(ag.id)
	// The book is still: the whole agent is in use or in that offer, and
	// offers do not expire in this test.
	h.waitCycles(2)
	before := snapshotLive(h, ag.id)
	m := h.m()
	ctx := context.Background()
	sid := fw.stream.ID()
	neg := -1.0
	nan := math.NaN()

	calls := []struct {
		name     string
		call     api.Call
		streamID string
		code     string
	}{
		{"unknown framework", api.Call{FrameworkID: "fw-nope", Type: api.CallRevive}, sid, api.CodeNotFound},
		{"another stream", api.Call{FrameworkID: fw.id, Type: api.CallRevive}, "stream-nope", api.CodePermissionDenied},
		{"no stream", api.Call{FrameworkID: fw.id, Type: api.CallRevive}, "", api.CodeInvalidArgument},
		{"no framework id", api.Call{Type: api.CallRevive}, sid, api.CodeInvalidArgument},
		{"ACCEPT without body", api.Call{FrameworkID: fw.id, Type: api.CallAccept}, sid, api.CodeInvalidArgument},
		{"DECLINE without body", api.Call{FrameworkID: fw.id, Type: api.CallDecline}, sid, api.CodeInvalidArgument},
		{"KILL without body", api.Call{FrameworkID: fw.id, Type: api.CallKill}, sid, api.CodeInvalidArgument},
		{"ACKNOWLEDGE without body", api.Call{FrameworkID: fw.id, Type: api.CallAcknowledge}, sid, api.CodeInvalidArgument},
		{"ACKNOWLEDGE without uuid", api.Call{FrameworkID: fw.id, Type: api.CallAcknowledge,
			Acknowledge: &api.Acknowledge{AgentID: ag.id, TaskID: "t1"}}, sid, api.CodeInvalidArgument},
		{"ACKNOWLEDGE of an unknown agent", api.Call{FrameworkID: fw.id, Type: api.CallAcknowledge,
			Acknowledge: &api.Acknowledge{AgentID: "agent-nope", TaskID: "t1", UUID: "u"}}, sid, api.CodeNotFound},
		{"unknown type", api.Call{FrameworkID: fw.id, Type: "SHUTDOWN"}, sid, api.CodeInvalidArgument},
		{"SUBSCRIBE as a call", api.Call{FrameworkID: fw.id, Type: api.CallSubscribe}, sid, api.CodeInvalidArgument},
		{"REVIVE of another role", api.Call{FrameworkID: fw.id, Type: api.CallRevive, Revive: &api.Revive{Roles: []string{"eng"}}}, sid, api.CodeInvalidArgument},
		{"SUPPRESS of another role", api.Call{FrameworkID: fw.id, Type: api.CallSuppress, Suppress: &api.Suppress{Roles: []string{"eng"}}}, sid, api.CodeInvalidArgument},
		{"ACCEPT with an unknown operation", api.Call{FrameworkID: fw.id, Type: api.CallAccept, Accept: &api.Accept{
			OfferIDs: []string{o.ID}, Operations: []api.Operation{{Type: "RESERVE"}}}}, sid, api.CodeInvalidArgument},
		{"ACCEPT with a mismatched operation body", api.Call{FrameworkID: fw.id, Type: api.CallAccept, Accept: &api.Accept{
			OfferIDs: []string{o.ID}, Operations: []api.Operation{{Type: api.OperationLaunch,
				LaunchGroup: &api.LaunchGroup{}}}}}, sid, api.CodeInvalidArgument},
		{"ACCEPT with a negative refusal", api.Call{FrameworkID: fw.id, Type: api.CallAccept, Accept: &api.Accept{
			OfferIDs: []string{o.ID}, Operations: []api.Operation{launchOp(taskInfo("x", ag.id, api.Resources{"cpus": 1}))},
			Filters: &api.Filters{RefuseSeconds: &neg}}}, sid, api.CodeInvalidArgument},
		{"DECLINE with a NaN refusal", api.Call{FrameworkID: fw.id, Type: api.CallDecline, Decline: &api.Decline{
			OfferIDs: []string{o.ID}, Filters: &api.Filters{RefuseSeconds: &nan}}}, sid, api.CodeInvalidArgument},
	}
	for _, c := range calls {
		wantCode(t, c.name, m.Call(ctx, c.call, c.streamID), c.code)
	}

	subscribes := []struct {
		name string
		call api.Call
		code string
	}{
		{"no body", api.Call{Type: api.CallSubscribe}, api.CodeInvalidArgument},
		{"unknown id", api.Call{Type: api.CallSubscribe, Subscribe: &api.Subscribe{FrameworkInfo: api.FrameworkInfo{
			ID: "fw-nope", Name: "x", Roles: []string{"*"}}}}, api.CodeNotFound},
		{"ids differ", api.Call{FrameworkID: "fw-other", Type: api.CallSubscribe, Subscribe: &api.Subscribe{FrameworkInfo: api.FrameworkInfo{
			ID: fw.id, Name: "web", Roles: []string{"*"}}}}, api.CodeInvalidArgument},
		{"bad role", api.Call{Type: api.CallSubscribe, Subscribe: &api.Subscribe{FrameworkInfo: api.FrameworkInfo{
			Name: "x", Roles: []string{"no spaces"}}}}, api.CodeInvalidArgument},
		{"no roles", api.Call{Type: api.CallSubscribe, Subscribe: &api.Subscribe{FrameworkInfo: api.FrameworkInfo{
			Name: "x"}}}, api.CodeInvalidArgument},
		{"no name", api.Call{Type: api.CallSubscribe, Subscribe: &api.Subscribe{FrameworkInfo: api.FrameworkInfo{
			Roles: []string{"*"}}}}, api.CodeInvalidArgument},
		{"unknown capability", api.Call{Type: api.CallSubscribe, Subscribe: &api.Subscribe{FrameworkInfo: api.FrameworkInfo{
			Name: "x", Roles: []string{"*"}, Capabilities: []string{"GPU_RESOURCES"}}}}, api.CodeInvalidArgument},
		{"negative failover timeout", api.Call{Type: api.CallSubscribe, Subscribe: &api.Subscribe{FrameworkInfo: api.FrameworkInfo{
			Name: "x", Roles: []string{"*"}, FailoverTimeoutSeconds: -1}}}, api.CodeInvalidArgument},
	}
	for _, c := range subscribes {
		s, e := m.Subscribe(ctx, c.call)
		wantCode(t, "SUBSCRIBE: "+c.name, e, c.code)
		if s != nil {
			t.Fatalf("SUBSCRIBE %s opened a stream", c.name)
		}
	}

	agentCalls := []struct {
		name     string
		call     api.AgentCall
		streamID string
		code     string
	}{
		{"unknown agent", api.AgentCall{AgentID: "agent-nope", Type: api.AgentCallHeartbeat}, ag.stream.ID(), api.CodeNotFound},
		{"another stream", api.AgentCall{AgentID: ag.id, Type: api.AgentCallHeartbeat}, "stream-nope", api.CodePermissionDenied},
		{"UPDATE without body", api.AgentCall{AgentID: ag.id, Type: api.AgentCallUpdate}, ag.stream.ID(), api.CodeInvalidArgument},
		{"UPDATE without uuid", api.AgentCall{AgentID: ag.id, Type: api.AgentCallUpdate, Update: &api.AgentUpdate{
			FrameworkID: fw.id, Status: api.TaskStatus{TaskID: "t1", State: api.TaskFinished}}}, ag.stream.ID(), api.CodeInvalidArgument},
		{"UPDATE with an unknown state", api.AgentCall{AgentID: ag.id, Type: api.AgentCallUpdate, Update: &api.AgentUpdate{
			FrameworkID: fw.id, Status: api.TaskStatus{TaskID: "t1", State: "TASK_DONE", UUID: "u"}}}, ag.stream.ID(), api.CodeInvalidArgument},
		{"unknown type", api.AgentCall{AgentID: ag.id, Type: "PING"}, ag.stream.ID(), api.CodeInvalidArgument},
	}
	for _, c := range agentCalls {
		wantCode(t, "agent "+c.name, m.AgentCall(c.call, c.streamID), c.code)
	}

	registers := []struct {
		name string
		reg  *api.AgentRegister
	}{
		{"no body", nil},
		{"bad name", &api.AgentRegister{AgentInfo: agentInfo("node 2!", smallAgent)}},
		{"empty name", &api.AgentRegister{AgentInfo: agentInfo("", smallAgent)}},
		{"negative resources", &api.AgentRegister{AgentInfo: agentInfo("node-2", api.Resources{"cpus": -1})}},
		{"bad resource name", &api.AgentRegister{AgentInfo: agentInfo("node-2", api.Resources{"CPUs": 1})}},
		{"unknown capability", &api.AgentRegister{AgentInfo: agentInfo("node-2", smallAgent, "GPU_RESOURCES")}},
		{"task without framework", &api.AgentRegister{AgentInfo: agentInfo("node-2", smallAgent),
			Tasks: []api.AgentTask{{Role: "*", Task: taskInfo("x", "", smallAgent)}}}},
		{"task with an unknown state", &api.AgentRegister{AgentInfo: agentInfo("node-2", smallAgent),
			Tasks: []api.AgentTask{{FrameworkID: fw.id, Role: "*", Task: taskInfo("x", "", smallAgent), State: "TASK_DONE"}}}},
		{"task with a bad allocation", &api.AgentRegister{AgentInfo: agentInfo("node-2", smallAgent),
			Tasks: []api.AgentTask{{FrameworkID: fw.id, Role: "*", Task: taskInfo("x", "", smallAgent),
				Allocation: []api.OfferResource{{Role: "bad role", Scalars: smallAgent}}}}}},
		{"executor without id", &api.AgentRegister{AgentInfo: agentInfo("node-2", smallAgent),
			Executors: []api.AgentExecutor{{FrameworkID: fw.id, Role: "*"}}}},
		// The registered agent's name with bad resources: refused before
		// anything of node-1 changes.
		{"known agent, bad resources", &api.AgentRegister{AgentInfo: agentInfo("node-1", api.Resources{"mem": math.Inf(1)})}},
	}
	for _, c := range registers {
		s, e := m.RegisterAgent(ctx, api.AgentCall{Type: api.AgentCallRegister, Register: c.reg}, "")
		wantCode(t, "REGISTER: "+c.name, e, api.CodeInvalidArgument)
		if s != nil {
			t.Fatalf("REGISTER %s opened a stream", c.name)
		}
	}

	after := snapshotLive(h, ag.id)
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("refused calls changed the state:\nbefore %+v\nafter  %+v", before, after)
	}
	if ag.ended() || fw.ended() {
		t.Fatal("a refused call ended a session")
	}
	ag.none("an agent event caused by a refused call", func(api.AgentEvent) bool { return true })
	fw.none("a framework event caused by a refused call", func(api.Event) bool { return true })
	// The sessions still work.
	fw.accept([]string{o.ID}, refuse(0), launchOp(taskInfo("t2", ag.id, api.Resources{"cpus": 1})))
	ag.nextLaunch("t2")
}
