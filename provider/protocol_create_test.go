package provider

import (
	"context"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/allot/allot/masterd/api"
)

// newConfiguredPair is newProtocolPair with both servers configured for
// addresses with token.
func newConfiguredPair(t *testing.T, addresses []string, token string) protocolPair {
	t.Helper()
	pair := newProtocolPair(t)
	ctx := context.Background()
	for _, s := range []tfprotov6.ProviderServer{pair.framework, pair.fast} {
		schemas, err := s.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
		if err != nil {
			t.Fatal(err)
		}
		configureProviderWithToken(ctx, t, s, schemas.Provider, addresses, token)
	}
	return pair
}

// createConfigs are configurations of new rate limits (and of the default
// limit, without principal and label) over the values that make plans
// differ: arguments left out (defaults, computed values), unknown until
// apply, refused by the cluster, and objects the cluster already has.
func createConfigs(principals []tftypes.Value) (limits, defaults []map[string]tftypes.Value) {
	unknownNum := tftypes.NewValue(tftypes.Number, tftypes.UnknownValue)
	for _, qps := range []tftypes.Value{tfNullNum, tfNum(5), tfNum(2.5), unknownNum, tfNum(0)} {
		for _, burst := range []tftypes.Value{tfNullNum, tfNum(5), unknownNum, tfNum(0)} {
			for _, capacity := range []tftypes.Value{tfNullNum, tfNum(5), unknownNum} {
				defaults = append(defaults, map[string]tftypes.Value{"id": tfNullStr, "qps": qps, "burst": burst,
					"capacity": capacity, "version": tfNullNum})
				for _, principal := range principals {
					for _, label := range []tftypes.Value{tfNullStr, tfStr("batch")} {
						limits = append(limits, map[string]tftypes.Value{"id": tfNullStr, "principal": principal, "label": label,
							"qps": qps, "burst": burst, "capacity": capacity, "version": tfNullNum})
					}
				}
			}
		}
	}
	return limits, defaults
}

// samePlanAnswer reports how the fast answer differs from the framework's,
// or "".
func samePlanAnswer(t *testing.T, typ tftypes.Type, got, want *tfprotov6.PlanResourceChangeResponse) string {
	t.Helper()
	var diffs []string
	if !plannedEquals(t, typ, got.PlannedState, want.PlannedState) {
		diffs = append(diffs, fmt.Sprintf("planned %v, framework's %v", got.PlannedState, want.PlannedState))
	}
	if g, w := diagnosticTexts(got.Diagnostics), diagnosticTexts(want.Diagnostics); !slices.Equal(g, w) {
		diffs = append(diffs, fmt.Sprintf("diagnostics %q, framework's %q", g, w))
	}
	if g, w := fmt.Sprint(got.RequiresReplace), fmt.Sprint(want.RequiresReplace); g != w {
		diffs = append(diffs, fmt.Sprintf("replace %s, framework's %s", g, w))
	}
	if string(got.PlannedPrivate) != string(want.PlannedPrivate) || fmt.Sprint(got.Deferred) != fmt.Sprint(want.Deferred) {
		diffs = append(diffs, fmt.Sprintf("private %q deferred %v, framework's %q %v", got.PlannedPrivate, got.Deferred,
			want.PlannedPrivate, want.Deferred))
	}
	return strings.Join(diffs, "; ")
}

// TestCreatePlanAnswersAsTheFramework plans new rate limits and default
// limits through the fast path and through the framework alone, against a
// cluster (the plan's dry run), with the operator's token and with one the
// cluster refuses: the same planned state, diagnostics, replacements and
// private data. Terraform proposes the configuration for a create.
func TestCreatePlanAnswersAsTheFramework(t *testing.T) {
	c := sharedCluster(t)
	ctx := context.Background()
	qps, burst := 5.0, 7
	if _, err := c.client.PutRateLimit(ctx, "protocol-plan-exists", api.RateLimitRequest{QPS: &qps}, api.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A burst other than its default: a dry run of the configuration
	// (burst left out) instead of the plan (burst planned from qps) would
	// find it matches.
	if _, err := c.client.PutRateLimit(ctx, "protocol-plan-exists-burst", api.RateLimitRequest{QPS: &qps, Burst: &burst},
		api.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	principals := []tftypes.Value{
		tftypes.NewValue(tftypes.String, "protocol-plan-new"),
		tftypes.NewValue(tftypes.String, "protocol-plan-exists"), // exists: with the planned values, or not
		tftypes.NewValue(tftypes.String, "protocol-plan-exists-burst"),
		tftypes.NewValue(tftypes.String, tftypes.UnknownValue),
	}
	limits, defaults := createConfigs(principals)
	answered, declined := 0, 0
	for _, token := range []string{accToken, "not-the-token"} {
		pair := newConfiguredPair(t, c.Addresses(), token)
		check := func(typeName string, config map[string]tftypes.Value) {
			typ := pair.fast.resources[typeName].typ
			configDV := dynamicValue(t, typ, tftypes.NewValue(typ, config))
			// Terraform says whether it allows deferrals; the operator's
			// token's plans say yes.
			req := &tfprotov6.PlanResourceChangeRequest{TypeName: typeName, PriorState: dynamicValue(t, typ, tftypes.NewValue(typ, nil)),
				ProposedNewState: configDV, Config: configDV,
				ClientCapabilities: &tfprotov6.PlanResourceChangeClientCapabilities{DeferralAllowed: token == accToken}}
			want, err := pair.framework.PlanResourceChange(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			got := pair.fast.fastCreatePlan(ctx, req)
			if got == nil {
				declined++
				if got, err = pair.fast.PlanResourceChange(ctx, req); err != nil {
					t.Fatal(err)
				}
			} else {
				answered++
			}
			if diff := samePlanAnswer(t, typ, got, want); diff != "" {
				t.Errorf("token %q, %s %v: %s", token, typeName, config, diff)
			}
		}
		for _, config := range limits {
			check("allot_rate_limit", config)
		}
		for _, config := range defaults {
			check("allot_rate_limit_default", config)
		}
	}
	// Most creates must take the fast path, or it buys nothing.
	if answered < 4*declined {
		t.Fatalf("the fast path answered %d create plans and declined %d", answered, declined)
	}
	t.Logf("fast path answered %d create plans, declined %d", answered, declined)
}

// TestCreatePlanDeclinesWhatItDoesNotCover: a replacement's create (private
// data from the first plan), an update and an unconfigured provider go to
// the framework.
func TestCreatePlanDeclinesWhatItDoesNotCover(t *testing.T) {
	ctx := context.Background()
	config := map[string]tftypes.Value{"id": tfNullStr, "principal": tfStr("spark"), "label": tfNullStr, "qps": tfNum(5),
		"burst": tfNullNum, "capacity": tfNullNum, "version": tfNullNum}
	prior := map[string]tftypes.Value{"id": tfStr("spark"), "principal": tfStr("spark"), "label": tfNullStr, "qps": tfNum(4),
		"burst": tfNum(4), "capacity": tfNum(1000), "version": tfNum(3)}

	unconfigured := newProtocolPair(t)
	typ := unconfigured.fast.resources["allot_rate_limit"].typ
	configDV := dynamicValue(t, typ, tftypes.NewValue(typ, config))
	nullDV := dynamicValue(t, typ, tftypes.NewValue(typ, nil))
	create := &tfprotov6.PlanResourceChangeRequest{TypeName: "allot_rate_limit", PriorState: nullDV, ProposedNewState: configDV, Config: configDV}
	if unconfigured.fast.fastCreatePlan(ctx, create) != nil {
		t.Error("planned a create with an unconfigured provider")
	}

	// Declining calls nothing outside the provider: the server counts.
	var calls atomic.Int64
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "refused", http.StatusBadRequest)
	}))
	defer server.Close()
	pair := newConfiguredPair(t, []string{server.URL}, accToken)
	replacement := *create
	replacement.PriorPrivate = []byte(`{"replaces":"c3Bhcms="}`)
	update := *create
	update.PriorState = dynamicValue(t, typ, tftypes.NewValue(typ, prior))
	for name, req := range map[string]*tfprotov6.PlanResourceChangeRequest{"replacement": &replacement, "update": &update} {
		if pair.fast.fastCreatePlan(ctx, req) != nil {
			t.Errorf("%s: the fast path answered", name)
		}
	}
	applyUpdate := &tfprotov6.ApplyResourceChangeRequest{TypeName: "allot_rate_limit", PriorState: update.PriorState,
		PlannedState: configDV, Config: configDV}
	if pair.fast.fastCreate(ctx, applyUpdate) != nil {
		t.Error("applied an update as a create")
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("declining made %d calls to the cluster", n)
	}

	// A create whose dry run the cluster refuses is answered, with the
	// refusal: once the dry run is made, the fast path answers.
	resp := pair.fast.fastCreatePlan(ctx, create)
	if resp == nil || calls.Load() == 0 || len(resp.Diagnostics) == 0 || resp.Diagnostics[0].Severity != tfprotov6.DiagnosticSeverityError {
		t.Errorf("a refused dry run: answer %+v after %d calls", resp, calls.Load())
	}
}

// TestCreateAnswersAsTheFramework creates rate limits through the fast
// path and through the framework alone, each under its own principal, from
// the framework's plans: the same new state and diagnostics, up to the
// principal and the cluster's version. It covers defaults, labels, an
// object that exists, and a token the cluster refuses.
func TestCreateAnswersAsTheFramework(t *testing.T) {
	c := sharedCluster(t)
	ctx := context.Background()
	qps := 9.0
	for _, principal := range []string{"protocol-create-fw-exists", "protocol-create-fast-exists"} {
		if _, err := c.client.PutRateLimit(ctx, principal, api.RateLimitRequest{QPS: &qps}, api.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name, label    string
		qps            tftypes.Value
		burst, capLeft tftypes.Value
	}{
		{"plain", "", tfNum(5), tfNullNum, tfNullNum},
		{"set", "", tfNum(2.5), tfNum(7), tfNum(5)},
		{"counted", "", tfNullNum, tfNullNum, tfNullNum},
		{"labeled", "batch", tfNum(5), tfNullNum, tfNum(10)},
		{"exists", "", tfNum(5), tfNullNum, tfNullNum},
	}
	answered := 0
	for _, token := range []string{accToken, "not-the-token"} {
		pair := newConfiguredPair(t, c.Addresses(), token)
		typ := pair.fast.resources["allot_rate_limit"].typ
		nullDV := dynamicValue(t, typ, tftypes.NewValue(typ, nil))
		for i, tc := range cases {
			var states [2]map[string]tftypes.Value
			var diags [2][]string
			for j, side := range []string{"fw", "fast"} {
				principal := fmt.Sprintf("protocol-create-%s-%d", side, i)
				if tc.name == "exists" {
					principal = fmt.Sprintf("protocol-create-%s-exists", side)
				}
				label := tfNullStr
				if tc.label != "" {
					label = tfStr(tc.label)
				}
				config := dynamicValue(t, typ, tftypes.NewValue(typ, map[string]tftypes.Value{"id": tfNullStr,
					"principal": tfStr(principal), "label": label, "qps": tc.qps, "burst": tc.burst,
					"capacity": tc.capLeft, "version": tfNullNum}))
				plan, err := pair.framework.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{TypeName: "allot_rate_limit",
					PriorState: nullDV, ProposedNewState: config, Config: config})
				if err != nil || plan.PlannedState == nil {
					t.Fatalf("plan %s: %v %+v", tc.name, err, plan)
				}
				req := &tfprotov6.ApplyResourceChangeRequest{TypeName: "allot_rate_limit", PriorState: nullDV,
					PlannedState: plan.PlannedState, Config: config}
				var resp *tfprotov6.ApplyResourceChangeResponse
				if side == "fw" {
					resp, err = pair.framework.ApplyResourceChange(ctx, req)
				} else if resp = pair.fast.fastCreate(ctx, req); resp != nil {
					answered++
				} else {
					t.Fatalf("%s: the fast path declined a create", tc.name)
				}
				if err != nil {
					t.Fatal(err)
				}
				states[j] = createdState(t, typ, resp.NewState, principal)
				for _, d := range diagnosticTexts(resp.Diagnostics) {
					diags[j] = append(diags[j], strings.ReplaceAll(d, principal, "PRINCIPAL"))
				}
			}
			if fmt.Sprint(states[0]) != fmt.Sprint(states[1]) {
				t.Errorf("token %q, %s: state %v, framework's %v", token, tc.name, states[1], states[0])
			}
			if !slices.Equal(diags[0], diags[1]) {
				t.Errorf("token %q, %s: diagnostics %q, framework's %q", token, tc.name, diags[1], diags[0])
			}
			if (token != accToken || tc.name == "exists") != (len(diags[0]) > 0) {
				t.Errorf("token %q, %s: diagnostics %q", token, tc.name, diags[0])
			}
		}
	}
	if answered != 2*len(cases) {
		t.Fatalf("the fast path answered %d creates of %d", answered, 2*len(cases))
	}
}

// createdState is a created rate limit's state with the principal (also in
// its id) as PRINCIPAL and any known version as 1, for comparing creates
// of two principals.
func createdState(t *testing.T, typ tftypes.Type, dv *tfprotov6.DynamicValue, principal string) map[string]tftypes.Value {
	t.Helper()
	if dv == nil {
		return nil
	}
	v, err := dv.Unmarshal(typ)
	if err != nil {
		t.Fatal(err)
	}
	if v.IsNull() {
		return nil
	}
	var values map[string]tftypes.Value
	if err := v.As(&values); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"id", "principal"} {
		var s string
		if values[name].IsKnown() && !values[name].IsNull() && values[name].As(&s) == nil {
			values[name] = tftypes.NewValue(tftypes.String, strings.ReplaceAll(s, principal, "PRINCIPAL"))
		}
	}
	if values["version"].IsKnown() && !values["version"].IsNull() {
		values["version"] = tftypes.NewValue(tftypes.Number, big.NewFloat(1))
	}
	return values
}

// stateless is allot_rate_limit with a Create that succeeds without
// leaving a state.
type stateless struct{ *rateLimitResource }

func (stateless) Create(context.Context, resource.CreateRequest, *resource.CreateResponse) {}

// TestCreateWithoutStateIsAnError: a create that succeeds without a state
// gets the framework's error, as Terraform would otherwise lose the object.
func TestCreateWithoutStateIsAnError(t *testing.T) {
	server, config, null := withRateLimitResource(t, func(r *rateLimitResource) resource.Resource { return stateless{r} })
	resp := server.fastCreate(context.Background(), &tfprotov6.ApplyResourceChangeRequest{TypeName: "allot_rate_limit",
		PriorState: null, PlannedState: config, Config: config})
	if resp == nil || len(resp.Diagnostics) != 1 || resp.Diagnostics[0].Summary != "Missing Resource State After Create" ||
		!strings.Contains(resp.Diagnostics[0].Detail, "Import the resource") {
		t.Fatalf("answer %+v", resp)
	}
}

// replacing is allot_rate_limit with a ModifyPlan that asks to replace
// qps, label and qps again.
type replacing struct{ *rateLimitResource }

func (replacing) ModifyPlan(_ context.Context, _ resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	resp.RequiresReplace = append(resp.RequiresReplace, path.Root("qps"), path.Root("label"), path.Root("qps"))
}

// TestCreatePlanRequiresReplaceInTheFrameworksOrder: the replacements a
// ModifyPlan asks for come back as the framework gives them, sorted by
// path and without duplicates.
func TestCreatePlanRequiresReplaceInTheFrameworksOrder(t *testing.T) {
	server, config, null := withRateLimitResource(t, func(r *rateLimitResource) resource.Resource { return replacing{r} })
	resp := server.fastCreatePlan(context.Background(), &tfprotov6.PlanResourceChangeRequest{TypeName: "allot_rate_limit",
		PriorState: null, ProposedNewState: config, Config: config})
	if resp == nil {
		t.Fatal("the fast path declined")
	}
	if got := fmt.Sprint(resp.RequiresReplace); got != fmt.Sprint([]*tftypes.AttributePath{
		tftypes.NewAttributePath().WithAttributeName("label"), tftypes.NewAttributePath().WithAttributeName("qps")}) {
		t.Errorf("replace %s, want label then qps", got)
	}
}

// withRateLimitResource is the provider's server, configured for an
// address where nothing listens, with allot_rate_limit made by wrap; and
// the configuration of a new limit of principal spark, and a null state.
func withRateLimitResource(t *testing.T, wrap func(*rateLimitResource) resource.Resource) (server *protocolServer, config, null *tfprotov6.DynamicValue) {
	t.Helper()
	server = newConfiguredPair(t, []string{"http://127.0.0.1:1"}, accToken).fast
	fr := *server.resources["allot_rate_limit"]
	newResource := fr.new
	fr.new = func() resource.Resource { return wrap(newResource().(*rateLimitResource)) }
	server.resources["allot_rate_limit"] = &fr
	config = dynamicValue(t, fr.typ, tftypes.NewValue(fr.typ, map[string]tftypes.Value{"id": tfNullStr,
		"principal": tftypes.NewValue(tftypes.String, "spark"), "label": tfNullStr, "qps": tfNullNum, "burst": tfNullNum,
		"capacity": tfNullNum, "version": tfNullNum}))
	return server, config, dynamicValue(t, fr.typ, tftypes.NewValue(fr.typ, nil))
}
