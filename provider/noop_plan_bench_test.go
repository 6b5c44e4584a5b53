package provider

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/allot/allot/masterd/api"
)

// BenchmarkNoOpPlan makes, through the provider's protocol server, the calls
// Terraform makes for each allot_rate_limit of a no-op `terraform plan`:
// UpgradeResourceState, ReadResource (answered from one linearizable list of
// the rate limits of a 3-server cluster, as a refresh's reads are: see
// listedReads), ValidateResourceConfig and PlanResourceChange, with the values
// Terraform sends. A plan of 1 000 resources makes each call 1 000 times, so
// its µs/op are ms of the plan's CPU. rpc=all is one resource's four calls.
// server=framework is the plugin framework's protocol server alone,
// server=allot the one main.go serves (NewProtocolServer, with its fast
// paths).
func BenchmarkNoOpPlan(b *testing.B) {
	ctx := context.Background()
	c := startCluster(b, 3)
	const principal, qps = "bench-1", 11
	v := float64(qps)
	written, err := c.client.PutRateLimit(ctx, principal, api.RateLimitRequest{QPS: &v}, api.WriteOptions{})
	if err != nil {
		b.Fatal(err)
	}

	for _, name := range []string{"framework", "allot"} {
		server := benchServer(b, name)
		b.Run("server="+name, func(b *testing.B) { benchmarkNoOpPlan(ctx, b, server, c.Addresses(), principal, qps, written) })
	}
}

// benchServer is the protocol server of server=allot (the one main.go
// serves) or of server=framework (the plugin framework's alone).
func benchServer(b *testing.B, name string) tfprotov6.ProviderServer {
	newServer := NewProtocolServer("bench")
	if name == "framework" {
		newServer = providerserver.NewProtocol6WithError(New("bench")())
	}
	server, err := newServer()
	if err != nil {
		b.Fatal(err)
	}
	return server
}

func benchmarkNoOpPlan(ctx context.Context, b *testing.B, server tfprotov6.ProviderServer, addresses []string, principal string, qps int64, written *api.RateLimit) {
	schemas, err := server.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		b.Fatal(err)
	}
	configureProvider(ctx, b, server, schemas.Provider, addresses)

	typ := schemas.ResourceSchemas["allot_rate_limit"].ValueType()
	object := func(values map[string]tftypes.Value) *tfprotov6.DynamicValue {
		return dynamicValue(b, typ, tftypes.NewValue(typ, values))
	}
	// The state as the apply stored it, and the configuration: principal
	// and qps, every other attribute left out.
	state := object(map[string]tftypes.Value{
		"id": tfStr(principal), "principal": tfStr(principal), "label": tfNullStr, "qps": tfNum(float64(qps)),
		"burst": tfNum(float64(written.Burst)), "capacity": tfNum(float64(written.Capacity)), "version": tfNum(float64(written.Version)),
	})
	config := object(map[string]tftypes.Value{
		"id": tfNullStr, "principal": tfStr(principal), "label": tfNullStr, "qps": tfNum(float64(qps)),
		"burst": tfNullNum, "capacity": tfNullNum, "version": tfNullNum,
	})
	rawState := &tfprotov6.RawState{JSON: fmt.Appendf(nil,
		`{"burst":%d,"capacity":%d,"id":%q,"label":null,"principal":%q,"qps":%d,"version":%d}`,
		written.Burst, written.Capacity, principal, principal, qps, written.Version)}

	rpcs := []struct {
		name string
		call func() ([]*tfprotov6.Diagnostic, error)
	}{
		{"upgrade", func() ([]*tfprotov6.Diagnostic, error) {
			resp, err := server.UpgradeResourceState(ctx, &tfprotov6.UpgradeResourceStateRequest{
				TypeName: "allot_rate_limit", RawState: rawState})
			return resp.Diagnostics, err
		}},
		{"read", func() ([]*tfprotov6.Diagnostic, error) {
			resp, err := server.ReadResource(ctx, &tfprotov6.ReadResourceRequest{TypeName: "allot_rate_limit", CurrentState: state})
			return resp.Diagnostics, err
		}},
		{"validate", func() ([]*tfprotov6.Diagnostic, error) {
			resp, err := server.ValidateResourceConfig(ctx, &tfprotov6.ValidateResourceConfigRequest{
				TypeName: "allot_rate_limit", Config: config})
			return resp.Diagnostics, err
		}},
		{"plan", func() ([]*tfprotov6.Diagnostic, error) {
			// Nothing changed: the proposed new state is the prior state.
			resp, err := server.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{
				TypeName: "allot_rate_limit", PriorState: state, ProposedNewState: state, Config: config})
			if err == nil && len(resp.RequiresReplace) > 0 {
				err = fmt.Errorf("a no-op plan requires replacement of %v", resp.RequiresReplace)
			}
			return resp.Diagnostics, err
		}},
	}
	run := func(b *testing.B, calls func() error) {
		b.ReportAllocs()
		for b.Loop() {
			if err := calls(); err != nil {
				b.Fatal(err)
			}
		}
	}
	check := func(diags []*tfprotov6.Diagnostic, err error) error {
		if err != nil {
			return err
		}
		return diagnosticsError(diags)
	}
	for _, rpc := range rpcs {
		b.Run("rpc="+rpc.name, func(b *testing.B) { run(b, func() error { return check(rpc.call()) }) })
	}
	b.Run("rpc=all", func(b *testing.B) {
		run(b, func() error {
			for _, rpc := range rpcs {
				if err := check(rpc.call()); err != nil {
					return fmt.Errorf("%s: %w", rpc.name, err)
				}
			}
			return nil
		})
	})
}

// configureProvider configures server with addresses and the acceptance
// tests' token, every other provider attribute left out.
func configureProvider(ctx context.Context, b testing.TB, server tfprotov6.ProviderServer, schema *tfprotov6.Schema, addresses []string) {
	configureProviderWithToken(ctx, b, server, schema, addresses, accToken)
}

func configureProviderWithToken(ctx context.Context, b testing.TB, server tfprotov6.ProviderServer, schema *tfprotov6.Schema, addresses []string, token string) {
	b.Helper()
	typ := schema.ValueType().(tftypes.Object)
	values := map[string]tftypes.Value{}
	for name, t := range typ.AttributeTypes {
		values[name] = tftypes.NewValue(t, nil)
	}
	list := make([]tftypes.Value, 0, len(addresses))
	for _, a := range addresses {
		list = append(list, tftypes.NewValue(tftypes.String, a))
	}
	values["addresses"] = tftypes.NewValue(typ.AttributeTypes["addresses"], list)
	values["token"] = tftypes.NewValue(tftypes.String, token)
	config, err := tfprotov6.NewDynamicValue(typ, tftypes.NewValue(typ, values))
	if err != nil {
		b.Fatal(err)
	}
	resp, err := server.ConfigureProvider(ctx, &tfprotov6.ConfigureProviderRequest{Config: &config})
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range resp.Diagnostics {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			b.Fatalf("configure: %s: %s", d.Summary, d.Detail)
		}
	}
}
