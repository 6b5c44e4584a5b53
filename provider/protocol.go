package provider

import (
	"bytes"
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/defaults"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// NewProtocolServer returns the provider's protocol server: the plugin
// framework's, answering two of the calls Terraform makes for every resource
// of every plan without the framework's generic machinery when the answer is
// known to be the framework's own:
//
//   - UpgradeResourceState of a state already at the schema's version: the
//     framework decodes the stored JSON with the schema's type and encodes it
//     again, and so does this, without its per-attribute walks.
//   - PlanResourceChange of a resource whose configuration changes nothing
//     (see fastNoOpPlan).
//
// Why: at 1 000 resources the framework's per-call work (walks of the
// schema per attribute, rebuilding its attribute map at each step) was most
// of the provider's CPU in a no-op plan, which Terraform's own resources do
// not pay. Any call outside those cases, and any case where a default, a
// plan modifier or ModifyPlan would answer something else, goes to the
// framework unchanged.
func NewProtocolServer(version string) func() (tfprotov6.ProviderServer, error) {
	return func() (tfprotov6.ProviderServer, error) {
		p := New(version)().(*allotProvider)
		framework, err := providerserver.NewProtocol6WithError(p)()
		if err != nil {
			return nil, err
		}
		return &protocolServer{ProviderServer: framework, resources: fastResources(context.Background(), p)}, nil
	}
}

// protocolServer is the framework's server with the fast paths above.
type protocolServer struct {
	tfprotov6.ProviderServer
	resources map[string]*fastResource
}

// fastResource is what the fast paths need to know of a resource type,
// learned once.
type fastResource struct {
	new    func() resource.Resource
	schema schema.Schema
	typ    tftypes.Type
	// attrs is nil when the schema has something the no-op plan does not
	// handle (blocks, nested attributes, collections, write-only attributes):
	// its plans always go to the framework.
	attrs []fastAttr
}

type fastAttr struct {
	name string
	path path.Path
	attr schema.Attribute
}

func fastResources(ctx context.Context, p *allotProvider) map[string]*fastResource {
	var meta resource.MetadataResponse
	out := map[string]*fastResource{}
	for _, newResource := range p.Resources(ctx) {
		r := newResource()
		meta = resource.MetadataResponse{}
		r.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: "allot"}, &meta)
		var sr resource.SchemaResponse
		r.Schema(ctx, resource.SchemaRequest{}, &sr)
		if sr.Diagnostics.HasError() {
			continue // the framework reports it
		}
		fr := &fastResource{new: newResource, schema: sr.Schema, typ: sr.Schema.Type().TerraformType(ctx)}
		if _, ok := r.(noOpPlanner); ok && len(sr.Schema.Blocks) == 0 {
			fr.attrs = simpleAttributes(sr.Schema)
		}
		out[meta.TypeName] = fr
	}
	return out
}

// simpleAttributes lists a schema's attributes if every one is a string,
// number or bool that is not write-only, else nil.
func simpleAttributes(s schema.Schema) []fastAttr {
	attrs := make([]fastAttr, 0, len(s.Attributes))
	for name, a := range s.Attributes {
		switch a.(type) {
		case schema.StringAttribute, schema.Int64Attribute, schema.NumberAttribute, schema.BoolAttribute:
		default:
			return nil
		}
		if a.IsWriteOnly() {
			return nil
		}
		attrs = append(attrs, fastAttr{name: name, path: path.Root(name), attr: a})
	}
	return attrs
}

// noOpPlanner is a resource whose ModifyPlan does nothing, and calls
// nothing, when the planned object equals the prior state (objectResource).
type noOpPlanner interface {
	resource.ResourceWithModifyPlan
	noOpPlanDoesNothing()
}

func (r *objectResource[M, R, O]) noOpPlanDoesNothing() {}

func (s *protocolServer) UpgradeResourceState(ctx context.Context, req *tfprotov6.UpgradeResourceStateRequest) (*tfprotov6.UpgradeResourceStateResponse, error) {
	fr := s.resources[req.TypeName]
	if fr == nil || req.RawState == nil || req.RawState.JSON == nil || req.Version != fr.schema.Version {
		return s.ProviderServer.UpgradeResourceState(ctx, req)
	}
	// The framework's own passthrough for a state at the current version,
	// including its leniency for attributes the schema no longer has.
	value, err := req.RawState.UnmarshalWithOpts(fr.typ, tfprotov6.UnmarshalOpts{
		ValueFromJSONOpts: tftypes.ValueFromJSONOpts{IgnoreUndefinedAttributes: true},
	})
	if err != nil {
		return s.ProviderServer.UpgradeResourceState(ctx, req) // for its diagnostic
	}
	state, err := tfprotov6.NewDynamicValue(fr.typ, value)
	if err != nil {
		return s.ProviderServer.UpgradeResourceState(ctx, req)
	}
	return &tfprotov6.UpgradeResourceStateResponse{UpgradedState: &state}, nil
}

func (s *protocolServer) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	if resp := s.fastNoOpPlan(ctx, req); resp != nil {
		return resp, nil
	}
	return s.ProviderServer.PlanResourceChange(ctx, req)
}

// fastNoOpPlan answers the plan of a resource that Terraform proposes to
// leave as it is (the proposed new state is the prior state) when the
// framework would plan exactly that: no default differs from the prior
// value of an attribute the configuration leaves out, no plan modifier
// changes a value or asks for a replacement, ModifyPlan does nothing, and
// nothing says anything. It returns nil, for the framework to answer, in
// every other case.
func (s *protocolServer) fastNoOpPlan(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) *tfprotov6.PlanResourceChangeResponse {
	fr := s.resources[req.TypeName]
	if fr == nil || fr.attrs == nil || req.PriorState == nil || req.ProposedNewState == nil || req.Config == nil ||
		len(req.PriorPrivate) != 0 || req.ProviderMeta != nil ||
		req.PriorState.JSON != nil || req.ProposedNewState.JSON != nil || req.Config.JSON != nil ||
		!bytes.Equal(req.PriorState.MsgPack, req.ProposedNewState.MsgPack) {
		return nil
	}
	prior, err := req.PriorState.Unmarshal(fr.typ)
	if err != nil || prior.IsNull() || !prior.IsFullyKnown() {
		return nil
	}
	config, err := req.Config.Unmarshal(fr.typ)
	if err != nil || config.IsNull() {
		return nil
	}
	var priorValues, configValues map[string]tftypes.Value
	if prior.As(&priorValues) != nil || config.As(&configValues) != nil {
		return nil
	}
	state := tfsdk.State{Schema: fr.schema, Raw: prior}
	plan := tfsdk.Plan{Schema: fr.schema, Raw: prior}
	cfg := tfsdk.Config{Schema: fr.schema, Raw: config}
	for _, a := range fr.attrs {
		if !unchangedAttribute(ctx, a, priorValues[a.name], configValues[a.name], cfg, plan, state) {
			return nil
		}
	}

	// ModifyPlan is called as the framework calls it, but not configured:
	// that of objectResource uses no provider data for a no-op plan.
	mresp := resource.ModifyPlanResponse{Plan: plan}
	fr.new().(noOpPlanner).ModifyPlan(ctx, resource.ModifyPlanRequest{Config: cfg, Plan: plan, State: state}, &mresp)
	if len(mresp.Diagnostics) > 0 || len(mresp.RequiresReplace) > 0 || mresp.Deferred != nil || !mresp.Plan.Raw.Equal(prior) {
		return nil
	}
	planned := *req.PriorState
	return &tfprotov6.PlanResourceChangeResponse{PlannedState: &planned}
}

// unchangedAttribute reports whether the framework would leave attribute a
// of a no-op plan at its prior value, with no replacement and nothing to
// say: its default (applied only when the configuration leaves it out)
// equals the prior value, and so does what each plan modifier plans. The
// plan and the state given to plan modifiers are both the prior state, as
// the framework gives them for such a plan.
func unchangedAttribute(ctx context.Context, a fastAttr, prior, config tftypes.Value, cfg tfsdk.Config, plan tfsdk.Plan, state tfsdk.State) bool {
	typ := a.attr.GetType()
	priorValue, err := typ.ValueFromTerraform(ctx, prior)
	if err != nil {
		return false
	}
	configValue, err := typ.ValueFromTerraform(ctx, config)
	if err != nil {
		return false
	}
	switch at := a.attr.(type) {
	case schema.StringAttribute:
		pv, ok1 := priorValue.(basetypes.StringValuable)
		cv, ok2 := configValue.(basetypes.StringValuable)
		if !ok1 || !ok2 {
			return false
		}
		p, d1 := pv.ToStringValue(ctx)
		c, d2 := cv.ToStringValue(ctx)
		if d1.HasError() || d2.HasError() {
			return false
		}
		if at.Default != nil && c.IsNull() {
			resp := defaults.StringResponse{}
			at.Default.DefaultString(ctx, defaults.StringRequest{Path: a.path}, &resp)
			if !keeps(resp.PlanValue, p, false, len(resp.Diagnostics)) {
				return false
			}
		}
		for _, m := range at.PlanModifiers {
			resp := planmodifier.StringResponse{PlanValue: p}
			m.PlanModifyString(ctx, planmodifier.StringRequest{Path: a.path, PathExpression: a.path.Expression(),
				Config: cfg, ConfigValue: c, Plan: plan, PlanValue: p, State: state, StateValue: p}, &resp)
			if !keeps(resp.PlanValue, p, resp.RequiresReplace, len(resp.Diagnostics)) {
				return false
			}
		}
	case schema.Int64Attribute:
		pv, ok1 := priorValue.(basetypes.Int64Valuable)
		cv, ok2 := configValue.(basetypes.Int64Valuable)
		if !ok1 || !ok2 {
			return false
		}
		p, d1 := pv.ToInt64Value(ctx)
		c, d2 := cv.ToInt64Value(ctx)
		if d1.HasError() || d2.HasError() {
			return false
		}
		if at.Default != nil && c.IsNull() {
			resp := defaults.Int64Response{}
			at.Default.DefaultInt64(ctx, defaults.Int64Request{Path: a.path}, &resp)
			if !keeps(resp.PlanValue, p, false, len(resp.Diagnostics)) {
				return false
			}
		}
		for _, m := range at.PlanModifiers {
			resp := planmodifier.Int64Response{PlanValue: p}
			m.PlanModifyInt64(ctx, planmodifier.Int64Request{Path: a.path, PathExpression: a.path.Expression(),
				Config: cfg, ConfigValue: c, Plan: plan, PlanValue: p, State: state, StateValue: p}, &resp)
			if !keeps(resp.PlanValue, p, resp.RequiresReplace, len(resp.Diagnostics)) {
				return false
			}
		}
	case schema.NumberAttribute:
		pv, ok1 := priorValue.(basetypes.NumberValuable)
		cv, ok2 := configValue.(basetypes.NumberValuable)
		if !ok1 || !ok2 {
			return false
		}
		p, d1 := pv.ToNumberValue(ctx)
		c, d2 := cv.ToNumberValue(ctx)
		if d1.HasError() || d2.HasError() {
			return false
		}
		if at.Default != nil && c.IsNull() {
			resp := defaults.NumberResponse{}
			at.Default.DefaultNumber(ctx, defaults.NumberRequest{Path: a.path}, &resp)
			if !keeps(resp.PlanValue, p, false, len(resp.Diagnostics)) {
				return false
			}
		}
		for _, m := range at.PlanModifiers {
			resp := planmodifier.NumberResponse{PlanValue: p}
			m.PlanModifyNumber(ctx, planmodifier.NumberRequest{Path: a.path, PathExpression: a.path.Expression(),
				Config: cfg, ConfigValue: c, Plan: plan, PlanValue: p, State: state, StateValue: p}, &resp)
			if !keeps(resp.PlanValue, p, resp.RequiresReplace, len(resp.Diagnostics)) {
				return false
			}
		}
	case schema.BoolAttribute:
		pv, ok1 := priorValue.(basetypes.BoolValuable)
		cv, ok2 := configValue.(basetypes.BoolValuable)
		if !ok1 || !ok2 {
			return false
		}
		p, d1 := pv.ToBoolValue(ctx)
		c, d2 := cv.ToBoolValue(ctx)
		if d1.HasError() || d2.HasError() {
			return false
		}
		if at.Default != nil && c.IsNull() {
			resp := defaults.BoolResponse{}
			at.Default.DefaultBool(ctx, defaults.BoolRequest{Path: a.path}, &resp)
			if !keeps(resp.PlanValue, p, false, len(resp.Diagnostics)) {
				return false
			}
		}
		for _, m := range at.PlanModifiers {
			resp := planmodifier.BoolResponse{PlanValue: p}
			m.PlanModifyBool(ctx, planmodifier.BoolRequest{Path: a.path, PathExpression: a.path.Expression(),
				Config: cfg, ConfigValue: c, Plan: plan, PlanValue: p, State: state, StateValue: p}, &resp)
			if !keeps(resp.PlanValue, p, resp.RequiresReplace, len(resp.Diagnostics)) {
				return false
			}
		}
	default:
		return false
	}
	return true
}

// keeps reports whether a default or a plan modifier left the value as it
// was, with no replacement and nothing to say.
func keeps(got, want attr.Value, requiresReplace bool, diagnostics int) bool {
	return !requiresReplace && diagnostics == 0 && got != nil && got.Equal(want)
}
