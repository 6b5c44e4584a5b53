package server

import (
	"encoding/json"
	"testing"

	"github.com/allot/allot/masterd/api"
)

// Reserved resources count toward their role's quota, so a limit below them
// is refused unless forced, and a forced one reports what is over.
func TestQuotaLimitBelowReservedConsumption(t *testing.T) {
	s := startDev(t)
	mustCall(t, s, "PUT", "/v1/test/agents/node-1", `{"hostname":"h1","resources":{"cpus":8,"mem":4096}}`)
	mustCall(t, s, "PUT", "/v1/reservations/db-1", `{"agent":"node-1","role":"db","resources":{"cpus":4,"mem":1024}}`)

	var role api.Role
	if err := json.Unmarshal(mustCall(t, s, "GET", "/v1/roles/db", "").body, &role); err != nil {
		t.Fatal(err)
	}
	if role.Reserved["cpus"] != 4 {
		t.Fatalf("role db reserved %v, want cpus 4", role.Reserved)
	}

	refused := call(t, s, "PUT", "/v1/quotas/db", `{"limits":{"cpus":2}}`)
	if refused.status != 409 {
		t.Fatalf("limit below reservation: %d %s, want 409", refused.status, refused.body)
	}
	var body api.ErrorBody
	json.Unmarshal(refused.body, &body)
	if body.Error == nil || body.Error.Code != api.CodeConflict {
		t.Fatalf("error %s, want conflict", refused.body)
	}
	if a := call(t, s, "GET", "/v1/quotas/db", ""); a.status != 404 {
		t.Fatalf("a refused quota was stored: %d %s", a.status, a.body)
	}

	var dry api.DryRun
	if err := json.Unmarshal(mustCall(t, s, "PUT", "/v1/quotas/db?dry_run=true", `{"limits":{"cpus":2},"force":true}`).body, &dry); err != nil {
		t.Fatal(err)
	}
	if got := dry.Effects.OverLimit["db"]["cpus"]; got != 2 {
		t.Fatalf("dry run over_limit %v, want db cpus 2", dry.Effects.OverLimit)
	}
	mustCall(t, s, "PUT", "/v1/quotas/db", `{"limits":{"cpus":2},"force":true}`)

	// Once the reservation is gone nothing is over the limit.
	mustCall(t, s, "DELETE", "/v1/reservations/db-1", "")
	mustCall(t, s, "PUT", "/v1/quotas/db", `{"limits":{"cpus":1}}`)
}
