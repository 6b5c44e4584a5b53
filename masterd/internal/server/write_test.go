package server

import (
	"strings"
	"testing"

	"github.com/allot/allot/masterd/api"
)

// TestQuotaWarnsOfResourcesNoAgentHas: a quota naming a resource no
// admitted agent has ("cpu" for "cpus") is stored, with a warning in its
// dry run's effects; a cluster without agents, and known names, get none.
func TestQuotaWarnsOfResourcesNoAgentHas(t *testing.T) {
	s := startDev(t)
	var dry api.DryRun
	decode(t, mustCall(t, s, "PUT", "/v1/quotas/eng?dry_run=true", `{"limits":{"cpu":8}}`).body, &dry)
	if len(dry.Effects.Warnings) != 0 {
		t.Errorf("no agents yet: warnings %q, want none", dry.Effects.Warnings)
	}
	mustCall(t, s, "PUT", "/v1/test/agents/node-1", `{"hostname":"h1","resources":{"cpus":8,"mem":4096}}`)
	dry = api.DryRun{}
	decode(t, mustCall(t, s, "PUT", "/v1/quotas/eng?dry_run=true", `{"limits":{"cpu":8,"mem":1024}}`).body, &dry)
	if len(dry.Effects.Warnings) != 1 || !strings.Contains(dry.Effects.Warnings[0], `"cpu"`) || !strings.Contains(dry.Effects.Warnings[0], "cpus, mem") {
		t.Errorf("a quota on cpu: warnings %q, want one naming cpu and the agents' cpus, mem", dry.Effects.Warnings)
	}
	dry = api.DryRun{}
	decode(t, mustCall(t, s, "PUT", "/v1/quotas/eng?dry_run=true", `{"limits":{"cpus":8}}`).body, &dry)
	if len(dry.Effects.Warnings) != 0 {
		t.Errorf("a quota on cpus: warnings %q, want none", dry.Effects.Warnings)
	}
}
