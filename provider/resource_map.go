package provider

import (
	"context"
	"fmt"
	"math"
	"math/big"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/allot/allot/masterd/api"
)

// A resource map such as { cpus = 2.5, mem = 1024 } is a map of numbers,
// not of float64s: the framework turns a number too large for a float64
// (1e400 in a configuration) into an error it calls "always an error in the
// provider". A number reaches the validators as it was written, and they
// say what is wrong with it.

// resourceMapDescription is appended to the description of every resource map.
const resourceMapDescription = " Resource names match `^[a-z][a-z0-9_]*$` (`cpus` in cores, `mem` and `disk` in MiB); " +
	"values are finite, not negative, and stored rounded to 0.001, so a configured `0.5004` " +
	"is the same as the stored `0.5` and shows no difference in plans."

// numberValue is a known number as a float64; ok is false when it is beyond
// the float64 range (the validators report it, so it never reaches a request).
func numberValue(n types.Number) (v float64, ok bool) {
	bf := n.ValueBigFloat()
	if bf == nil {
		return 0, false
	}
	v, _ = bf.Float64()
	return v, !math.IsInf(v, 0)
}

// numberFromFloat is a number read from the cluster.
func numberFromFloat(v float64) types.Number { return types.NumberValue(big.NewFloat(v)) }

// refreshNumber is the value Read stores for a number: the prior state when
// it is the same float64, so that a configured 0.1 (which Terraform holds with
// more precision than a float64) shows no difference from the cluster's 0.1.
func refreshNumber(prior types.Number, current float64) types.Number {
	if v, ok := numberValue(prior); ok && !prior.IsUnknown() && v == current {
		return prior
	}
	return numberFromFloat(current)
}

// resourcesFromMap converts a known resource map; null becomes nil.
func resourcesFromMap(m types.Map) (api.Resources, diag.Diagnostics) {
	var diags diag.Diagnostics
	if m.IsNull() || m.IsUnknown() {
		return nil, diags
	}
	out := make(api.Resources, len(m.Elements()))
	for name, elem := range m.Elements() {
		n, ok := elem.(types.Number)
		v, fits := numberValue(n)
		if !ok || n.IsUnknown() || !fits {
			diags.AddError("Invalid resource value", fmt.Sprintf("Resource %q has no usable value: %v.", name, elem))
			continue
		}
		out[name] = v
	}
	return out, diags
}

// mapFromResources converts a resource map read from the cluster; an empty
// map becomes null, the spelling of "nothing configured".
func mapFromResources(r api.Resources) types.Map {
	if len(r) == 0 {
		return types.MapNull(types.NumberType)
	}
	elems := make(map[string]attr.Value, len(r))
	for name, v := range r {
		elems[name] = numberFromFloat(v)
	}
	return types.MapValueMust(types.NumberType, elems)
}

// equivalentResources reports whether a resource map from Terraform and one
// from the cluster are the same once rounded as the cluster stores values.
// Null, unknown and empty maps are equivalent only to an empty map.
func equivalentResources(m types.Map, r api.Resources) bool {
	if m.IsUnknown() {
		return false
	}
	elems := m.Elements()
	if len(elems) != len(r) {
		return false
	}
	for name, elem := range elems {
		n, ok := elem.(types.Number)
		if !ok || n.IsNull() || n.IsUnknown() {
			return false
		}
		v, fits := numberValue(n)
		want, ok := r[name]
		if !ok || !fits || api.RoundScalar(v) != api.RoundScalar(want) {
			return false
		}
	}
	return true
}

// refreshResources is the value Read stores for a resource map: the prior
// state when it is equivalent to what the cluster holds, so that a configured
// 0.5004 stays 0.5004 in the state while the cluster stores 0.5, and the
// cluster's value otherwise, so that real drift shows in the next plan.
func refreshResources(prior types.Map, current api.Resources) types.Map {
	if !prior.IsUnknown() && equivalentResources(prior, current) {
		return prior
	}
	return mapFromResources(current)
}

// resourceMapValidator checks resource names and values offline with the
// same rules the cluster applies, so that a bad value fails at validate time
// instead of in the middle of an apply.
type resourceMapValidator struct{}

var _ validator.Map = resourceMapValidator{}

func (resourceMapValidator) Description(context.Context) string {
	return "resource names match ^[a-z][a-z0-9_]*$ and values are finite and not negative"
}

func (v resourceMapValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (resourceMapValidator) ValidateMap(_ context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for name, elem := range req.ConfigValue.Elements() {
		p := req.Path.AtMapKey(name)
		if err := api.ValidateResourceName(name); err != nil {
			resp.Diagnostics.AddAttributeError(p, "Invalid resource name",
				fmt.Sprintf("Resource %q of %s: %v.", name, req.Path, err))
			continue
		}
		n, ok := elem.(types.Number)
		if !ok || n.IsUnknown() {
			continue
		}
		if n.IsNull() {
			resp.Diagnostics.AddAttributeError(p, "Missing resource value",
				fmt.Sprintf("Resource %q of %s is null; give it a value or leave it out.", name, req.Path))
			continue
		}
		value, fits := numberValue(n)
		if !fits {
			resp.Diagnostics.AddAttributeError(p, "Invalid resource value",
				fmt.Sprintf("Resource %q of %s is %s: values must be finite, not negative and at most 1e15.",
					name, req.Path, n.ValueBigFloat().Text('g', 6)))
			continue
		}
		if err := (api.Resources{name: value}).Validate(req.Path.String()); err != nil {
			resp.Diagnostics.AddAttributeError(p, "Invalid resource value", fmt.Sprintf("%v.", err))
		}
	}
}

// normalizedResources plans the prior state of a resource map when the
// configuration differs from it only below the cluster's 0.001 precision.
//
// Why a plan modifier rather than a custom type with semantic equality: the
// framework applies semantic equality only when it stores what Create, Read
// and Update return, never while Terraform compares the configuration with the
// state. After an import, or after someone set 0.5 through the API, a
// configuration of 0.5004 would plan an update on every run until an apply
// with nothing to do. Terraform accepts a planned value equal to the prior
// state as "functionally equivalent to the configuration", so planning the
// prior state removes that diff; refreshResources does the same on Read.
type normalizedResources struct{}

var _ planmodifier.Map = normalizedResources{}

func (normalizedResources) Description(context.Context) string {
	return "Values equal to the state once rounded to 0.001 keep the state's value."
}

func (m normalizedResources) MarkdownDescription(ctx context.Context) string {
	return m.Description(ctx)
}

func (normalizedResources) PlanModifyMap(ctx context.Context, req planmodifier.MapRequest, resp *planmodifier.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() || req.StateValue.IsNull() || req.StateValue.IsUnknown() {
		return
	}
	state, diags := resourcesFromMap(req.StateValue)
	if diags.HasError() {
		return
	}
	if equivalentResources(req.ConfigValue, state) {
		resp.PlanValue = req.StateValue
	}
}

// checkFinite reports an error for NaN and infinities, which the cluster
// rejects and JSON cannot carry.
func checkFinite(v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("value must be finite")
	}
	return nil
}

// resourceMapValue converts a resource map for a data source, where an empty
// map reads better than null.
func resourceMapValue(r api.Resources) types.Map {
	elems := make(map[string]attr.Value, len(r))
	for name, v := range r {
		elems[name] = types.Float64Value(v)
	}
	return types.MapValueMust(types.Float64Type, elems)
}
