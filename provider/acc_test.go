package provider

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// The acceptance tests run the real terraform binary (terraform-plugin-testing
// with TF_ACC=1) against real masterd processes. Most share one 3-server
// cluster, each with its own object names; tests that need a cluster of
// their own (capacity arithmetic, a killed leader) start one.

// accToken is the operator token every test cluster runs with, so that every
// test also exercises authentication.
const accToken = "acc-operator-token-6f1d9e2c"

var shared struct {
	once    sync.Once
	cluster *accCluster
	err     error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.cluster != nil {
		shared.cluster.Stop()
	}
	if providerBinary.dir != "" {
		os.RemoveAll(providerBinary.dir)
	}
	os.Exit(code)
}

// accCluster is a running test cluster with a Go client for changes made
// behind Terraform's back.
type accCluster struct {
	*testcluster.Cluster
	client *api.Client
}

// skipUnlessAcc skips a test unless TF_ACC is set, as resource.Test does, so
// that tests which start clusters before calling it cost nothing in unit runs.
func skipUnlessAcc(t *testing.T) {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: set TF_ACC=1 to run it")
	}
}

// sharedCluster returns the 3-server cluster the acceptance tests share,
// starting it on first use. It admits no agents: tests admit their own.
func sharedCluster(t *testing.T) *accCluster {
	t.Helper()
	skipUnlessAcc(t)
	shared.once.Do(func() {
		c, err := testcluster.New(testcluster.Config{
			N:             3,
			OperatorToken: accToken,
			ExtraArgs:     []string{"-test-hooks"},
		})
		if err != nil {
			shared.err = err
			return
		}
		shared.cluster, shared.err = newAccCluster(c)
	})
	if shared.err != nil {
		t.Fatalf("shared cluster: %v", shared.err)
	}
	return shared.cluster
}

// ownCluster starts an n-server cluster for one acceptance test.
func ownCluster(t *testing.T, n int) *accCluster {
	t.Helper()
	skipUnlessAcc(t)
	return startCluster(t, n)
}

// startCluster starts an n-server cluster that tb stops when it finishes.
func startCluster(tb testing.TB, n int) *accCluster {
	tb.Helper()
	c := testcluster.Start(tb, n, testcluster.WithOperatorToken(accToken), testcluster.WithArgs("-test-hooks"))
	ac, err := newAccCluster(c)
	if err != nil {
		tb.Fatal(err)
	}
	return ac
}

func newAccCluster(c *testcluster.Cluster) (*accCluster, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.WaitLeader(ctx); err != nil {
		c.Stop()
		return nil, fmt.Errorf("wait for leader: %w", err)
	}
	client, err := api.NewClient(c.Addresses(), accToken)
	if err != nil {
		c.Stop()
		return nil, err
	}
	return &accCluster{Cluster: c, client: client}, nil
}

// providerConfig is the provider block for the cluster, listing every server.
func (c *accCluster) providerConfig() string {
	quoted := make([]string, 0, c.N())
	for _, a := range c.Addresses() {
		quoted = append(quoted, fmt.Sprintf("%q", a))
	}
	return fmt.Sprintf(`
provider "allot" {
  addresses = [%s]
  token     = %q
}
`, strings.Join(quoted, ", "), accToken)
}

// admitAgent admits an agent through the -test-hooks endpoint, as agentd's
// registration will.
func (c *accCluster) admitAgent(t *testing.T, name string, resources api.Resources) {
	t.Helper()
	body := map[string]any{"hostname": name + ".test", "resources": resources}
	_, err := c.client.Do(context.Background(), api.Request{Method: http.MethodPut, Path: "/v1/test/agents/" + name, Body: body}, nil)
	if err != nil {
		t.Fatalf("admit agent %s: %v", name, err)
	}
}

// providerFactories serves the provider in-process, as main.go serves it; rec, when not nil,
// records the diagnostics of every plan so that plan checks can assert the
// warnings, which Terraform's JSON plan does not carry.
func providerFactories(rec *diagRecorder) map[string]func() (tfprotov6.ProviderServer, error) {
	return map[string]func() (tfprotov6.ProviderServer, error){
		"allot": func() (tfprotov6.ProviderServer, error) {
			server, err := NewProtocolServer("test")()
			if err != nil || rec == nil {
				return server, err
			}
			return &recordingServer{ProviderServer: server, rec: rec}, nil
		},
	}
}

// protocolHooks run test code at a moment of the provider protocol, after
// Terraform's request and before the provider's first API call: where a
// failure or another operator's change lands between plan and apply. Each
// gets the resource or data source type; nil hooks do nothing.
type protocolHooks struct {
	beforeRead  func(dataSourceType string)
	beforeApply func(resourceType string)
}

// hookedFactories serves the provider in-process with hooks.
func hookedFactories(hooks protocolHooks) map[string]func() (tfprotov6.ProviderServer, error) {
	return map[string]func() (tfprotov6.ProviderServer, error){
		"allot": func() (tfprotov6.ProviderServer, error) {
			server, err := NewProtocolServer("test")()
			return &hookedServer{ProviderServer: server, hooks: hooks}, err
		},
	}
}

type hookedServer struct {
	tfprotov6.ProviderServer
	hooks protocolHooks
}

func (s *hookedServer) ReadDataSource(ctx context.Context, req *tfprotov6.ReadDataSourceRequest) (*tfprotov6.ReadDataSourceResponse, error) {
	if s.hooks.beforeRead != nil {
		s.hooks.beforeRead(req.TypeName)
	}
	return s.ProviderServer.ReadDataSource(ctx, req)
}

func (s *hookedServer) ApplyResourceChange(ctx context.Context, req *tfprotov6.ApplyResourceChangeRequest) (*tfprotov6.ApplyResourceChangeResponse, error) {
	if s.hooks.beforeApply != nil {
		s.hooks.beforeApply(req.TypeName)
	}
	return s.ProviderServer.ApplyResourceChange(ctx, req)
}

// diagRecorder keeps the diagnostics the provider returned from
// PlanResourceChange.
type diagRecorder struct {
	mu    sync.Mutex
	diags []recordedDiag
}

type recordedDiag struct {
	resourceType string
	diag         *tfprotov6.Diagnostic
}

func (r *diagRecorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.diags = nil
}

func (r *diagRecorder) add(resourceType string, diags []*tfprotov6.Diagnostic) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range diags {
		r.diags = append(r.diags, recordedDiag{resourceType: resourceType, diag: d})
	}
}

func (r *diagRecorder) warnings(resourceType string) []*tfprotov6.Diagnostic {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tfprotov6.Diagnostic
	for _, d := range r.diags {
		if d.resourceType == resourceType && d.diag.Severity == tfprotov6.DiagnosticSeverityWarning {
			out = append(out, d.diag)
		}
	}
	return out
}

type recordingServer struct {
	tfprotov6.ProviderServer
	rec *diagRecorder
}

func (s *recordingServer) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	resp, err := s.ProviderServer.PlanResourceChange(ctx, req)
	if resp != nil {
		s.rec.add(req.TypeName, resp.Diagnostics)
	}
	return resp, err
}

// expectPlanWarning is a plan check: the plan of a resource of resourceType
// warned with summary, and with a detail matching detail.
func expectPlanWarning(rec *diagRecorder, resourceType, summary string, detail *regexp.Regexp) plancheck.PlanCheck {
	return planWarningCheck{rec: rec, resourceType: resourceType, summary: summary, detail: detail, want: true}
}

// expectNoPlanWarning is a plan check: no plan of a resource of resourceType
// warned.
func expectNoPlanWarning(rec *diagRecorder, resourceType string) plancheck.PlanCheck {
	return planWarningCheck{rec: rec, resourceType: resourceType}
}

type planWarningCheck struct {
	rec          *diagRecorder
	resourceType string
	summary      string
	detail       *regexp.Regexp
	want         bool
}

func (c planWarningCheck) CheckPlan(_ context.Context, _ plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	warnings := c.rec.warnings(c.resourceType)
	if !c.want {
		if len(warnings) > 0 {
			resp.Error = fmt.Errorf("%s: unexpected plan warning %q: %s", c.resourceType, warnings[0].Summary, warnings[0].Detail)
		}
		return
	}
	for _, w := range warnings {
		if w.Summary == c.summary && (c.detail == nil || c.detail.MatchString(w.Detail)) {
			return
		}
	}
	var got []string
	for _, w := range warnings {
		got = append(got, fmt.Sprintf("%q: %s", w.Summary, w.Detail))
	}
	resp.Error = fmt.Errorf("%s: no plan warning %q matching %v; got %d: %s", c.resourceType, c.summary, c.detail, len(got), strings.Join(got, "; "))
}

// words matches the words in order with any whitespace between them:
// Terraform wraps diagnostics to the terminal's width.
func words(s string) *regexp.Regexp {
	parts := strings.Fields(s)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`(?s)` + strings.Join(parts, `\s+`))
}

// wordsInOrder matches each phrase, in order, anywhere after the previous one.
func wordsInOrder(phrases ...string) *regexp.Regexp {
	parts := make([]string, 0, len(phrases))
	for _, p := range phrases {
		parts = append(parts, strings.TrimPrefix(words(p).String(), "(?s)"))
	}
	return regexp.MustCompile(`(?s)` + strings.Join(parts, `.*`))
}
