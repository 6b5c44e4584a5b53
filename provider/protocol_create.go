package provider

import (
	"cmp"
	"context"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// The create fast paths: Terraform plans each new resource twice (in the
// plan, then again just before applying it) and applies it once. For a
// resource of a simple schema (see simpleAttributes) the framework's
// generic work on those calls (transforms walking the value per attribute,
// schema lookups by path, its logging contexts) cost more CPU than the
// provider's own work, dry run and write included.

// fastCreatePlan answers the plan of a create, with no private data, as
// the framework plans it: the proposed state, with each attribute's default
// where the configuration leaves the attribute out, unknown for the other
// computed attributes it leaves out; then each attribute's plan modifiers;
// then the resource's ModifyPlan (its dry run), whose answer is the
// response. It returns nil, having called nothing outside the provider, for
// the framework to answer when a default says anything or a plan modifier
// asks for a replacement or says anything, and in every case the fast
// paths do not cover.
func (s *protocolServer) fastCreatePlan(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) *tfprotov6.PlanResourceChangeResponse {
	fr, data := s.createTarget(req.TypeName, req.PriorState, req.PriorPrivate, req.ProviderMeta, req.PriorIdentity,
		req.ProposedNewState, req.Config)
	if fr == nil {
		return nil
	}
	_, proposedValues, ok := objectValue(fr, req.ProposedNewState)
	if !ok {
		return nil
	}
	config, configValues, ok := objectValue(fr, req.Config)
	if !ok {
		return nil
	}

	// Defaults, then unknown for the computed attributes left out.
	var err error
	planned := make(map[string]tftypes.Value, len(fr.attrs))
	configAttrs := make([]attr.Value, len(fr.attrs))
	for i, a := range fr.attrs {
		value := proposedValues[a.name]
		c, ok := attributeValue(ctx, a, configValues[a.name])
		if !ok {
			return nil
		}
		configAttrs[i] = c
		if c.IsNull() {
			if d, has, ok := attributeDefault(ctx, a); has {
				if !ok {
					return nil
				}
				if value, err = d.ToTerraformValue(ctx); err != nil {
					return nil
				}
			} else if a.attr.IsComputed() {
				value = tftypes.NewValue(value.Type(), tftypes.UnknownValue)
			}
		}
		planned[a.name] = value
	}

	// Plan modifiers: those of every attribute see the plan as it was
	// before any of them ran, as the framework gives it.
	cfg := tfsdk.Config{Schema: fr.schema, Raw: config}
	plan := tfsdk.Plan{Schema: fr.schema, Raw: tftypes.NewValue(fr.typ, planned)}
	state := tfsdk.State{Schema: fr.schema, Raw: tftypes.NewValue(fr.typ, nil)}
	modified := make(map[string]tftypes.Value, len(fr.attrs))
	for i, a := range fr.attrs {
		value, ok := attributeValue(ctx, a, planned[a.name])
		if !ok {
			return nil
		}
		null, ok := attributeValue(ctx, a, tftypes.NewValue(planned[a.name].Type(), nil))
		if !ok {
			return nil
		}
		if value, ok = modifyAttribute(ctx, a, value, configAttrs[i], null, cfg, plan, state); !ok {
			return nil
		}
		if modified[a.name], err = value.ToTerraformValue(ctx); err != nil {
			return nil
		}
	}

	r, ok := configuredResource(ctx, fr, data)
	if !ok {
		return nil
	}
	plan.Raw = tftypes.NewValue(fr.typ, modified)
	mresp := resource.ModifyPlanResponse{Plan: plan, RequiresReplace: path.Paths{}}
	if m, ok := r.(resource.ResourceWithModifyPlan); ok {
		mreq := resource.ModifyPlanRequest{Config: cfg, Plan: plan, State: state}
		if req.ClientCapabilities != nil {
			mreq.ClientCapabilities.DeferralAllowed = req.ClientCapabilities.DeferralAllowed
		}
		m.ModifyPlan(ctx, mreq, &mresp)
	}
	resp := &tfprotov6.PlanResourceChangeResponse{Diagnostics: protocolDiagnostics(ctx, mresp.Diagnostics)}
	if mresp.Deferred != nil {
		resp.Deferred = &tfprotov6.Deferred{Reason: tfprotov6.DeferredReason(mresp.Deferred.Reason)}
	}
	resp.PlannedState = protocolState(fr, mresp.Plan.Raw, &resp.Diagnostics)
	// The framework's order: sorted by path, without duplicates.
	replace := slices.Clone(mresp.RequiresReplace)
	slices.SortFunc(replace, func(a, b path.Path) int { return cmp.Compare(a.String(), b.String()) })
	replace = slices.CompactFunc(replace, path.Path.Equal)
	for _, p := range replace {
		if tp := protocolPath(ctx, p); tp != nil {
			resp.RequiresReplace = append(resp.RequiresReplace, tp)
		}
	}
	return resp
}

// fastCreate applies a create, with no private data, as the framework
// does: the resource's Create with the configuration and the plan, and the
// state it leaves. It returns nil, having called nothing outside the
// provider, for the framework to answer in every other case.
func (s *protocolServer) fastCreate(ctx context.Context, req *tfprotov6.ApplyResourceChangeRequest) *tfprotov6.ApplyResourceChangeResponse {
	fr, data := s.createTarget(req.TypeName, req.PriorState, req.PlannedPrivate, req.ProviderMeta, req.PlannedIdentity,
		req.PlannedState, req.Config)
	if fr == nil {
		return nil
	}
	planned, err := req.PlannedState.Unmarshal(fr.typ)
	if err != nil || planned.IsNull() {
		return nil
	}
	config, err := req.Config.Unmarshal(fr.typ)
	if err != nil {
		return nil
	}
	r, ok := configuredResource(ctx, fr, data)
	if !ok {
		return nil
	}
	null := tftypes.NewValue(fr.typ, nil)
	cresp := resource.CreateResponse{State: tfsdk.State{Schema: fr.schema, Raw: null}}
	r.Create(ctx, resource.CreateRequest{
		Config: tfsdk.Config{Schema: fr.schema, Raw: config},
		Plan:   tfsdk.Plan{Schema: fr.schema, Raw: planned},
	}, &cresp)
	if !cresp.Diagnostics.HasError() && cresp.State.Raw.Equal(null) {
		detail := "The Terraform Provider unexpectedly returned no resource state after having no errors in the resource creation. " +
			"This is always an issue in the Terraform Provider and should be reported to the provider developers.\n\n" +
			"The resource may have been successfully created, but Terraform is not tracking it. " +
			"Applying the configuration again with no other action may result in duplicate resource errors."
		if _, ok := r.(resource.ResourceWithImportState); ok {
			detail += " Import the resource if the resource was actually created and Terraform should be tracking it."
		}
		cresp.Diagnostics.AddError("Missing Resource State After Create", detail)
	}
	resp := &tfprotov6.ApplyResourceChangeResponse{Diagnostics: protocolDiagnostics(ctx, cresp.Diagnostics)}
	resp.NewState = protocolState(fr, cresp.State.Raw, &resp.Diagnostics)
	return resp
}

// createTarget is the resource and the provider data for a create call the
// fast paths answer: one of a resource they cover, on a configured
// provider, with no prior state, private data, provider meta or identity,
// and with values (the plan and the configuration) in MessagePack. It is
// nil otherwise.
func (s *protocolServer) createTarget(typeName string, prior *tfprotov6.DynamicValue, private []byte,
	meta *tfprotov6.DynamicValue, identity *tfprotov6.ResourceIdentityData, values ...*tfprotov6.DynamicValue) (*fastResource, *providerData) {
	fr := s.resources[typeName]
	data := s.provider.configured.Load()
	if fr == nil || fr.attrs == nil || data == nil || len(private) != 0 || meta != nil || identity != nil || !nullState(fr, prior) {
		return nil, nil
	}
	for _, v := range values {
		if v == nil || v.JSON != nil {
			return nil, nil
		}
	}
	return fr, data
}

// nullState reports whether a prior state is absent or null: the request
// is a create.
func nullState(fr *fastResource, state *tfprotov6.DynamicValue) bool {
	if state == nil {
		return true
	}
	if state.JSON != nil {
		return false
	}
	v, err := state.Unmarshal(fr.typ)
	return err == nil && v.IsNull()
}
