package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"

	"github.com/allot/allot/masterd/api"
)

// What a plan must say before anyone applies: each of these passed plan in
// silence and failed (or did harm) at apply.

// planOnly is a plan step that expects changes and runs checks on the plan.
func planOnly(config string, checks ...plancheck.PlanCheck) resource.TestStep {
	return resource.TestStep{
		Config:             config,
		PlanOnly:           true,
		ExpectNonEmptyPlan: true,
		ConfigPlanChecks:   resource.ConfigPlanChecks{PostApplyPreRefresh: checks},
	}
}

// TestAccPlan_numbersBeyondAFloat64AreAttributeErrors: 1e400 was "Value
// Conversion Error ... This is always an error in the provider".
func TestAccPlan_numbersBeyondAFloat64AreAttributeErrors(t *testing.T) {
	skipUnlessAcc(t)
	provider := `
provider "allot" {
  addresses = ["http://127.0.0.1:1"]
  timeout   = "1s"
}
`
	cases := []struct{ body, want string }{
		{`resource "allot_quota" "q" {
  role   = "r"
  limits = { mem = 1e400 }
}`, `Invalid resource value|Resource "mem" of limits is 1e+400`},
		{`resource "allot_reservation" "r" {
  name      = "r"
  agent     = "a"
  role      = "db"
  resources = { cpus = -1e400 }
}`, `Invalid resource value|Resource "cpus" of resources is -1e+400`},
		{`resource "allot_rate_limit" "l" {
  principal = "p"
  qps       = 1e400
}`, `Invalid value|qps: 1e+400 is not a finite number`},
		{`resource "allot_role" "w" {
  name   = "w"
  weight = 1e400
}`, `Invalid value|weight: 1e+400 is not a finite number`},
	}
	var steps []resource.TestStep
	for _, tc := range cases {
		steps = append(steps, resource.TestStep{
			Config:      provider + tc.body,
			PlanOnly:    true,
			ExpectError: wordsInOrder(strings.Split(tc.want, "|")...),
		})
	}
	resource.ParallelTest(t, resource.TestCase{ProtoV6ProviderFactories: providerFactories(nil), Steps: steps})

	// The real terraform binary with the real provider binary: the message
	// of the framework's conversion error is gone.
	cli := newTFCLI(t)
	cli.writeConfig(t, provider+cases[0].body)
	out, err := cli.run(nil, "validate", "-no-color")
	if err == nil || strings.Contains(out, "always an error in the provider") || !strings.Contains(out, "Invalid resource value") {
		t.Fatalf("terraform validate of mem = 1e400: err %v, want an attribute error:\n%s", err, out)
	}
}

// TestAccPlan_createOfAnExistingObjectFailsAtPlan: apply would refuse it
// (it never overwrites what it did not create); the plan says so, with the
// import command for the resource's real address.
func TestAccPlan_createOfAnExistingObjectFailsAtPlan(t *testing.T) {
	c := sharedCluster(t)
	ctx := context.Background()
	const role, principal = "acc-plan-exists", "acc-plan-exists"
	if _, err := c.client.PutQuota(ctx, role, api.QuotaRequest{Limits: api.Resources{"cpus": 1}}, api.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	qps := 5.0
	if _, err := c.client.PutRateLimit(ctx, principal, api.RateLimitRequest{QPS: &qps}, api.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.client.DeleteQuota(ctx, role, api.WriteOptions{})
		c.client.DeleteRateLimit(ctx, principal, api.WriteOptions{})
	})
	rec := &diagRecorder{}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(rec),
		Steps: []resource.TestStep{
			{
				Config:   quotaConfig(c, role, `limits = { cpus = 2 }`),
				PlanOnly: true,
				ExpectError: wordsInOrder("Quota already exists", `The quota of role "`+role+`" already exists in the cluster`,
					"terraform import", role, "Apply would fail"),
			},
			{
				Config: c.providerConfig() + fmt.Sprintf(`
resource "allot_rate_limit" "test" {
  principal = %q
  qps       = 6
}
`, principal),
				PlanOnly:    true,
				ExpectError: wordsInOrder("Rate limit already exists", "terraform import", principal),
			},
			// The same values: apply would take it over, as it does its own
			// write whose answer a failover lost. A warning says so.
			func() resource.TestStep {
				s := planOnly(quotaConfig(c, role, `limits = { cpus = 1 }`),
					expectPlanWarning(rec, "allot_quota", "Quota already exists", words("with the planned values, but not in this Terraform state")))
				s.PreConfig = rec.reset
				return s
			}(),
		},
	})

	// The real binaries, run as a user runs them: the hint names the
	// resource's own address.
	cli := newTFCLI(t)
	cli.writeConfig(t, c.providerConfig()+fmt.Sprintf(`
resource "allot_quota" "existing" {
  role   = %q
  limits = { cpus = 3 }
}
`, role))
	out, err := cli.run(nil, "plan", "-no-color", "-input=false")
	if err == nil || !strings.Contains(out, "terraform import allot_quota.existing "+role) || strings.Contains(out, "<name>") {
		t.Fatalf("terraform plan of an existing quota: err %v; want it refused with \"terraform import allot_quota.existing %s\":\n%s", err, role, out)
	}
}

// TestAccPlan_forceShowsWhatItOverrides: force = true passed plan in silence
// however far past the cluster's capacity it went.
func TestAccPlan_forceShowsWhatItOverrides(t *testing.T) {
	c := sharedCluster(t)
	rec := &diagRecorder{}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(rec),
		Steps: []resource.TestStep{
			planOnly(quotaConfig(c, "acc-plan-forced", "guarantees = { cpus = 1000000 }\n  force = true"),
				expectPlanWarning(rec, "allot_quota", "Apply forces a change past the cluster's capacity",
					wordsInOrder("Without force, the cluster would refuse the planned create", "cpus: 1000000 requested by this change", "short by")),
			),
			func() resource.TestStep {
				// Pre-provisioning a node that does not exist yet: stored pending.
				s := planOnly(reservationConfig(c, "acc-plan-forced", "acc-plan-no-such-node", "db", "resources = { cpus = 1 }\n  force = true"),
					expectPlanWarning(rec, "allot_reservation", "Apply forces a change the cluster would refuse",
						words("agent acc-plan-no-such-node is not admitted")))
				s.PreConfig = rec.reset
				return s
			}(),
		},
	})
}

// TestAccPlan_rateLimitOnTerraformsOwnPrincipalWarns: a limit that throttles
// the principal the provider calls as applies to the apply that would lift it.
func TestAccPlan_rateLimitOnTerraformsOwnPrincipalWarns(t *testing.T) {
	c := sharedCluster(t) // runs with an operator token: the provider is "operator"
	rec := &diagRecorder{}
	limit := func(principal, values string) string {
		return c.providerConfig() + fmt.Sprintf(`
resource "allot_rate_limit" "test" {
  principal = %q
  %s
}
`, principal, values)
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(rec),
		Steps: []resource.TestStep{
			planOnly(limit("operator", "qps = 0.2\n  capacity = 0"),
				expectPlanWarning(rec, "allot_rate_limit", "Rate limit may lock Terraform out of the cluster",
					wordsInOrder(`The provider calls the cluster as principal "operator"`, "0.2 calls a second", "with no queue"))),
			func() resource.TestStep {
				s := planOnly(limit("operator", "qps = 500"),
					expectPlanWarning(rec, "allot_rate_limit", "Rate limit throttles Terraform's own calls", words("500 calls a second")))
				s.PreConfig = rec.reset
				return s
			}(),
			func() resource.TestStep {
				s := planOnly(limit("acc-plan-someone-else", "qps = 0.2"), expectNoPlanWarning(rec, "allot_rate_limit"))
				s.PreConfig = rec.reset
				return s
			}(),
		},
	})
}

// TestAccPlan_strictPlanFailsWhenTheClusterCannotCheck: for CI, a plan that
// was not checked must not pass for one that was.
func TestAccPlan_strictPlanFailsWhenTheClusterCannotCheck(t *testing.T) {
	skipUnlessAcc(t)
	config := func(strict string) string {
		return fmt.Sprintf(`
provider "allot" {
  addresses   = ["http://127.0.0.1:1"]
  timeout     = "1s"
  %s
}
resource "allot_quota" "offline" {
  role   = "offline"
  limits = { cpus = 1 }
}
`, strict)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(nil),
		Steps: []resource.TestStep{
			{
				Config:      config("strict_plan = true"),
				PlanOnly:    true,
				ExpectError: wordsInOrder(unreachableSummary, "could not reach the allot cluster", "strict_plan setting makes this an error"),
			},
			{
				// The environment variable does the same when the setting is left out.
				PreConfig:   func() { t.Setenv(EnvStrictPlan, "true") },
				Config:      config(""),
				PlanOnly:    true,
				ExpectError: words("strict_plan setting makes this an error"),
			},
		},
	})
}
