package provider

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// TestAccTLS_plan runs plans and applies against a masterd with an HTTPS API
// that verifies its clients (-tls-verify-incoming), with certificates from
// the cluster's CA as `masterd tls` makes them. Without the CA the server is
// not trusted; without a client certificate the server refuses the
// connection; with both, from the settings or the environment, the plan is
// checked against the cluster and applies.
func TestAccTLS_plan(t *testing.T) {
	skipUnlessAcc(t)
	c := testcluster.Start(t, 1, testcluster.WithTLS(), testcluster.WithOperatorToken(accToken),
		testcluster.WithArgs("-tls-verify-incoming"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	files := c.ClientTLS()
	client, err := api.NewClient(c.Addresses(), accToken)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := files.Config()
	if err != nil {
		t.Fatal(err)
	}
	client.SetTLS(cfg)
	cert, key, err := c.IssueCert("terraform", nil, false)
	if err != nil {
		t.Fatal(err)
	}

	config := func(settings, role string) string {
		return fmt.Sprintf(`
provider "allot" {
  addresses   = [%q]
  token       = %q
  timeout     = "5s"
  strict_plan = true
  %s
}
resource "allot_quota" "tls" {
  role   = %q
  limits = { cpus = 1 }
}
`, c.Address(0), accToken, settings, role)
	}
	full := fmt.Sprintf(`ca_file     = %q
  client_cert = %q
  client_key  = %q`, files.CAFile, cert, key)
	checkQuota := func(role string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			_, err := client.Quota(context.Background(), role, api.ReadOptions{})
			return err
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(nil),
		Steps: []resource.TestStep{
			{
				Config:      config(``, "tls-a"),
				PlanOnly:    true,
				ExpectError: wordsInOrder("Plan not checked against the cluster", "certificate signed by unknown authority"),
			},
			{
				Config:      config(fmt.Sprintf(`ca_file = %q`, files.CAFile), "tls-a"),
				PlanOnly:    true,
				ExpectError: wordsInOrder("Plan not checked against the cluster", "certificate required"),
			},
			{
				Config: config(full, "tls-a"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("allot_quota.tls", plancheck.ResourceActionCreate)},
				},
				Check: checkQuota("tls-a"),
			},
			{
				// The CA as PEM text instead of a file.
				Config: config(fmt.Sprintf(`ca_pem      = file(%q)
  client_cert = %q
  client_key  = %q`, files.CAFile, cert, key), "tls-b"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("allot_quota.tls", plancheck.ResourceActionReplace)},
				},
				Check: checkQuota("tls-b"),
			},
		},
	})

	// The same from the environment alone.
	t.Setenv(EnvCACert, files.CAFile)
	t.Setenv(EnvClientCert, cert)
	t.Setenv(EnvClientKey, key)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(nil),
		Steps:                    []resource.TestStep{{Config: config(``, "tls-env"), Check: checkQuota("tls-env")}},
	})
}
