package server

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/allot/allot/masterd/api"
)

// TestReservationBeforeItsAgentIsAdmitted: pre-provisioning from Terraform
// before the node exists. Unforced is a 409 that says why; forced is stored
// pending and turns active once the agent is admitted with room for it.
func TestReservationBeforeItsAgentIsAdmitted(t *testing.T) {
	s := startDev(t)
	body := `{"agent": "node-9", "role": "db", "resources": {"cpus": 2, "mem": 512}}`
	for _, path := range []string{"/v1/reservations/db", "/v1/reservations/db?dry_run=true"} {
		a := call(t, s, "PUT", path, body)
		var e api.ErrorBody
		if err := json.Unmarshal(a.body, &e); err != nil || a.status != http.StatusConflict || e.Error.Code != api.CodeConflict ||
			!strings.Contains(e.Error.Message, "agent node-9 is not admitted") || e.Error.Details["reason"] != "agent_not_admitted" {
			t.Fatalf("PUT %s unforced for an unknown agent: %d %s, want 409 conflict saying the agent is not admitted", path, a.status, a.body)
		}
	}
	if a := call(t, s, "GET", "/v1/reservations/db", ""); a.status != http.StatusNotFound {
		t.Fatalf("a refused reservation was stored: %d %s", a.status, a.body)
	}

	forced := `{"agent": "node-9", "role": "db", "resources": {"cpus": 2, "mem": 512}, "force": true}`
	var dry struct {
		DryRun bool            `json:"dry_run"`
		Object api.Reservation `json:"object"`
	}
	if err := json.Unmarshal(mustCall(t, s, "PUT", "/v1/reservations/db?dry_run=true", forced).body, &dry); err != nil ||
		!dry.DryRun || dry.Object.Status != api.ReservationPending {
		t.Fatalf("forced dry run: %+v (%v), want a pending reservation", dry, err)
	}
	var put api.Reservation
	if err := json.Unmarshal(mustCall(t, s, "PUT", "/v1/reservations/db", forced).body, &put); err != nil || put.Status != api.ReservationPending {
		t.Fatalf("forced PUT answered %+v (%v), want status pending", put, err)
	}

	reservation := func() api.Reservation {
		var r api.Reservation
		if err := json.Unmarshal(mustCall(t, s, "GET", "/v1/reservations/db", "").body, &r); err != nil {
			t.Fatal(err)
		}
		var list struct{ Reservations []api.Reservation }
		if err := json.Unmarshal(mustCall(t, s, "GET", "/v1/reservations", "").body, &list); err != nil || len(list.Reservations) != 1 ||
			!reflect.DeepEqual(list.Reservations[0], r) {
			t.Fatalf("the list %+v disagrees with the reservation %+v", list.Reservations, r)
		}
		return r
	}
	if r := reservation(); r.Status != api.ReservationPending || r.Version != put.Version {
		t.Fatalf("stored %+v, want %+v", r, put)
	}

	// The node comes up too small, then with room: pending, then active.
	mustCall(t, s, "PUT", "/v1/test/agents/node-9", `{"hostname": "node-9", "resources": {"cpus": 1, "mem": 4096}}`)
	if r := reservation(); r.Status != api.ReservationPending {
		t.Fatalf("on an agent too small for it: %+v, want pending", r)
	}
	mustCall(t, s, "PUT", "/v1/test/agents/node-9", `{"hostname": "node-9", "resources": {"cpus": 4, "mem": 4096}}`)
	if r := reservation(); r.Status != api.ReservationActive || r.Version != put.Version {
		t.Fatalf("once the agent is admitted with room: %+v, want active at version %d", r, put.Version)
	}
}
