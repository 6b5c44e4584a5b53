package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// aclCluster is a one-server cluster started with -acl, bootstrapped: a real
// masterd with a data directory (Raft log, snapshots) whose every secret the
// test knows, so that it can look for them afterwards.
type aclCluster struct {
	*testcluster.Cluster
	// operatorToken is the -operator-token-file token, bootstrap the
	// bootstrap token's secret.
	operatorToken string
	bootstrap     string
	// admin calls with the bootstrap token.
	admin *api.Client
}

// randomSecret is a secret no other run shares, so that finding it proves a
// leak of this run.
func randomSecret(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

// startACLCluster starts the server with the operator token in a file (so
// that it is in no command line, which the harness echoes to the log), debug
// logging (more lines to search) and a snapshot after every few entries (so
// that the snapshots hold the ACL state).
func startACLCluster(t *testing.T, extraArgs ...string) *aclCluster {
	t.Helper()
	skipUnlessAcc(t)
	operator := randomSecret(t, "acc-operator-")
	tokenFile := filepath.Join(t.TempDir(), "operator-token")
	if err := os.WriteFile(tokenFile, []byte(operator+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-acl", "-operator-token-file", tokenFile, "-test-hooks", "-log-level", "debug",
		"-raft-snapshot-threshold", "4", "-raft-snapshot-interval", "200ms"}, extraArgs...)
	c := testcluster.Start(t, 1, testcluster.WithArgs(args...))
	anonymous, err := api.NewClient(c.Addresses(), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The client rides out the election: bootstrap answers no_leader until
	// the server leads.
	anonymous.RetryFor = time.Minute
	boot, err := anonymous.ACLBootstrap(ctx)
	if err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	if boot.Secret == "" || !boot.Management {
		t.Fatalf("bootstrap answered %+v, want a management token with its secret", boot)
	}
	admin, err := api.NewClient(c.Addresses(), boot.Secret)
	if err != nil {
		t.Fatal(err)
	}
	return &aclCluster{Cluster: c, operatorToken: operator, bootstrap: boot.Secret, admin: admin}
}

func (c *aclCluster) providerBlock(token string) string {
	return fmt.Sprintf(`
provider "allot" {
  addresses = [%q]
  token     = %q
}
`, c.Address(0), token)
}

// client is an API client with token.
func (c *aclCluster) client(t *testing.T, token string) *api.Client {
	t.Helper()
	client, err := api.NewClient(c.Addresses(), token)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

const aclResources = `
resource "allot_acl_policy" "eng" {
  name        = "acc-eng-operators"
  description = %q
  rules = [
    { object = "quota", access = "write", roles = ["eng/*"] },
    { object = "cluster", access = "read" },
  ]
}

resource "allot_acl_token" "eng" {
  accessor    = "acc-eng-token"
  description = %q
  policies    = [allot_acl_policy.eng.name]
}
`

// stateSecret is the secret attribute of an allot_acl_token in the state.
func stateSecret(s *terraform.State, addr string) (string, error) {
	rs, ok := s.RootModule().Resources[addr]
	if !ok {
		return "", fmt.Errorf("%s is not in the state", addr)
	}
	secret := rs.Primary.Attributes["secret"]
	if secret == "" {
		return "", fmt.Errorf("%s has no secret in the state", addr)
	}
	return secret, nil
}

// TestAccACL_policyAndToken creates a policy and a token with Terraform on a
// cluster with ACLs, then calls the API with the secret from the state: what
// the policy grants succeeds, what it lacks is a 403 naming what is missing.
// An update keeps the token and its secret; an import has no secret.
func TestAccACL_policyAndToken(t *testing.T) {
	c := startACLCluster(t)
	ctx := context.Background()
	var secret string
	rec := &diagRecorder{}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(rec),
		CheckDestroy: func(*terraform.State) error {
			if _, err := c.admin.ACLToken(ctx, "acc-eng-token", api.ReadOptions{}); !api.IsNotFound(err) {
				return fmt.Errorf("token still there after destroy (err %v)", err)
			}
			if _, err := c.admin.ACLPolicy(ctx, "acc-eng-operators", api.ReadOptions{}); !api.IsNotFound(err) {
				return fmt.Errorf("policy still there after destroy (err %v)", err)
			}
			// A deleted token stops working.
			if _, err := c.client(t, secret).ACLTokenSelf(ctx); api.ErrorCode(err) != api.CodeUnauthenticated {
				return fmt.Errorf("the deleted token's secret: token/self answered %v, want unauthenticated", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: c.providerBlock(c.bootstrap) + fmt.Sprintf(aclResources, "v1", "v1"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						// The token's dry run cannot find the policy this plan creates.
						expectPlanWarning(rec, "allot_acl_token", "ACL policy not in the cluster yet", words(`names policy "acc-eng-operators"`)),
						plancheck.ExpectUnknownValue("allot_acl_token.eng", tfjsonpath.New("secret")),
						plancheck.ExpectKnownValue("allot_acl_token.eng", tfjsonpath.New("principal"), knownvalue.StringExact("acc-eng-token")),
					},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectSensitiveValue("allot_acl_token.eng", tfjsonpath.New("secret")),
					statecheck.ExpectKnownValue("allot_acl_token.eng", tfjsonpath.New("policies"),
						knownvalue.SetExact([]knownvalue.Check{knownvalue.StringExact("acc-eng-operators")})),
				},
				Check: func(s *terraform.State) error {
					var err error
					if secret, err = stateSecret(s, "allot_acl_token.eng"); err != nil {
						return err
					}
					if !strings.HasPrefix(secret, "allot_") {
						return fmt.Errorf("the secret in the state does not look like one: %d characters", len(secret))
					}
					return checkEngToken(ctx, c.client(t, secret), secret)
				},
			},
			{
				// An update in place keeps the token and its secret.
				Config: c.providerBlock(c.bootstrap) + fmt.Sprintf(aclResources, "v2", "v2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("allot_acl_token.eng", plancheck.ResourceActionUpdate),
						plancheck.ExpectResourceAction("allot_acl_policy.eng", plancheck.ResourceActionUpdate),
					},
				},
				Check: func(s *terraform.State) error {
					kept, err := stateSecret(s, "allot_acl_token.eng")
					if err != nil {
						return err
					}
					if kept != secret {
						return fmt.Errorf("the update changed the secret in the state")
					}
					tok, err := c.admin.ACLToken(ctx, "acc-eng-token", api.ReadOptions{})
					if err != nil || tok.Description != "v2" || tok.Secret != "" {
						return fmt.Errorf("token after the update: %+v, %v; want description v2 and no secret", tok, err)
					}
					return checkEngToken(ctx, c.client(t, secret), secret)
				},
			},
			{
				ResourceName:      "allot_acl_policy.eng",
				ImportState:       true,
				ImportStateId:     "acc-eng-operators",
				ImportStateVerify: true,
			},
			{
				ResourceName:            "allot_acl_token.eng",
				ImportState:             true,
				ImportStateId:           "acc-eng-token",
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"secret"},
				ImportStateCheck: func(states []*terraform.InstanceState) error {
					if len(states) != 1 {
						return fmt.Errorf("import gave %d instances", len(states))
					}
					if v, ok := states[0].Attributes["secret"]; ok && v != "" {
						return fmt.Errorf("an imported token has a secret in the state")
					}
					return nil
				},
			},
			{
				// The policy deleted behind Terraform's back: the token loses
				// its name, which the next plan shows.
				PreConfig: func() {
					if err := c.admin.DeleteACLPolicy(ctx, "acc-eng-operators", api.WriteOptions{}); err != nil {
						t.Fatalf("delete the policy behind Terraform's back: %v", err)
					}
				},
				Config:             c.providerBlock(c.bootstrap) + fmt.Sprintf(aclResources, "v2", "v2"),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PostApplyPostRefresh: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("allot_acl_policy.eng", plancheck.ResourceActionCreate),
						plancheck.ExpectResourceAction("allot_acl_token.eng", plancheck.ResourceActionUpdate),
					},
				},
			},
			{Config: c.providerBlock(c.bootstrap) + fmt.Sprintf(aclResources, "v2", "v2")},
		},
	})
}

// checkEngToken calls the API with the eng token: quotas under eng/ may be
// written, a quota of another role is refused with a 403 that names the
// capability and not the secret, and token/self answers the token.
func checkEngToken(ctx context.Context, client *api.Client, secret string) error {
	self, err := client.ACLTokenSelf(ctx)
	if err != nil {
		return fmt.Errorf("token/self with the created token: %w", err)
	}
	if self.Accessor != "acc-eng-token" || self.Principal != "acc-eng-token" || self.Secret != "" {
		return fmt.Errorf("token/self answered %+v", self)
	}
	one := 1.0
	if _, err := client.PutQuota(ctx, "eng/acc-acl", api.QuotaRequest{Limits: api.Resources{"cpus": one}}, api.WriteOptions{}); err != nil {
		return fmt.Errorf("quota of eng/acc-acl with the created token: %w", err)
	}
	if err := client.DeleteQuota(ctx, "eng/acc-acl", api.WriteOptions{}); err != nil {
		return fmt.Errorf("delete quota of eng/acc-acl with the created token: %w", err)
	}
	_, err = client.PutQuota(ctx, "finance", api.QuotaRequest{Limits: api.Resources{"cpus": one}}, api.WriteOptions{})
	if api.ErrorCode(err) != api.CodePermissionDenied {
		return fmt.Errorf("quota of finance with the created token: %v, want permission_denied", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "quota") || !strings.Contains(msg, "write") || !strings.Contains(msg, "finance") ||
		strings.Contains(msg, secret) {
		return fmt.Errorf("the 403 should name quota, write and finance, and never the secret: %q", msg)
	}
	if _, err := client.ACLPolicies(ctx, api.ReadOptions{}); api.ErrorCode(err) != api.CodePermissionDenied {
		return fmt.Errorf("list ACL policies with the created token: %v, want permission_denied", err)
	}
	return nil
}

// TestAccACL_planChecksWithTheProvidersToken: plans are dry-run with the
// provider's own token, so a change its policies do not allow fails the plan
// (not the apply), a change beyond the cluster's capacity still fails it
// with the shortfall, and an allowed one plans clean and applies.
func TestAccACL_planChecksWithTheProvidersToken(t *testing.T) {
	c := startACLCluster(t)
	ctx := context.Background()
	agent := map[string]any{"hostname": "node-1.test", "resources": api.Resources{"cpus": 2}}
	if _, err := c.admin.Do(ctx, api.Request{Method: "PUT", Path: "/v1/test/agents/node-1", Body: agent}, nil); err != nil {
		t.Fatalf("admit an agent: %v", err)
	}
	if _, err := c.admin.PutACLPolicy(ctx, "acc-eng", api.ACLPolicyRequest{Rules: []api.ACLRule{
		{Object: api.ACLObjectQuota, Access: api.ACLWrite, Roles: []string{"eng/*"}},
	}}, api.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := c.admin.PutACLToken(ctx, "acc-plan", api.ACLTokenRequest{Policies: []string{"acc-eng"}}, api.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	quota := func(role string) string {
		return c.providerBlock(tok.Secret) + fmt.Sprintf(`
resource "allot_quota" "q" {
  role   = %q
  limits = { cpus = 1 }
}
`, role)
	}
	guarantee := c.providerBlock(tok.Secret) + `
resource "allot_quota" "q" {
  role       = "eng/big"
  guarantees = { cpus = 3 }
}
`
	rec := &diagRecorder{}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(rec),
		Steps: []resource.TestStep{
			{
				Config:      quota("finance"),
				PlanOnly:    true,
				ExpectError: wordsInOrder("Apply would fail: not authorized", `planned create of the quota of role "finance"`, "permission_denied", "finance"),
			},
			{
				Config:      guarantee,
				PlanOnly:    true,
				ExpectError: wordsInOrder("Apply would fail: not enough capacity", "cpus: 3 requested by this change", "capacity 2: short by 1"),
			},
			{
				PreConfig: rec.reset,
				Config:    quota("eng/ml"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{expectNoPlanWarning(rec, "allot_quota")},
				},
				Check: func(*terraform.State) error {
					_, err := c.admin.Quota(ctx, "eng/ml", api.ReadOptions{})
					return err
				},
			},
		},
	})
}

// TestAccACL_rateLimitOnTheTokensPrincipalWarns: with ACLs the provider calls
// as its token's principal, so a limit on that principal (not "operator")
// is the one that throttles Terraform, and a limit on "operator" is not.
func TestAccACL_rateLimitOnTheTokensPrincipalWarns(t *testing.T) {
	c := startACLCluster(t)
	ctx := context.Background()
	if _, err := c.admin.PutACLPolicy(ctx, "acc-limits", api.ACLPolicyRequest{Rules: []api.ACLRule{
		{Object: api.ACLObjectRateLimit, Access: api.ACLWrite},
	}}, api.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := c.admin.PutACLToken(ctx, "acc-terraform", api.ACLTokenRequest{Principal: "acc-tf", Policies: []string{"acc-limits"}}, api.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &diagRecorder{}
	limit := func(principal string) string {
		return c.providerBlock(tok.Secret) + fmt.Sprintf(`
resource "allot_rate_limit" "test" {
  principal = %q
  qps       = 0.2
}
`, principal)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(rec),
		Steps: []resource.TestStep{
			planOnly(limit("acc-tf"), expectPlanWarning(rec, "allot_rate_limit", "Rate limit may lock Terraform out of the cluster",
				words(`The provider calls the cluster as principal "acc-tf"`))),
			func() resource.TestStep {
				s := planOnly(limit("operator"), expectNoPlanWarning(rec, "allot_rate_limit"))
				s.PreConfig = rec.reset
				return s
			}(),
		},
	})
}
