package provider

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/allot/allot/masterd/api"
)

// protocolPair is the framework's protocol server and the provider's, side
// by side, unconfigured (a plan then makes no dry run).
type protocolPair struct {
	framework tfprotov6.ProviderServer
	fast      *protocolServer
}

func newProtocolPair(t *testing.T) protocolPair {
	t.Helper()
	framework, err := providerserver.NewProtocol6WithError(New("test")())()
	if err != nil {
		t.Fatal(err)
	}
	fast, err := NewProtocolServer("test")()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, s := range []tfprotov6.ProviderServer{framework, fast} {
		if _, err := s.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	return protocolPair{framework: framework, fast: fast.(*protocolServer)}
}

// Values of the provider's attribute types, for building requests.
func tfStr(s string) tftypes.Value  { return tftypes.NewValue(tftypes.String, s) }
func tfNum(f float64) tftypes.Value { return tftypes.NewValue(tftypes.Number, big.NewFloat(f)) }

var tfNullStr, tfNullNum = tftypes.NewValue(tftypes.String, nil), tftypes.NewValue(tftypes.Number, nil)

func dynamicValue(t testing.TB, typ tftypes.Type, v tftypes.Value) *tfprotov6.DynamicValue {
	t.Helper()
	dv, err := tfprotov6.NewDynamicValue(typ, v)
	if err != nil {
		t.Fatal(err)
	}
	return &dv
}

// TestNoOpPlanAnswersAsTheFramework plans allot_rate_limit and
// allot_rate_limit_default for every combination of configured and stored
// values where Terraform proposes to change nothing, through the fast path
// and through the framework alone. Where the fast path answers, its answer
// must be the framework's; where it declines, the framework must plan a
// change, a replacement or a diagnostic (so that the fast path declines no
// plain no-op either).
func TestNoOpPlanAnswersAsTheFramework(t *testing.T) {
	ctx := context.Background()
	pair := newProtocolPair(t)
	orNull := func(set bool, v tftypes.Value, null tftypes.Value) tftypes.Value {
		if set {
			return v
		}
		return null
	}

	answered, declined := 0, 0
	check := func(t *testing.T, typeName string, config, prior map[string]tftypes.Value) {
		t.Helper()
		typ := pair.fast.resources[typeName].typ
		priorDV := dynamicValue(t, typ, tftypes.NewValue(typ, prior))
		req := &tfprotov6.PlanResourceChangeRequest{
			TypeName: typeName, PriorState: priorDV, ProposedNewState: priorDV,
			Config: dynamicValue(t, typ, tftypes.NewValue(typ, config)),
		}
		want, err := pair.framework.PlanResourceChange(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		frameworkNoOp := len(want.Diagnostics) == 0 && len(want.RequiresReplace) == 0 && want.PlannedPrivate == nil &&
			plannedEquals(t, typ, want.PlannedState, priorDV)
		got := pair.fast.fastNoOpPlan(ctx, req)
		if got == nil {
			declined++
			if frameworkNoOp {
				t.Errorf("%s config %v, prior %v: the fast path declined a plan the framework plans as no change", typeName, config, prior)
			}
			return
		}
		answered++
		if !frameworkNoOp {
			t.Errorf("%s config %v, prior %v: the fast path planned no change; the framework planned %v, replace %v, diagnostics %v",
				typeName, config, prior, want.PlannedState, want.RequiresReplace, want.Diagnostics)
		}
		if !plannedEquals(t, typ, got.PlannedState, want.PlannedState) || len(got.RequiresReplace) != 0 ||
			len(got.Diagnostics) != 0 || got.PlannedPrivate != nil {
			t.Errorf("%s: fast answer %+v, framework's %+v", typeName, got, want)
		}
		// Through the server, the same answer.
		served, err := pair.fast.PlanResourceChange(ctx, req)
		if err != nil || !plannedEquals(t, typ, served.PlannedState, want.PlannedState) {
			t.Errorf("%s: PlanResourceChange answered %+v, %v", typeName, served, err)
		}
	}

	for _, qps := range []float64{0, 2.5, 10} { // 0: qps left out
		for _, label := range []string{"", "batch"} {
			for _, burstConfig := range []int{-1, 7} { // -1: left out
				for _, capConfig := range []int{-1, 1000, 5} {
					for _, burstPrior := range []int{0, 1, 3, 7, 10, 99} {
						for _, capPrior := range []int{1000, 5, 77} {
							// Terraform proposes the configured value of an
							// argument: a prior that differs is no no-op.
							if (burstConfig >= 0 && burstPrior != burstConfig) || (capConfig >= 0 && capPrior != capConfig) {
								continue
							}
							id := "spark"
							if label != "" {
								id += "/" + label
							}
							config := map[string]tftypes.Value{
								"id": tfNullStr, "principal": tfStr("spark"), "label": orNull(label != "", tfStr(label), tfNullStr),
								"qps": orNull(qps > 0, tfNum(qps), tfNullNum), "burst": orNull(burstConfig >= 0, tfNum(float64(burstConfig)), tfNullNum),
								"capacity": orNull(capConfig >= 0, tfNum(float64(capConfig)), tfNullNum), "version": tfNullNum,
							}
							prior := map[string]tftypes.Value{
								"id": tfStr(id), "principal": tfStr("spark"), "label": config["label"], "qps": config["qps"],
								"burst": tfNum(float64(burstPrior)), "capacity": tfNum(float64(capPrior)), "version": tfNum(42),
							}
							name := fmt.Sprintf("qps=%v,label=%q,burst=%d/%d,capacity=%d/%d", qps, label, burstConfig, burstPrior, capConfig, capPrior)
							t.Run("rate_limit/"+name, func(t *testing.T) { check(t, "allot_rate_limit", config, prior) })
							defaultConfig := map[string]tftypes.Value{"id": tfNullStr, "qps": config["qps"], "burst": config["burst"],
								"capacity": config["capacity"], "version": tfNullNum}
							defaultPrior := map[string]tftypes.Value{"id": tfStr("default"), "qps": config["qps"], "burst": prior["burst"],
								"capacity": prior["capacity"], "version": tfNum(42)}
							if label == "" {
								t.Run("rate_limit_default/"+name, func(t *testing.T) {
									check(t, "allot_rate_limit_default", defaultConfig, defaultPrior)
								})
							}
						}
					}
				}
			}
		}
	}
	// Both kinds of answer must have been exercised.
	if answered == 0 || declined == 0 {
		t.Fatalf("the fast path answered %d plans and declined %d: the cases test one side only", answered, declined)
	}
	t.Logf("fast path answered %d no-op plans, declined %d plans the framework changes", answered, declined)
}

func plannedEquals(t *testing.T, typ tftypes.Type, a, b *tfprotov6.DynamicValue) bool {
	t.Helper()
	if a == nil || b == nil {
		return a == b
	}
	av, err := a.Unmarshal(typ)
	if err != nil {
		t.Fatal(err)
	}
	bv, err := b.Unmarshal(typ)
	if err != nil {
		t.Fatal(err)
	}
	return av.Equal(bv)
}

// TestUpgradeAnswersAsTheFramework upgrades stored states at the schema's
// version through the fast path and through the framework alone: the same
// state, or the same diagnostics for a state that does not fit the schema.
func TestUpgradeAnswersAsTheFramework(t *testing.T) {
	ctx := context.Background()
	pair := newProtocolPair(t)
	states := map[string][]string{
		"allot_rate_limit": {
			`{"burst":11,"capacity":1000,"id":"bench-1","label":null,"principal":"bench-1","qps":10.5,"version":123}`,
			`{"burst":0,"capacity":0,"id":"a/b","label":"b","principal":"a","qps":null,"version":1}`,
			// An attribute an older provider had is ignored; missing ones are null.
			`{"id":"x","principal":"x","removed_long_ago":true}`,
			`{"id":"x","principal":"x","qps":"not a number"}`,
			`not json`,
		},
	}
	for typeName := range pair.fast.resources {
		states[typeName] = append(states[typeName], `{}`, `{"id":"x","unknown":[1,2]}`)
	}
	for typeName, raws := range states {
		typ := pair.fast.resources[typeName].typ
		for _, raw := range raws {
			req := &tfprotov6.UpgradeResourceStateRequest{TypeName: typeName, RawState: &tfprotov6.RawState{JSON: []byte(raw)}}
			want, err := pair.framework.UpgradeResourceState(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := pair.fast.UpgradeResourceState(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if !plannedEquals(t, typ, got.UpgradedState, want.UpgradedState) || len(got.Diagnostics) != len(want.Diagnostics) {
				t.Errorf("%s %s: fast %+v, framework %+v", typeName, raw, got, want)
				continue
			}
			for i := range want.Diagnostics {
				if *got.Diagnostics[i] != *want.Diagnostics[i] {
					t.Errorf("%s %s: diagnostic %+v, framework's %+v", typeName, raw, got.Diagnostics[i], want.Diagnostics[i])
				}
			}
		}
	}
}

// TestValidationAnswersAsTheFramework validates allot_rate_limit and
// allot_rate_limit_default configurations, good and bad, through the fast
// path and through the framework alone: the fast path must answer (with no
// diagnostics) exactly the configurations the framework passes without a
// word, and the server must give the framework's diagnostics for the others.
func TestValidationAnswersAsTheFramework(t *testing.T) {
	ctx := context.Background()
	pair := newProtocolPair(t)
	unknown := func(t tftypes.Type) tftypes.Value { return tftypes.NewValue(t, tftypes.UnknownValue) }
	principals := []tftypes.Value{tfNullStr, unknown(tftypes.String), tfStr("spark"), tfStr("bad name!")}
	labels := []tftypes.Value{tfNullStr, tfStr("batch"), tfStr("")}
	qpss := []tftypes.Value{tfNullNum, unknown(tftypes.Number), tfNum(0), tfNum(2.5), tfNum(-1), tfNum(2e9)}
	bursts := []tftypes.Value{tfNullNum, unknown(tftypes.Number), tfNum(0), tfNum(1), tfNum(1 << 25)}

	silent, said := 0, 0
	check := func(typeName string, values map[string]tftypes.Value) {
		typ := pair.fast.resources[typeName].typ
		req := &tfprotov6.ValidateResourceConfigRequest{TypeName: typeName, Config: dynamicValue(t, typ, tftypes.NewValue(typ, values))}
		want, err := pair.framework.ValidateResourceConfig(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		fast := pair.fast.silentValidation(ctx, req)
		if fast != (len(want.Diagnostics) == 0) {
			t.Errorf("%s %v: fast path silent=%v, framework diagnostics %d", typeName, values, fast, len(want.Diagnostics))
		}
		if fast {
			silent++
		} else {
			said++
		}
		got, err := pair.fast.ValidateResourceConfig(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Diagnostics) != len(want.Diagnostics) {
			t.Fatalf("%s %v: %d diagnostics, framework %d", typeName, values, len(got.Diagnostics), len(want.Diagnostics))
		}
		// The framework's order follows its map of attributes: compare sorted.
		if g, w := diagnosticTexts(got.Diagnostics), diagnosticTexts(want.Diagnostics); !slices.Equal(g, w) {
			t.Errorf("%s %v: diagnostics %q, framework's %q", typeName, values, g, w)
		}
	}
	for _, principal := range principals {
		for _, label := range labels {
			for _, qps := range qpss {
				for _, burst := range bursts {
					for _, capacity := range []tftypes.Value{tfNullNum, tfNum(0), tfNum(1000), tfNum(-3)} {
						for _, id := range []tftypes.Value{tfNullStr, tfStr("set")} { // id is read-only
							check("allot_rate_limit", map[string]tftypes.Value{"id": id, "principal": principal, "label": label,
								"qps": qps, "burst": burst, "capacity": capacity, "version": tfNullNum})
							if principal.IsNull() && label.IsNull() {
								check("allot_rate_limit_default", map[string]tftypes.Value{"id": id, "qps": qps, "burst": burst,
									"capacity": capacity, "version": tfNullNum})
							}
						}
					}
				}
			}
		}
	}
	if silent == 0 || said == 0 {
		t.Fatalf("%d configurations passed and %d did not: the cases test one side only", silent, said)
	}
	t.Logf("%d configurations passed in silence, %d had diagnostics", silent, said)
}

// diagnosticTexts is each diagnostic as text, sorted.
func diagnosticTexts(diags []*tfprotov6.Diagnostic) []string {
	out := make([]string, 0, len(diags))
	for _, d := range diags {
		out = append(out, fmt.Sprintf("%s|%s|%s|%s", d.Severity, d.Attribute, d.Summary, d.Detail))
	}
	slices.Sort(out)
	return out
}

// TestReadAnswersAsTheFramework refreshes rate limits, present, labeled,
// gone, and read with a token the cluster refuses, through the fast path
// and through the framework alone: the same new state and diagnostics.
func TestReadAnswersAsTheFramework(t *testing.T) {
	c := sharedCluster(t)
	ctx := context.Background()
	qps := 5.0
	for _, put := range []func() error{
		func() error {
			_, err := c.client.PutRateLimit(ctx, "protocol-read", api.RateLimitRequest{QPS: &qps}, api.WriteOptions{})
			return err
		},
		func() error {
			_, err := c.client.PutLabeledRateLimit(ctx, "protocol-read", "batch", api.RateLimitRequest{QPS: &qps}, api.WriteOptions{})
			return err
		},
	} {
		if err := put(); err != nil {
			t.Fatal(err)
		}
	}
	for _, token := range []string{accToken, "not-the-token"} {
		pair := newConfiguredPair(t, c.Addresses(), token)
		limit := func(principal, label string, qps float64) map[string]tftypes.Value {
			l := tfNullStr
			id := principal
			if label != "" {
				l, id = tfStr(label), principal+"/"+label
			}
			return map[string]tftypes.Value{"id": tfStr(id), "principal": tfStr(principal), "label": l, "qps": tfNum(qps),
				"burst": tfNum(9), "capacity": tfNum(1000), "version": tfNum(1)}
		}
		cases := []struct {
			typeName string
			state    map[string]tftypes.Value
		}{
			{"allot_rate_limit", limit("protocol-read", "", 5)},
			{"allot_rate_limit", limit("protocol-read", "", 7)}, // changed outside Terraform
			{"allot_rate_limit", limit("protocol-read", "batch", 5)},
			{"allot_rate_limit", limit("protocol-gone", "", 5)},
			{"allot_rate_limit_default", map[string]tftypes.Value{"id": tfStr("default"), "qps": tfNum(3), "burst": tfNum(3),
				"capacity": tfNum(1000), "version": tfNum(1)}},
		}
		for _, tc := range cases {
			typ := pair.fast.resources[tc.typeName].typ
			req := &tfprotov6.ReadResourceRequest{TypeName: tc.typeName, CurrentState: dynamicValue(t, typ, tftypes.NewValue(typ, tc.state))}
			want, err := pair.framework.ReadResource(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			got := pair.fast.fastRead(ctx, req)
			if got == nil {
				t.Fatalf("%s %v: the fast path declined", tc.typeName, tc.state)
			}
			if !plannedEquals(t, typ, got.NewState, want.NewState) || got.Private != nil || want.Private != nil ||
				got.Deferred != nil || want.Deferred != nil {
				t.Errorf("token %q, %s %v: fast %+v, framework %+v", token, tc.typeName, tc.state, got, want)
			}
			if g, w := diagnosticTexts(got.Diagnostics), diagnosticTexts(want.Diagnostics); !slices.Equal(g, w) {
				t.Errorf("token %q, %s %v: diagnostics %q, framework's %q", token, tc.typeName, tc.state, g, w)
			}
			if token != accToken && len(want.Diagnostics) == 0 {
				t.Errorf("a refused token read %s without a diagnostic", tc.typeName)
			}
		}
	}
}
