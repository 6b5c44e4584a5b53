package provider

import (
	"context"
	"math"
	"math/big"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func TestStringValidators(t *testing.T) {
	tests := map[string]struct {
		validator validator.String
		value     types.String
		valid     bool
	}{
		"role":                  {roleValidator{}, types.StringValue("eng"), true},
		"child role":            {roleValidator{}, types.StringValue("eng/ml.v2"), true},
		"default role":          {roleValidator{}, types.StringValue("*"), false},
		"empty role part":       {roleValidator{}, types.StringValue("eng//ml"), false},
		"dot role part":         {roleValidator{}, types.StringValue("eng/.."), false},
		"unknown role":          {roleValidator{}, types.StringUnknown(), true},
		"principal":             {nameValidator{kind: "principal"}, types.StringValue("spark@prod:1"), true},
		"principal with space":  {nameValidator{kind: "principal"}, types.StringValue("sp ark"), false},
		"principal with slash":  {nameValidator{kind: "principal"}, types.StringValue("a/b"), false},
		"empty name":            {nameValidator{kind: "reservation name"}, types.StringValue(""), false},
		"duration":              {durationValidator{}, types.StringValue("1m30s"), true},
		"duration without unit": {durationValidator{}, types.StringValue("30"), false},
		"negative duration":     {durationValidator{}, types.StringValue("-1s"), false},
		"zero duration":         {durationValidator{}, types.StringValue("0s"), false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			resp := &validator.StringResponse{}
			tc.validator.ValidateString(context.Background(), validator.StringRequest{Path: path.Root("x"), ConfigValue: tc.value}, resp)
			if got := !resp.Diagnostics.HasError(); got != tc.valid {
				t.Errorf("valid = %v, want %v (%v)", got, tc.valid, resp.Diagnostics)
			}
		})
	}
}

func TestFiniteValidator(t *testing.T) {
	weight := finiteValidator{min: 0, max: maxWeight}
	tests := map[string]struct {
		value types.Number
		valid bool
	}{
		"small":    {numberFromFloat(0.001), true},
		"max":      {numberFromFloat(maxWeight), true},
		"zero":     {numberFromFloat(0), false},
		"negative": {numberFromFloat(-1), false},
		"above":    {numberFromFloat(maxWeight + 1), false},
		"infinite": {types.NumberValue(big.NewFloat(math.Inf(1))), false},
		"1e400":    {types.NumberValue(new(big.Float).SetMantExp(big.NewFloat(1), 1400)), false},
		"-1e400":   {types.NumberValue(new(big.Float).SetMantExp(big.NewFloat(-1), 1400)), false},
		"null":     {types.NumberNull(), true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			resp := &validator.NumberResponse{}
			weight.ValidateNumber(context.Background(), validator.NumberRequest{Path: path.Root("weight"), ConfigValue: tc.value}, resp)
			if got := !resp.Diagnostics.HasError(); got != tc.valid {
				t.Errorf("valid = %v, want %v (%v)", got, tc.valid, resp.Diagnostics)
			}
		})
	}
}

func TestAddressesValidator(t *testing.T) {
	list := func(values ...attr.Value) types.List { return types.ListValueMust(types.StringType, values) }
	tests := map[string]struct {
		value types.List
		valid bool
	}{
		"one":            {list(types.StringValue("http://127.0.0.1:5050")), true},
		"several":        {list(types.StringValue("http://a:5050"), types.StringValue("https://b:5050/")), true},
		"empty":          {list(), false},
		"no scheme":      {list(types.StringValue("127.0.0.1:5050")), false},
		"other scheme":   {list(types.StringValue("tcp://127.0.0.1:5050")), false},
		"unknown member": {list(types.StringUnknown()), true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			resp := &validator.ListResponse{}
			addressesValidator{}.ValidateList(context.Background(), validator.ListRequest{Path: path.Root("addresses"), ConfigValue: tc.value}, resp)
			if got := !resp.Diagnostics.HasError(); got != tc.valid {
				t.Errorf("valid = %v, want %v (%v)", got, tc.valid, resp.Diagnostics)
			}
		})
	}
}

func TestDefaultBurstFor(t *testing.T) {
	tests := map[string]struct {
		qps  types.Number
		want int64
	}{
		"no qps":      {types.NumberNull(), 0},
		"below one":   {numberFromFloat(0.2), 1},
		"whole":       {numberFromFloat(10), 10},
		"fraction":    {numberFromFloat(55.5), 56},
		"capped":      {numberFromFloat(1e9), maxBurstOrCapacity},
		"just above":  {numberFromFloat(33.01), 34},
		"exactly one": {numberFromFloat(1), 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := defaultBurstFor(tc.qps); got != tc.want {
				t.Errorf("defaultBurstFor(%v) = %d, want %d", tc.qps, got, tc.want)
			}
		})
	}
}
