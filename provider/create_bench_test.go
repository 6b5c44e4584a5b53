package provider

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// BenchmarkCreate makes, through the provider's protocol server, the two
// calls Terraform makes for each new allot_rate_limit of a `terraform
// apply` besides validation: PlanResourceChange (rpc=plan, with its dry run
// against a 3-server cluster) and ApplyResourceChange (rpc=apply, the
// acknowledged write), with the values Terraform sends. Each op of
// rpc=apply creates another rate limit. cpu-µs/op is the benchmark
// process's CPU (the provider's side of each call, without the servers'),
// which is what an apply of 1 000 resources pays twice for plans and once
// for writes; ns/op is mostly the cluster's answer. server=framework is the
// plugin framework's protocol server alone, server=allot the one main.go
// serves.
func BenchmarkCreate(b *testing.B) {
	ctx := context.Background()
	c := startCluster(b, 3)
	runs := 0
	for _, name := range []string{"framework", "allot"} {
		server := benchServer(b, name)
		schemas, err := server.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
		if err != nil {
			b.Fatal(err)
		}
		configureProvider(ctx, b, server, schemas.Provider, c.Addresses())
		typ := schemas.ResourceSchemas["allot_rate_limit"].ValueType()
		null := dynamicValue(b, typ, tftypes.NewValue(typ, nil))
		// Terraform proposes the configuration for a create: principal and
		// qps, every other attribute left out.
		config := func(principal string) *tfprotov6.DynamicValue {
			return dynamicValue(b, typ, tftypes.NewValue(typ, map[string]tftypes.Value{
				"id": tfNullStr, "principal": tfStr(principal), "label": tfNullStr, "qps": tfNum(11),
				"burst": tfNullNum, "capacity": tfNullNum, "version": tfNullNum,
			}))
		}
		plan := func(cfg *tfprotov6.DynamicValue) (*tfprotov6.PlanResourceChangeResponse, error) {
			resp, err := server.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{TypeName: "allot_rate_limit",
				PriorState: null, ProposedNewState: cfg, Config: cfg})
			if err == nil {
				err = diagnosticsError(resp.Diagnostics)
			}
			return resp, err
		}

		b.Run("server="+name+"/rpc=plan", func(b *testing.B) {
			cfg := config("bench-create-planned")
			measureCPU(b, func(int) error {
				_, err := plan(cfg)
				return err
			})
		})
		b.Run("server="+name+"/rpc=apply", func(b *testing.B) {
			// The plans are made before the clock starts, one per create,
			// each of a principal no run has created.
			runs++
			configs := make([]*tfprotov6.DynamicValue, b.N)
			plans := make([]*tfprotov6.DynamicValue, b.N)
			for i := range b.N {
				configs[i] = config(fmt.Sprintf("bench-create-%s-%d-%d", name, runs, i))
				resp, err := plan(configs[i])
				if err != nil {
					b.Fatal(err)
				}
				plans[i] = resp.PlannedState
			}
			measureCPU(b, func(i int) error {
				resp, err := server.ApplyResourceChange(ctx, &tfprotov6.ApplyResourceChangeRequest{TypeName: "allot_rate_limit",
					PriorState: null, PlannedState: plans[i], Config: configs[i]})
				if err == nil {
					err = diagnosticsError(resp.Diagnostics)
				}
				return err
			})
		})
	}
}

// measureCPU runs op b.N times and reports the process's CPU per op.
func measureCPU(b *testing.B, op func(i int) error) {
	b.ReportAllocs()
	before := processCPU(b)
	b.ResetTimer()
	for i := range b.N {
		if err := op(i); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU(b)-before).Microseconds())/float64(b.N), "cpu-µs/op")
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func diagnosticsError(diags []*tfprotov6.Diagnostic) error {
	for _, d := range diags {
		return fmt.Errorf("%s: %s: %s", d.Severity, d.Summary, d.Detail)
	}
	return nil
}
