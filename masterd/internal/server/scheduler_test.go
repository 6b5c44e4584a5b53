package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
)

// rawStream is one NDJSON session opened with plain HTTP, so that these
// tests see exactly what goes over the wire.
type rawStream[E any] struct {
	id     string
	events chan E
	cancel context.CancelFunc
}

func openStream[E any](t testing.TB, s *Server, path string, call any) *rawStream[E] {
	t.Helper()
	body, _ := json.Marshal(call)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", s.APIAddress()+path, bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		var e api.ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		cancel()
		t.Fatalf("open %s: %d %+v", path, resp.StatusCode, e.Error)
	}
	st := &rawStream[E]{id: resp.Header.Get(api.HeaderStreamID), events: make(chan E, 1024), cancel: cancel}
	go func() {
		defer resp.Body.Close()
		defer close(st.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e E
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Errorf("bad event %q: %v", sc.Text(), err)
				return
			}
			st.events <- e
		}
	}()
	t.Cleanup(cancel)
	return st
}

// next waits for the next event that match accepts.
func (st *rawStream[E]) next(t testing.TB, what string, match func(E) bool) E {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case e, ok := <-st.events:
			if !ok {
				t.Fatalf("stream ended while waiting for %s", what)
			}
			if match(e) {
				return e
			}
		case <-timeout:
			t.Fatalf("no %s", what)
		}
	}
}

func post(t *testing.T, s *Server, path, streamID string, call any) (int, api.ErrorBody) {
	t.Helper()
	body, _ := json.Marshal(call)
	req, _ := http.NewRequest("POST", s.APIAddress()+path, bytes.NewReader(body))
	req.Header.Set(api.HeaderStreamID, streamID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e api.ErrorBody
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e
}

func TestLaunchThroughTheWire(t *testing.T) {
	s := startDev(t, func(c *Config) { c.AllocationInterval = 50 * time.Millisecond })

	ag := openStream[api.AgentEvent](t, s, api.AgentProtocolPath, api.AgentCall{Type: api.AgentCallRegister,
		Register: &api.AgentRegister{AgentInfo: api.AgentInfo{Name: "node-1", Hostname: "node-1.example",
			Resources: api.Resources{"cpus": 4, "mem": 4096}, Capabilities: []string{api.CapabilityTaskResourceLimits}}}})
	agentID := ag.next(t, "REGISTERED", func(e api.AgentEvent) bool { return e.Type == api.AgentEventRegistered }).Registered.AgentID

	fw := openStream[api.Event](t, s, api.SchedulerPath, api.Call{Type: api.CallSubscribe, Subscribe: &api.Subscribe{
		FrameworkInfo: api.FrameworkInfo{Name: "web", Principal: "web", Roles: []string{"*"}}}})
	fwID := fw.next(t, "SUBSCRIBED", func(e api.Event) bool { return e.Type == api.EventSubscribed }).Subscribed.FrameworkID
	offers := fw.next(t, "OFFERS", func(e api.Event) bool { return e.Type == api.EventOffers }).Offers.Offers
	if len(offers) != 1 || offers[0].AgentID != agentID {
		t.Fatalf("offers: %+v", offers)
	}

	shell := true
	status, e := post(t, s, api.SchedulerPath, fw.id, api.Call{FrameworkID: fwID, Type: api.CallAccept, Accept: &api.Accept{
		OfferIDs: []string{offers[0].ID},
		Operations: []api.Operation{{Type: api.OperationLaunch, Launch: &api.Launch{Tasks: []api.TaskInfo{
			{TaskID: "t1", Name: "t1", AgentID: agentID, Resources: api.Resources{"cpus": 1, "mem": 128},
				Command: &api.CommandInfo{Value: "sleep 60", Shell: &shell}},
			{TaskID: "bad", Name: "bad", AgentID: agentID, Resources: api.Resources{"cpus": 1},
				Limits:  api.Limits{"cpus": {Value: 0.5}},
				Command: &api.CommandInfo{Value: "true"}},
		}}}}}})
	if status != http.StatusAccepted {
		t.Fatalf("ACCEPT: %d %+v", status, e.Error)
	}
	bad := fw.next(t, "TASK_ERROR", func(e api.Event) bool { return e.Type == api.EventUpdate }).Update.Status
	if bad.TaskID != "bad" || bad.State != api.TaskError || bad.Reason != api.ReasonTaskInvalid {
		t.Fatalf("invalid task: %+v", bad)
	}
	launch := ag.next(t, "LAUNCH", func(e api.AgentEvent) bool { return e.Type == api.AgentEventLaunch }).Launch
	if len(launch.Tasks) != 1 || launch.Tasks[0].Task.TaskID != "t1" || launch.Tasks[0].Role != "*" {
		t.Fatalf("launch: %+v", launch)
	}

	status, e = post(t, s, api.AgentProtocolPath, ag.id, api.AgentCall{AgentID: agentID, Type: api.AgentCallUpdate,
		Update: &api.AgentUpdate{FrameworkID: fwID, Status: api.TaskStatus{TaskID: "t1", State: api.TaskRunning, UUID: "u1"}}})
	if status != http.StatusAccepted {
		t.Fatalf("UPDATE: %d %+v", status, e.Error)
	}
	up := fw.next(t, "UPDATE", func(e api.Event) bool { return e.Type == api.EventUpdate }).Update.Status
	if up.TaskID != "t1" || up.State != api.TaskRunning || up.UUID != "u1" || up.AgentID != agentID {
		t.Fatalf("update: %+v", up)
	}
	status, e = post(t, s, api.SchedulerPath, fw.id, api.Call{FrameworkID: fwID, Type: api.CallAcknowledge,
		Acknowledge: &api.Acknowledge{AgentID: agentID, TaskID: "t1", UUID: "u1"}})
	if status != http.StatusAccepted {
		t.Fatalf("ACKNOWLEDGE: %d %+v", status, e.Error)
	}
	ack := ag.next(t, "ACKNOWLEDGE", func(e api.AgentEvent) bool { return e.Type == api.AgentEventAcknowledge }).Acknowledge
	if ack.UUID != "u1" || ack.TaskID != "t1" {
		t.Fatalf("ack: %+v", ack)
	}

	var tasks api.TaskList
	if err := json.Unmarshal(mustCall(t, s, "GET", "/v1/tasks", "").body, &tasks); err != nil {
		t.Fatal(err)
	}
	if len(tasks.Tasks) != 1 || tasks.Tasks[0].State != api.TaskRunning {
		t.Fatalf("tasks: %+v", tasks.Tasks)
	}
	// A call on a stream that is not the framework's is refused.
	if status, _ := post(t, s, api.SchedulerPath, "nope", api.Call{FrameworkID: fwID, Type: api.CallRevive}); status != http.StatusForbidden {
		t.Fatalf("REVIVE on a foreign stream: %d", status)
	}
}
