package provider

import (
	"context"
	"fmt"
	"math"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/allot/allot/masterd/api"
)

// resourceMapType is the Terraform type of a resource map such as
// { cpus = 2.5, mem = 1024 }.
var resourceMapType = types.MapType{ElemType: types.Float64Type}

// resourceMapDescription is appended to the description of every resource map.
const resourceMapDescription = " Resource names match `^[a-z][a-z0-9_]*$` (`cpus` in cores, `mem` and `disk` in MiB); " +
	"values are finite, not negative, and stored rounded to 0.001, so a configured `0.5004` " +
	"is the same as the stored `0.5` and shows no difference in plans."

// resourcesFromMap converts a known resource map; null becomes nil.
func resourcesFromMap(ctx context.Context, m types.Map) (api.Resources, diag.Diagnostics) {
	if m.IsNull() || m.IsUnknown() {
		return nil, nil
	}
	var values map[string]float64
	diags := m.ElementsAs(ctx, &values, false)
	if diags.HasError() {
		return nil, diags
	}
	return api.Resources(values), diags
}

// mapFromResources converts a resource map read from the cluster; an empty
// map becomes null, the spelling of "nothing configured".
func mapFromResources(r api.Resources) types.Map {
	if len(r) == 0 {
		return types.MapNull(types.Float64Type)
	}
	elems := make(map[string]attr.Value, len(r))
	for name, v := range r {
		elems[name] = types.Float64Value(v)
	}
	return types.MapValueMust(types.Float64Type, elems)
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
		f, ok := elem.(types.Float64)
		if !ok || f.IsNull() || f.IsUnknown() {
			return false
		}
		want, ok := r[name]
		if !ok || api.RoundScalar(f.ValueFloat64()) != api.RoundScalar(want) {
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
		f, ok := elem.(types.Float64)
		if !ok || f.IsUnknown() {
			continue
		}
		if f.IsNull() {
			resp.Diagnostics.AddAttributeError(p, "Missing resource value",
				fmt.Sprintf("Resource %q of %s is null; give it a value or leave it out.", name, req.Path))
			continue
		}
		value := f.ValueFloat64()
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
	state, diags := resourcesFromMap(ctx, req.StateValue)
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
