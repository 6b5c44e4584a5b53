package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/allot/allot/masterd/api"
)

// These tests run the real terraform binary without a cluster: what they
// check fails at validation, at Configure or at import, before any call.

// offlineProvider points at an address where nothing listens, with
// strict_plan off: a plan that reached the cluster would only warn.
const offlineProvider = `
provider "allot" {
  addresses = ["http://127.0.0.1:1"]
  timeout   = "1s"
}
`

func unitTest(t *testing.T, steps ...resource.TestStep) {
	t.Helper()
	resource.UnitTest(t, resource.TestCase{ProtoV6ProviderFactories: providerFactories(nil), Steps: steps})
}

func expectConfigError(config, pattern string) resource.TestStep {
	return resource.TestStep{Config: offlineProvider + config, PlanOnly: true, ExpectError: regexp.MustCompile(pattern)}
}

func TestACLPolicyResource_validation(t *testing.T) {
	policy := func(name, rules string) string {
		return fmt.Sprintf(`
resource "allot_acl_policy" "test" {
  name  = %q
  rules = [%s]
}
`, name, rules)
	}
	unitTest(t,
		expectConfigError(policy("ops", `{ object = "quotas", access = "read" }`),
			`(?s)Invalid ACL rule.*rules\[0\]\.object: "quotas" is not an ACL object`),
		expectConfigError(policy("ops", `{ object = "quota", access = "read" }, { object = "framework", access = "write" }`),
			`(?s)Invalid ACL rule.*rules\[1\]\.access: framework takes register, not "write"`),
		expectConfigError(policy("ops", `{ object = "cluster", access = "read", roles = ["eng/*"] }`),
			`(?s)rules\[0\]\.roles: cluster rules take no roles`),
		expectConfigError(policy("ops", `{ object = "quota", access = "write", roles = ["eng/*", "fin ance"] }`),
			`(?s)rules\[0\]\.roles\[1\]: role glob "fin ance"`),
		expectConfigError(policy("ops", ``), `(?s)rules list must contain at least 1 elements`),
		expectConfigError(policy("ops/x", `{ object = "acl", access = "read" }`), `(?s)Invalid policy.*policy "ops/x" must match`),
	)
}

func TestACLTokenResource_validation(t *testing.T) {
	unitTest(t,
		expectConfigError(`
resource "allot_acl_token" "test" {
  accessor = "spark prod"
}
`, `(?s)Invalid accessor.*accessor "spark prod" must match`),
		expectConfigError(`
resource "allot_acl_token" "test" {
  accessor = "spark"
  policies = ["eng", "bad/policy"]
}
`, `(?s)Invalid policy.*policy "bad/policy" must match`),
		expectConfigError(`
resource "allot_acl_token" "test" {
  accessor  = "spark"
  principal = ""
}
`, `(?s)Invalid principal`),
		expectConfigError(`
resource "allot_acl_token" "test" {
  accessor = "spark"
  secret   = "allot_mine"
}
`, `(?s)Invalid Configuration for Read-Only Attribute`),
	)
}

func TestACLImportIDs(t *testing.T) {
	config := offlineProvider + `
resource "allot_acl_policy" "test" {
  name  = "ops"
  rules = [{ object = "acl", access = "read" }]
}
resource "allot_acl_token" "test" {
  accessor = "ops"
}
resource "allot_rate_limit" "test" {
  principal = "spark"
  label     = "batch"
}
`
	importStep := func(addr, id, pattern string) resource.TestStep {
		return resource.TestStep{Config: config, ResourceName: addr, ImportState: true, ImportStateId: id,
			ExpectError: regexp.MustCompile(pattern)}
	}
	unitTest(t,
		importStep("allot_acl_policy.test", "ops/x", `(?s)import ID of allot_acl_policy is the policy name`),
		importStep("allot_acl_token.test", "ops token", `(?s)import ID of allot_acl_token is the accessor`),
		importStep("allot_rate_limit.test", "spark/bat ch", `(?s)principal/label\s+for\s+a\s+labeled\s+limit.*label\s+"bat ch"\s+must\s+match`),
		importStep("allot_rate_limit.test", "spark/batch/x", `(?s)label\s+"batch/x"\s+must\s+match`),
	)
}

func TestRateLimitResource_LabelValidation(t *testing.T) {
	unitTest(t, expectConfigError(`
resource "allot_rate_limit" "test" {
  principal = "spark"
  label     = "batch jobs"
  qps       = 1
}
`, `(?s)Invalid label.*label "batch jobs" must match`))
}

func TestRateLimitLabelIDs(t *testing.T) {
	for _, tc := range []struct{ principal, label, id, path, what string }{
		{"spark", "", "spark", "/v1/ratelimits/spark", `the rate limit of principal "spark"`},
		{"spark", "batch", "spark/batch", "/v1/ratelimits/spark/labels/batch", `the rate limit of principal "spark" with label "batch"`},
	} {
		id := rateLimitID(tc.principal, tc.label)
		p, l := splitRateLimitID(id)
		if id != tc.id || p != tc.principal || l != tc.label || rateLimitIDPath(id) != tc.path || rateLimitIDWhat(id) != tc.what {
			t.Errorf("(%q, %q): id %q splits into (%q, %q), path %q, what %q; want %q, %q, %q",
				tc.principal, tc.label, id, p, l, rateLimitIDPath(id), rateLimitIDWhat(id), tc.id, tc.path, tc.what)
		}
	}
}

func TestACLRulesErrorPath(t *testing.T) {
	rules := []api.ACLRule{{Object: "quota", Access: "read"}, {Object: "quota", Access: "write", Roles: []string{"a", "b c"}}}
	err := api.ValidateACLRules(rules)
	if err == nil {
		t.Fatal("a glob with a space passed")
	}
	if got, want := rulesErrorPath(err), path.Root("rules").AtListIndex(1).AtName("roles"); !got.Equal(want) {
		t.Errorf("path of %q = %s, want %s", err, got, want)
	}
	if got := rulesErrorPath(api.ValidateACLRules(nil)); !got.Equal(path.Root("rules")) {
		t.Errorf("path of the empty-rules error = %s, want rules", got)
	}
}

func TestACLRulesRefreshKeepsWhatMeansTheSame(t *testing.T) {
	written := refreshRules(types.ListNull(aclRuleType), []api.ACLRule{{Object: "quota", Access: "read", Roles: []string{}}})
	// The cluster answers no roles where the configuration said roles = []:
	// the same rule, so the state keeps what was written.
	again := refreshRules(written, []api.ACLRule{{Object: "quota", Access: "read"}})
	if !again.Equal(written) {
		t.Errorf("refresh of an equivalent rule changed the state: %s -> %s", written, again)
	}
	changed := refreshRules(written, []api.ACLRule{{Object: "quota", Access: "write"}})
	rules, ok := rulesFromList(context.Background(), changed)
	if !ok || len(rules) != 1 || rules[0].Access != "write" {
		t.Errorf("refresh of a changed rule kept %s", changed)
	}
}

func TestACLTokenMatches(t *testing.T) {
	token := &api.ACLToken{Accessor: "spark", Principal: "spark", Policies: []string{"a", "b"}, Description: "d"}
	for name, tc := range map[string]struct {
		req  api.ACLTokenRequest
		want bool
	}{
		"same, principal defaulted": {api.ACLTokenRequest{Description: "d", Policies: []string{"b", "a", "a"}}, true},
		"same, principal given":     {api.ACLTokenRequest{Description: "d", Policies: []string{"a", "b"}, Principal: "spark"}, true},
		"other principal":           {api.ACLTokenRequest{Description: "d", Policies: []string{"a", "b"}, Principal: "x"}, false},
		"fewer policies":            {api.ACLTokenRequest{Description: "d", Policies: []string{"a"}}, false},
		"management":                {api.ACLTokenRequest{Description: "d", Policies: []string{"a", "b"}, Management: true}, false},
		"other description":         {api.ACLTokenRequest{Policies: []string{"a", "b"}}, false},
	} {
		if got := aclTokenMatches(token, tc.req); got != tc.want {
			t.Errorf("%s: matches = %v, want %v", name, got, tc.want)
		}
	}
}

// TestProviderTLSSettings: conflicting or incomplete TLS settings and files
// that hold no certificate fail the plan with the setting named, before any
// call; the environment variables stand in for the attributes.
func TestProviderTLSSettings(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	provider := func(settings string) string {
		return fmt.Sprintf(`
provider "allot" {
  addresses = ["https://127.0.0.1:1"]
  timeout   = "1s"
  %s
}
data "allot_cluster" "this" {}
`, settings)
	}
	step := func(settings, pattern string) resource.TestStep {
		return resource.TestStep{Config: provider(settings), PlanOnly: true, ExpectError: regexp.MustCompile(pattern)}
	}
	unitTest(t,
		step(fmt.Sprintf(`ca_file = %q
  ca_pem = "x"`, notPEM), `(?s)Invalid Attribute Combination.*cannot be specified when`),
		step(`client_cert = "c.pem"`, `(?s)Invalid Attribute Combination.*"client_key" must be specified when "client_cert" is specified`),
		step(fmt.Sprintf(`ca_file = %q`, notPEM), `(?s)Invalid allot TLS settings.*CA file\s.*ca.pem\s+holds\s+no\s+PEM\s+certificate`),
		step(fmt.Sprintf(`ca_file = %q`, filepath.Join(dir, "missing.pem")), `(?s)Invalid allot TLS settings.*read\s+CA\s+file`),
		step(`ca_pem = "not a certificate"`, `(?s)Invalid allot TLS settings.*holds\s+no\s+certificate`),
	)

	t.Setenv(EnvCACert, notPEM)
	unitTest(t, step(``, `(?s)Invalid allot TLS settings.*holds\s+no\s+PEM\s+certificate`))
}

func TestTLSFilesFromSettingsAndEnvironment(t *testing.T) {
	t.Setenv(EnvCACert, "/env/ca.pem")
	t.Setenv(EnvClientCert, "/env/cert.pem")
	t.Setenv(EnvClientKey, "/env/key.pem")
	null := types.StringNull()
	for name, tc := range map[string]struct {
		cfg  providerModel
		want api.TLSFiles
	}{
		"environment": {providerModel{CAFile: null, CAPEM: null, ClientCert: null, ClientKey: null},
			api.TLSFiles{CAFile: "/env/ca.pem", CertFile: "/env/cert.pem", KeyFile: "/env/key.pem"}},
		"settings win": {providerModel{CAFile: types.StringValue("/ca"), CAPEM: null, ClientCert: types.StringValue("/c"), ClientKey: types.StringValue("/k")},
			api.TLSFiles{CAFile: "/ca", CertFile: "/c", KeyFile: "/k"}},
		"ca_pem replaces ALLOT_CACERT": {providerModel{CAFile: null, CAPEM: types.StringValue("PEM"), ClientCert: null, ClientKey: null},
			api.TLSFiles{CAPEM: "PEM", CertFile: "/env/cert.pem", KeyFile: "/env/key.pem"}},
	} {
		if got := tlsFiles(tc.cfg); got != tc.want {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
}

// TestACLTokenMissingPolicyIsAPlanWarning: the dry run of a token that names
// a policy the cluster lacks is a warning (the plan may create the policy
// first); other refusals stay errors.
func TestACLTokenMissingPolicyIsAPlanWarning(t *testing.T) {
	missing := &api.Error{Code: api.CodeInvalidArgument, Message: "token t: policy eng does not exist",
		Details: map[string]any{"policy": "eng"}}
	if summary, detail, ok := missingPolicy(missing); !ok || summary != "ACL policy not in the cluster yet" ||
		!regexp.MustCompile(`policy "eng".*allot_acl_policy\.NAME\.name`).MatchString(detail) {
		t.Errorf("missing policy: %v %q %q", ok, summary, detail)
	}
	for _, other := range []*api.Error{
		{Code: api.CodePermissionDenied, Message: "acl write needed", Details: map[string]any{"policy": "eng"}},
		{Code: api.CodeInvalidArgument, Message: "principal: must match", Details: map[string]any{"principal": "x y"}},
	} {
		if _, _, ok := missingPolicy(other); ok {
			t.Errorf("%v passed for a missing policy", other)
		}
	}
}

// TestACLTokenSecretInState: the creating answer's secret goes into the
// state; an update (no secret in the answer) keeps the state's; a create that
// found the token already there, and a read, leave no unknown behind.
func TestACLTokenSecretInState(t *testing.T) {
	answer := &api.ACLToken{Accessor: "a", Principal: "a", Policies: []string{"p"}, Secret: "allot_new", Version: 7}
	created := aclTokenModel{Secret: types.StringUnknown()}
	aclTokenKind.written(&created, "a", answer)
	if created.Secret.ValueString() != "allot_new" || created.Version.ValueInt64() != 7 {
		t.Errorf("create: secret %s version %s", created.Secret, created.Version)
	}

	updated := aclTokenModel{Secret: types.StringValue("allot_old")}
	aclTokenKind.written(&updated, "a", &api.ACLToken{Accessor: "a", Principal: "a", Version: 8})
	if updated.Secret.ValueString() != "allot_old" {
		t.Errorf("update: secret %s, want the state's", updated.Secret)
	}

	takenOver := aclTokenModel{Secret: types.StringUnknown()}
	aclTokenKind.written(&takenOver, "a", &api.ACLToken{Accessor: "a", Principal: "a", Version: 9})
	if !takenOver.Secret.IsNull() {
		t.Errorf("a create that found the token: secret %s, want null", takenOver.Secret)
	}

	read := aclTokenModel{Secret: types.StringValue("allot_old")}
	aclTokenKind.refreshed(&read, "a", &api.ACLToken{Accessor: "a", Principal: "b", Policies: []string{"q", "p"}, Version: 10})
	if read.Secret.ValueString() != "allot_old" || read.Principal.ValueString() != "b" || len(read.Policies.Elements()) != 2 {
		t.Errorf("read: %+v", read)
	}
	imported := aclTokenModel{Secret: types.StringNull()}
	aclTokenKind.refreshed(&imported, "a", &api.ACLToken{Accessor: "a", Principal: "a"})
	if !imported.Secret.IsNull() {
		t.Errorf("import: secret %s, want null", imported.Secret)
	}

	req, ok := (&aclTokenModel{Policies: types.SetNull(types.StringType)}).request()
	if !ok || req.Policies == nil || len(req.Policies) != 0 {
		t.Errorf("request without policies: %+v, %v; want an empty list", req, ok)
	}
}
