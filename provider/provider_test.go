package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"

	"github.com/allot/allot/masterd/api"
)

// TestProviderSchema makes the framework validate every schema: a default on
// an attribute that is not computed, say, is only caught here.
func TestProviderSchema(t *testing.T) {
	server, err := providerFactories(nil)["allot"]()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := server.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range resp.Diagnostics {
		t.Errorf("%s: %s: %s", d.Severity, d.Summary, d.Detail)
	}
	for _, name := range []string{"allot_quota", "allot_role", "allot_reservation", "allot_rate_limit", "allot_rate_limit_default",
		"allot_acl_policy", "allot_acl_token"} {
		if resp.ResourceSchemas[name] == nil {
			t.Errorf("resource %s is missing", name)
		}
	}
	for _, name := range []string{"allot_cluster", "allot_agents", "allot_role"} {
		if resp.DataSourceSchemas[name] == nil {
			t.Errorf("data source %s is missing", name)
		}
	}
}

// TestAccProvider_leaderKilledBetweenApplies: the leader dies between two
// applies; the second apply, with the same addresses, rides out the election.
func TestAccProvider_leaderKilledBetweenApplies(t *testing.T) {
	c := ownCluster(t, 3)
	config := func(n int) string {
		return c.providerConfig() + fmt.Sprintf(`
resource "allot_role" "fo" {
  name   = "failover"
  weight = %d
}
resource "allot_quota" "fo" {
  role   = allot_role.fo.name
  limits = { cpus = %d }
}
resource "allot_rate_limit" "fo" {
  principal = "failover"
  qps       = %d
}
`, n, n, n)
	}
	check := func(n int) resource.TestCheckFunc {
		return resource.ComposeAggregateTestCheckFunc(
			checkRole(c, "failover", float64(n), nil),
			checkQuota(c, "failover", api.Resources{"cpus": float64(n)}),
			checkRateLimit(c, "failover", float64(n), n, 1000),
		)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(nil),
		CheckDestroy:             resource.ComposeAggregateTestCheckFunc(checkNoQuota(c, "failover"), checkNoRateLimit(c, "failover")),
		Steps: []resource.TestStep{
			{Config: config(2), Check: check(2)},
			{
				PreConfig: func() {
					leader, err := c.WaitLeader(context.Background())
					if err != nil {
						t.Fatal(err)
					}
					if err := c.Kill(leader); err != nil {
						t.Fatal(err)
					}
					t.Logf("killed the leader %s; the configuration still lists its address", c.ID(leader))
				},
				Config: config(4),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("allot_role.fo", plancheck.ResourceActionUpdate),
						plancheck.ExpectResourceAction("allot_quota.fo", plancheck.ResourceActionUpdate),
						plancheck.ExpectResourceAction("allot_rate_limit.fo", plancheck.ResourceActionUpdate),
					},
				},
				Check: check(4),
			},
		},
	})
}

// TestAccProvider_unreachableClusterPlanWarns: with no server reachable the
// plan still works, and warns that it was not checked.
func TestAccProvider_unreachableClusterPlanWarns(t *testing.T) {
	skipUnlessAcc(t)
	rec := &diagRecorder{}
	config := `
provider "allot" {
  addresses = ["http://127.0.0.1:1", "http://127.0.0.1:2"]
  timeout   = "2s"
}
resource "allot_quota" "offline" {
  role   = "offline"
  limits = { cpus = 1 }
}
resource "allot_rate_limit" "offline" {
  principal = "offline"
  qps       = 1
}
`
	unreachable := words("could not reach the allot cluster to dry-run the planned create")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(rec),
		Steps: []resource.TestStep{
			{
				Config:             config,
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PostApplyPreRefresh: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("allot_quota.offline", plancheck.ResourceActionCreate),
						expectPlanWarning(rec, "allot_quota", unreachableSummary, unreachable),
						expectPlanWarning(rec, "allot_rate_limit", unreachableSummary, unreachable),
					},
				},
			},
		},
	})
}

// TestAccProvider_noWarningsWhenClean: a plan the cluster accepts without
// side effects carries no warning at all.
func TestAccProvider_noWarningsWhenClean(t *testing.T) {
	c := sharedCluster(t)
	rec := &diagRecorder{}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(rec),
		CheckDestroy:             checkNoQuota(c, "acc-clean"),
		Steps: []resource.TestStep{
			{
				Config: quotaConfig(c, "acc-clean", `limits = { cpus = 1 }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{expectNoPlanWarning(rec, "allot_quota")},
				},
			},
		},
	})
}

// TestAccProvider_tokenNeverInStateOrLogs runs the built provider binary with
// TF_LOG=trace against a cluster that requires a token, given once through a
// sensitive variable and once through ALLOT_TOKEN, and looks for the token in
// everything Terraform printed or stored.
func TestAccProvider_tokenNeverInStateOrLogs(t *testing.T) {
	c := ownCluster(t, 1)
	cli := newTFCLI(t)
	addresses := fmt.Sprintf("%q", c.Address(0))
	resources := `
resource "allot_rate_limit" "secret" {
  principal = "secret"
  qps       = %d
}
resource "allot_quota" "secret" {
  role   = "secret"
  limits = { cpus = %d }
}
data "allot_cluster" "this" {}
`
	var logs strings.Builder
	run := func(env []string, args ...string) {
		t.Helper()
		out, err := cli.run(append([]string{"TF_LOG=trace"}, env...), args...)
		logs.WriteString(out)
		if err != nil {
			t.Fatal(err)
		}
	}

	cli.writeConfig(t, fmt.Sprintf(`
variable "allot_token" {
  type      = string
  sensitive = true
}
provider "allot" {
  addresses = [%s]
  token     = var.allot_token
}
`, addresses)+fmt.Sprintf(resources, 5, 1))
	byVariable := []string{"TF_VAR_allot_token=" + accToken}
	run(byVariable, "apply", "-auto-approve", "-input=false")
	cli.writeConfig(t, fmt.Sprintf(`
variable "allot_token" {
  type      = string
  sensitive = true
}
provider "allot" {
  addresses = [%s]
  token     = var.allot_token
}
`, addresses)+fmt.Sprintf(resources, 6, 2))
	run(byVariable, "plan", "-input=false")

	cli.writeConfig(t, fmt.Sprintf(`
provider "allot" {
  addresses = [%s]
}
`, addresses)+fmt.Sprintf(resources, 7, 3))
	byEnvironment := []string{"ALLOT_TOKEN=" + accToken}
	run(byEnvironment, "apply", "-auto-approve", "-input=false")
	if err := checkRateLimit(c, "secret", 7, 7, 1000)(nil); err != nil {
		t.Fatal(err)
	}
	run(byEnvironment, "destroy", "-auto-approve", "-input=false")

	// The logs must be the real thing: the provider's own API calls are in them.
	if !strings.Contains(logs.String(), "allot API call") || !strings.Contains(logs.String(), "/v1/ratelimits/secret") {
		t.Fatalf("the trace output lacks the provider's API call logs; the test would prove nothing:\n%s", tail(logs.String(), 40))
	}
	if i := strings.Index(logs.String(), accToken); i >= 0 {
		t.Errorf("the token appears in the TF_LOG=trace output: ...%s...", logs.String()[max(0, i-200):i])
	}
	files, err := filepath.Glob(filepath.Join(cli.dir, "terraform.tfstate*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no state files in %s (%v)", cli.dir, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), accToken) {
			t.Errorf("the token appears in %s", filepath.Base(f))
		}
	}
}

func tail(s string, lines int) string {
	all := strings.Split(s, "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
