package provider

import (
	"context"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/allot/allot/masterd/api"
)

func testMap(values map[string]float64) types.Map {
	if values == nil {
		return types.MapNull(types.NumberType)
	}
	elems := make(map[string]attr.Value, len(values))
	for k, v := range values {
		elems[k] = numberFromFloat(v)
	}
	return types.MapValueMust(types.NumberType, elems)
}

func TestEquivalentResources(t *testing.T) {
	tests := map[string]struct {
		m    types.Map
		r    api.Resources
		want bool
	}{
		"equal":                 {testMap(map[string]float64{"cpus": 2, "mem": 1024}), api.Resources{"cpus": 2, "mem": 1024}, true},
		"below the precision":   {testMap(map[string]float64{"cpus": 0.5004}), api.Resources{"cpus": 0.5}, true},
		"rounds up":             {testMap(map[string]float64{"cpus": 0.4996}), api.Resources{"cpus": 0.5}, true},
		"at the precision":      {testMap(map[string]float64{"cpus": 0.501}), api.Resources{"cpus": 0.5}, false},
		"missing resource":      {testMap(map[string]float64{"cpus": 1}), api.Resources{"cpus": 1, "mem": 1}, false},
		"other resource":        {testMap(map[string]float64{"cpus": 1}), api.Resources{"disk": 1}, false},
		"null and empty":        {testMap(nil), api.Resources{}, true},
		"null and nil":          {testMap(nil), nil, true},
		"null and values":       {testMap(nil), api.Resources{"cpus": 1}, false},
		"unknown":               {types.MapUnknown(types.NumberType), nil, false},
		"explicit zero matters": {testMap(map[string]float64{"cpus": 0}), api.Resources{}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := equivalentResources(tc.m, tc.r); got != tc.want {
				t.Errorf("equivalentResources(%v, %v) = %v, want %v", tc.m, tc.r, got, tc.want)
			}
		})
	}
}

func TestRefreshResources(t *testing.T) {
	tests := map[string]struct {
		prior   types.Map
		current api.Resources
		want    types.Map
	}{
		"keeps the configured spelling": {testMap(map[string]float64{"cpus": 0.5004}), api.Resources{"cpus": 0.5}, testMap(map[string]float64{"cpus": 0.5004})},
		"shows drift":                   {testMap(map[string]float64{"cpus": 0.5004}), api.Resources{"cpus": 0.6}, testMap(map[string]float64{"cpus": 0.6})},
		"empty in the cluster is null":  {testMap(map[string]float64{"cpus": 1}), api.Resources{}, testMap(nil)},
		"after import":                  {testMap(nil), api.Resources{"mem": 1024}, testMap(map[string]float64{"mem": 1024})},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := refreshResources(tc.prior, tc.current); !got.Equal(tc.want) {
				t.Errorf("refreshResources(%v, %v) = %v, want %v", tc.prior, tc.current, got, tc.want)
			}
		})
	}
}

func TestNormalizedResources(t *testing.T) {
	tests := map[string]struct {
		config, state types.Map
		want          types.Map
	}{
		"plans the state when equivalent": {
			config: testMap(map[string]float64{"cpus": 0.5004}), state: testMap(map[string]float64{"cpus": 0.5}),
			want: testMap(map[string]float64{"cpus": 0.5}),
		},
		"plans the configuration when it changes": {
			config: testMap(map[string]float64{"cpus": 0.501}), state: testMap(map[string]float64{"cpus": 0.5}),
			want: testMap(map[string]float64{"cpus": 0.501}),
		},
		"create": {
			config: testMap(map[string]float64{"cpus": 0.5004}), state: testMap(nil),
			want: testMap(map[string]float64{"cpus": 0.5004}),
		},
		"removed from the configuration": {
			config: testMap(nil), state: testMap(map[string]float64{"cpus": 1}),
			want: testMap(nil),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req := planmodifier.MapRequest{Path: path.Root("limits"), ConfigValue: tc.config, StateValue: tc.state, PlanValue: tc.config}
			resp := &planmodifier.MapResponse{PlanValue: req.PlanValue}
			normalizedResources{}.PlanModifyMap(context.Background(), req, resp)
			if resp.Diagnostics.HasError() {
				t.Fatal(resp.Diagnostics)
			}
			if !resp.PlanValue.Equal(tc.want) {
				t.Errorf("planned %v, want %v", resp.PlanValue, tc.want)
			}
		})
	}
}

func TestResourceMapValidator(t *testing.T) {
	tests := map[string]struct {
		value types.Map
		want  string // a summary, or "" for valid
	}{
		"valid":         {testMap(map[string]float64{"cpus": 2.5, "mem": 1024, "gpu_count": 0}), ""},
		"null":          {testMap(nil), ""},
		"unknown":       {types.MapUnknown(types.NumberType), ""},
		"upper case":    {testMap(map[string]float64{"CPUs": 1}), "Invalid resource name"},
		"leading digit": {testMap(map[string]float64{"1cpu": 1}), "Invalid resource name"},
		"negative":      {testMap(map[string]float64{"cpus": -0.5}), "Invalid resource value"},
		"infinite":      {testMap(map[string]float64{"cpus": math.Inf(1)}), "Invalid resource value"},
		"too large":     {testMap(map[string]float64{"mem": 1e16}), "Invalid resource value"},
		"null value": {types.MapValueMust(types.NumberType, map[string]attr.Value{"cpus": types.NumberNull()}),
			"Missing resource value"},
		// 1e400, as a configuration may say: beyond a float64, which the
		// framework's Float64 type turned into "always an error in the provider".
		"beyond a float64": {types.MapValueMust(types.NumberType, map[string]attr.Value{
			"mem": types.NumberValue(new(big.Float).SetMantExp(big.NewFloat(1), 1400))}), "Invalid resource value"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req := validator.MapRequest{Path: path.Root("limits"), ConfigValue: tc.value}
			resp := &validator.MapResponse{}
			resourceMapValidator{}.ValidateMap(context.Background(), req, resp)
			if tc.want == "" {
				if resp.Diagnostics.HasError() {
					t.Fatalf("unexpected error: %v", resp.Diagnostics)
				}
				return
			}
			if resp.Diagnostics.ErrorsCount() != 1 || resp.Diagnostics.Errors()[0].Summary() != tc.want {
				t.Fatalf("diagnostics %v, want one %q", resp.Diagnostics, tc.want)
			}
			if detail := resp.Diagnostics.Errors()[0].Detail(); !strings.Contains(detail, "limits") {
				t.Errorf("detail %q does not name the attribute", detail)
			}
		})
	}
}
