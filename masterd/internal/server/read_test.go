package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
)

// TestLiveStateReads runs a framework with two tasks on a role that has no
// policy at all, and reads them back: the cluster's allocated total, the role
// in /v1/roles, and /v1/tasks filtered by state.
func TestLiveStateReads(t *testing.T) {
	s := startDev(t, func(c *Config) { c.AllocationInterval = 20 * time.Millisecond })
	ag := openStream[api.AgentEvent](t, s, api.AgentProtocolPath, api.AgentCall{Type: api.AgentCallRegister,
		Register: &api.AgentRegister{AgentInfo: api.AgentInfo{Name: "node-1", Resources: api.Resources{"cpus": 4, "mem": 4096}}}})
	agentID := ag.next(t, "REGISTERED", func(e api.AgentEvent) bool { return e.Type == api.AgentEventRegistered }).Registered.AgentID
	fw := openStream[api.Event](t, s, api.SchedulerPath, api.Call{Type: api.CallSubscribe, Subscribe: &api.Subscribe{
		FrameworkInfo: api.FrameworkInfo{Name: "etl", Principal: "etl", Roles: []string{"analytics"}}}})
	fwID := fw.next(t, "SUBSCRIBED", func(e api.Event) bool { return e.Type == api.EventSubscribed }).Subscribed.FrameworkID
	offer := fw.next(t, "OFFERS", func(e api.Event) bool { return e.Type == api.EventOffers }).Offers.Offers[0]
	task := func(id string, res api.Resources) api.TaskInfo {
		return api.TaskInfo{TaskID: id, Name: id, AgentID: agentID, Resources: res, Command: &api.CommandInfo{Value: "sleep 60"}}
	}
	if status, e := post(t, s, api.SchedulerPath, fw.id, api.Call{FrameworkID: fwID, Type: api.CallAccept, Accept: &api.Accept{
		OfferIDs: []string{offer.ID}, Operations: []api.Operation{{Type: api.OperationLaunch, Launch: &api.Launch{Tasks: []api.TaskInfo{
			task("t1", api.Resources{"cpus": 1, "mem": 128}), task("t2", api.Resources{"cpus": 0.5, "mem": 64})}}}}}}); status != http.StatusAccepted {
		t.Fatalf("ACCEPT: %d %+v", status, e.Error)
	}
	ag.next(t, "LAUNCH", func(e api.AgentEvent) bool { return e.Type == api.AgentEventLaunch })
	if status, e := post(t, s, api.AgentProtocolPath, ag.id, api.AgentCall{AgentID: agentID, Type: api.AgentCallUpdate,
		Update: &api.AgentUpdate{FrameworkID: fwID, Status: api.TaskStatus{TaskID: "t1", State: api.TaskRunning, UUID: "u1"}}}); status != http.StatusAccepted {
		t.Fatalf("UPDATE: %d %+v", status, e.Error)
	}
	fw.next(t, "TASK_RUNNING", func(e api.Event) bool { return e.Type == api.EventUpdate && e.Update.Status.State == api.TaskRunning })
	allocated := api.Resources{"cpus": 1.5, "mem": 192}

	var cluster api.Cluster
	decode(t, mustCall(t, s, "GET", "/v1/cluster", "").body, &cluster)
	if !reflect.DeepEqual(cluster.Allocated, allocated) || !reflect.DeepEqual(cluster.Total, api.Resources{"cpus": 4, "mem": 4096}) {
		t.Errorf("cluster allocated %v of %v, want %v of cpus:4;mem:4096", cluster.Allocated, cluster.Total, allocated)
	}

	var roles api.RoleList
	decode(t, mustCall(t, s, "GET", "/v1/roles", "").body, &roles)
	i := slices.IndexFunc(roles.Roles, func(r api.Role) bool { return r.Role == "analytics" })
	if i < 0 {
		t.Fatalf("/v1/roles lists no role analytics, which only has a framework and its tasks: %+v", roles.Roles)
	}
	if r := roles.Roles[i]; !reflect.DeepEqual(r.Frameworks, []string{fwID}) || !reflect.DeepEqual(r.Allocated, allocated) || r.Weight != api.DefaultWeight {
		t.Errorf("role analytics: %+v", r)
	}

	tests := map[string][]string{
		"":                                 {"t1", "t2"},
		"?state=TASK_RUNNING":              {"t1"},
		"?state=TASK_STAGING":              {"t2"},
		"?state=TASK_STAGING,TASK_RUNNING": {"t1", "t2"},
		"?state=TASK_FINISHED":             {},
	}
	for query, want := range tests {
		var tasks api.TaskList
		decode(t, mustCall(t, s, "GET", "/v1/tasks"+query, "").body, &tasks)
		got := []string{}
		for _, task := range tasks.Tasks {
			got = append(got, task.TaskID)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("GET /v1/tasks%s: %v, want %v", query, got, want)
		}
	}
	for _, query := range []string{"?state=RUNNING", "?state=task_running", "?state=", "?state=TASK_RUNNING,", "?state=TASK_RUNNING&state=TASK_STAGING"} {
		wantError(t, call(t, s, "GET", "/v1/tasks"+query, ""), http.StatusBadRequest, api.CodeInvalidArgument, "state")
	}
}

// TestAuditPages reads the audit trail a page at a time.
func TestAuditPages(t *testing.T) {
	s := startDev(t)
	for i := range 5 {
		mustCall(t, s, "PUT", fmt.Sprintf("/v1/ratelimits/p%d", i), `{"qps":1}`)
	}
	var all api.AuditList
	decode(t, mustCall(t, s, "GET", "/v1/audit", "").body, &all)
	if len(all.Entries) < 5 {
		t.Fatalf("audit: %d entries, want at least 5", len(all.Entries))
	}
	page := func(query string) []api.AuditEntry {
		var l api.AuditList
		decode(t, mustCall(t, s, "GET", "/v1/audit"+query, "").body, &l)
		return l.Entries
	}
	if got := page("?limit=2"); !reflect.DeepEqual(got, all.Entries[:2]) {
		t.Errorf("?limit=2: %+v, want the 2 oldest entries", got)
	}
	second := page(fmt.Sprintf("?after=%d&limit=2", all.Entries[1].Index))
	if !reflect.DeepEqual(second, all.Entries[2:4]) {
		t.Errorf("the second page: %+v, want %+v", second, all.Entries[2:4])
	}
	if got := page(fmt.Sprintf("?limit=100000&stale=true&after=%d", all.Entries[len(all.Entries)-2].Index)); !reflect.DeepEqual(got, all.Entries[len(all.Entries)-1:]) {
		t.Errorf("the last page: %+v", got)
	}
	for _, query := range []string{"?limit=0", "?limit=-1", "?limit=two", "?limit=", "?after=-1", "?after=1.5"} {
		wantError(t, call(t, s, "GET", "/v1/audit"+query, ""), http.StatusBadRequest, api.CodeInvalidArgument, "")
	}
}

func decode(t testing.TB, body []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
}

// wantError checks an error answer: status, code, and a word its message
// must hold.
func wantError(t testing.TB, a answer, status int, code, word string) *api.Error {
	t.Helper()
	var body api.ErrorBody
	if err := json.Unmarshal(a.body, &body); err != nil || body.Error == nil {
		t.Fatalf("answer %d is not an error body: %s", a.status, a.body)
	}
	if a.status != status || body.Error.Code != code {
		t.Fatalf("answer %d %s, want %d %s: %s", a.status, body.Error.Code, status, code, body.Error.Message)
	}
	if !strings.Contains(body.Error.Message, word) {
		t.Fatalf("message %q does not mention %q", body.Error.Message, word)
	}
	return body.Error
}
