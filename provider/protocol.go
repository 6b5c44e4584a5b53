package provider

import (
	"bytes"
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/defaults"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// NewProtocolServer returns the provider's protocol server: the plugin
// framework's, answering the calls Terraform makes for every resource of a
// plan, and for every new resource of an apply, without the framework's
// generic machinery when the answer is known to be the framework's own:
//
//   - UpgradeResourceState of a state already at the schema's version: the
//     framework decodes the stored JSON with the schema's type and encodes it
//     again, and so does this, without its per-attribute walks.
//   - ReadResource: the resource's Read, with the state decoded and encoded
//     once (see fastRead).
//   - ValidateResourceConfig of a configuration that passes (see
//     silentValidation).
//   - PlanResourceChange of a resource whose configuration changes nothing
//     (see fastNoOpPlan), or of a new resource (see fastCreatePlan).
//   - ApplyResourceChange of a new resource (see fastCreate).
//
// Why: at 1 000 resources the framework's per-call work (walks of the
// schema per attribute, rebuilding its attribute map at each step) was most
// of the provider's CPU in a no-op plan, and more than the provider's own
// work in an apply of new resources; Terraform's own resources pay
// neither. Any call outside those cases goes to the framework unchanged,
// and so does any case where the framework's generic work would answer
// something the fast path does not (see each one).
func NewProtocolServer(version string) func() (tfprotov6.ProviderServer, error) {
	return func() (tfprotov6.ProviderServer, error) {
		p := New(version)().(*allotProvider)
		framework, err := providerserver.NewProtocol6WithError(p)()
		if err != nil {
			return nil, err
		}
		return &protocolServer{ProviderServer: framework, provider: p, resources: fastResources(context.Background(), p)}, nil
	}
}

// protocolServer is the framework's server with the fast paths above.
type protocolServer struct {
	tfprotov6.ProviderServer
	provider  *allotProvider
	resources map[string]*fastResource
}

// fastResource is what the fast paths need to know of a resource type,
// learned once.
type fastResource struct {
	new    func() resource.Resource
	schema schema.Schema
	typ    tftypes.Type
	// attrs is nil when the schema has something the fast paths do not
	// handle (blocks, nested attributes, collections, custom types,
	// write-only attributes, a resource identity): then only its upgrades
	// take a fast path.
	attrs []fastAttr
}

type fastAttr struct {
	name string
	path path.Path
	attr schema.Attribute
}

func fastResources(ctx context.Context, p *allotProvider) map[string]*fastResource {
	// Resource type names are the provider's, as the framework makes them.
	var pmeta provider.MetadataResponse
	p.Metadata(ctx, provider.MetadataRequest{}, &pmeta)
	out := map[string]*fastResource{}
	for _, newResource := range p.Resources(ctx) {
		r := newResource()
		var meta resource.MetadataResponse
		r.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: pmeta.TypeName}, &meta)
		var sr resource.SchemaResponse
		r.Schema(ctx, resource.SchemaRequest{}, &sr)
		if sr.Diagnostics.HasError() {
			continue // the framework reports it
		}
		fr := &fastResource{new: newResource, schema: sr.Schema, typ: sr.Schema.Type().TerraformType(ctx)}
		_, withIdentity := r.(resource.ResourceWithIdentity)
		if _, ok := r.(objectKindResource); ok && len(sr.Schema.Blocks) == 0 && !withIdentity {
			fr.attrs = simpleAttributes(sr.Schema)
		}
		out[meta.TypeName] = fr
	}
	return out
}

// simpleAttributes lists a schema's attributes if every one is a string,
// number or bool of the framework's own type (no custom type, so no
// semantic equality) that is not write-only, else nil.
func simpleAttributes(s schema.Schema) []fastAttr {
	attrs := make([]fastAttr, 0, len(s.Attributes))
	for name, a := range s.Attributes {
		switch a := a.(type) {
		case schema.StringAttribute:
			if a.CustomType != nil {
				return nil
			}
		case schema.Int64Attribute:
			if a.CustomType != nil {
				return nil
			}
		case schema.NumberAttribute:
			if a.CustomType != nil {
				return nil
			}
		case schema.BoolAttribute:
			if a.CustomType != nil {
				return nil
			}
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

// objectKindResource is a resource built on objectResource, which the fast
// paths rely on: its ModifyPlan does nothing, and calls nothing, when the
// planned object equals the prior state; its Read uses the provider data
// and the state only (no private state); and for a create (no prior state,
// no private data) neither its ModifyPlan nor its Create sets private
// state, which the create fast paths do not carry (the framework's empty
// private state cannot be made outside it: they pass none, which reads as
// empty but cannot be written).
type objectKindResource interface {
	resource.ResourceWithModifyPlan
	resource.ResourceWithConfigure
	isObjectResource()
}

func (r *objectResource[M, R, O]) isObjectResource() {}

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
	if resp := s.fastCreatePlan(ctx, req); resp != nil {
		return resp, nil
	}
	return s.ProviderServer.PlanResourceChange(ctx, req)
}

func (s *protocolServer) ApplyResourceChange(ctx context.Context, req *tfprotov6.ApplyResourceChangeRequest) (*tfprotov6.ApplyResourceChangeResponse, error) {
	if resp := s.fastCreate(ctx, req); resp != nil {
		return resp, nil
	}
	return s.ProviderServer.ApplyResourceChange(ctx, req)
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
	prior, priorValues, ok := objectValue(fr, req.PriorState)
	if !ok || !prior.IsFullyKnown() {
		return nil
	}
	config, configValues, ok := objectValue(fr, req.Config)
	if !ok {
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
	fr.new().(objectKindResource).ModifyPlan(ctx, resource.ModifyPlanRequest{Config: cfg, Plan: plan, State: state}, &mresp)
	if len(mresp.Diagnostics) > 0 || len(mresp.RequiresReplace) > 0 || mresp.Deferred != nil || !mresp.Plan.Raw.Equal(prior) {
		return nil
	}
	planned := *req.PriorState
	return &tfprotov6.PlanResourceChangeResponse{PlannedState: &planned}
}

// objectValue is a plan's, state's or configuration's object of fr's type
// and its attributes by name; ok is false when it is null or cannot be
// read so.
func objectValue(fr *fastResource, dv *tfprotov6.DynamicValue) (v tftypes.Value, attrs map[string]tftypes.Value, ok bool) {
	v, err := dv.Unmarshal(fr.typ)
	if err != nil || v.IsNull() || v.As(&attrs) != nil {
		return v, nil, false
	}
	return v, attrs, true
}

// unchangedAttribute reports whether the framework would leave attribute a
// of a no-op plan at its prior value, with no replacement and nothing to
// say: its default (applied only when the configuration leaves it out)
// equals the prior value, and so does what its plan modifiers plan. The
// plan and the state given to plan modifiers are both the prior state, as
// the framework gives them for such a plan.
func unchangedAttribute(ctx context.Context, a fastAttr, prior, config tftypes.Value, cfg tfsdk.Config, plan tfsdk.Plan, state tfsdk.State) bool {
	p, ok := attributeValue(ctx, a, prior)
	if !ok {
		return false
	}
	c, ok := attributeValue(ctx, a, config)
	if !ok {
		return false
	}
	if c.IsNull() {
		if d, has, ok := attributeDefault(ctx, a); has && (!ok || !d.Equal(p)) {
			return false
		}
	}
	planned, ok := modifyAttribute(ctx, a, p, c, p, cfg, plan, state)
	return ok && planned.Equal(p)
}

// attributeValue is value as the framework gives attribute a's value to
// its default and plan modifiers: of the attribute's type, as its base
// type (StringValue, Int64Value, NumberValue, BoolValue).
func attributeValue(ctx context.Context, a fastAttr, value tftypes.Value) (attr.Value, bool) {
	v, err := a.attr.GetType().ValueFromTerraform(ctx, value)
	if err != nil {
		return nil, false
	}
	var diags diag.Diagnostics
	switch a.attr.(type) {
	case schema.StringAttribute:
		valuable, ok := v.(basetypes.StringValuable)
		if !ok {
			return nil, false
		}
		v, diags = valuable.ToStringValue(ctx)
	case schema.Int64Attribute:
		valuable, ok := v.(basetypes.Int64Valuable)
		if !ok {
			return nil, false
		}
		v, diags = valuable.ToInt64Value(ctx)
	case schema.NumberAttribute:
		valuable, ok := v.(basetypes.NumberValuable)
		if !ok {
			return nil, false
		}
		v, diags = valuable.ToNumberValue(ctx)
	case schema.BoolAttribute:
		valuable, ok := v.(basetypes.BoolValuable)
		if !ok {
			return nil, false
		}
		v, diags = valuable.ToBoolValue(ctx)
	default:
		return nil, false
	}
	return v, !diags.HasError()
}

// attributeDefault is the value the framework plans for attribute a when
// the configuration leaves it out: has is false when a has no default, ok
// false when the default says anything.
func attributeDefault(ctx context.Context, a fastAttr) (value attr.Value, has, ok bool) {
	switch at := a.attr.(type) {
	case schema.StringAttribute:
		if at.Default == nil {
			return nil, false, true
		}
		var resp defaults.StringResponse
		at.Default.DefaultString(ctx, defaults.StringRequest{Path: a.path}, &resp)
		return resp.PlanValue, true, len(resp.Diagnostics) == 0
	case schema.Int64Attribute:
		if at.Default == nil {
			return nil, false, true
		}
		var resp defaults.Int64Response
		at.Default.DefaultInt64(ctx, defaults.Int64Request{Path: a.path}, &resp)
		return resp.PlanValue, true, len(resp.Diagnostics) == 0
	case schema.NumberAttribute:
		if at.Default == nil {
			return nil, false, true
		}
		var resp defaults.NumberResponse
		at.Default.DefaultNumber(ctx, defaults.NumberRequest{Path: a.path}, &resp)
		return resp.PlanValue, true, len(resp.Diagnostics) == 0
	case schema.BoolAttribute:
		if at.Default == nil {
			return nil, false, true
		}
		var resp defaults.BoolResponse
		at.Default.DefaultBool(ctx, defaults.BoolRequest{Path: a.path}, &resp)
		return resp.PlanValue, true, len(resp.Diagnostics) == 0
	}
	return nil, false, false
}

// modifyAttribute runs attribute a's plan modifiers in turn, as the
// framework does, from the planned value; the values are attributeValue's.
// ok is false when one of them asks for a replacement or says anything.
func modifyAttribute(ctx context.Context, a fastAttr, planned, config, prior attr.Value, cfg tfsdk.Config, plan tfsdk.Plan, state tfsdk.State) (attr.Value, bool) {
	// The framework gives the plan modifiers of a top-level attribute no
	// path expression (only validators get one): the same here, so that a
	// modifier that resolves paths from it resolves the same ones.
	var expr path.Expression
	switch at := a.attr.(type) {
	case schema.StringAttribute:
		req := planmodifier.StringRequest{Path: a.path, PathExpression: expr, Config: cfg, ConfigValue: config.(basetypes.StringValue),
			Plan: plan, PlanValue: planned.(basetypes.StringValue), State: state, StateValue: prior.(basetypes.StringValue)}
		for _, m := range at.PlanModifiers {
			resp := planmodifier.StringResponse{PlanValue: req.PlanValue}
			m.PlanModifyString(ctx, req, &resp)
			if resp.RequiresReplace || len(resp.Diagnostics) > 0 {
				return nil, false
			}
			req.PlanValue = resp.PlanValue
		}
		return req.PlanValue, true
	case schema.Int64Attribute:
		req := planmodifier.Int64Request{Path: a.path, PathExpression: expr, Config: cfg, ConfigValue: config.(basetypes.Int64Value),
			Plan: plan, PlanValue: planned.(basetypes.Int64Value), State: state, StateValue: prior.(basetypes.Int64Value)}
		for _, m := range at.PlanModifiers {
			resp := planmodifier.Int64Response{PlanValue: req.PlanValue}
			m.PlanModifyInt64(ctx, req, &resp)
			if resp.RequiresReplace || len(resp.Diagnostics) > 0 {
				return nil, false
			}
			req.PlanValue = resp.PlanValue
		}
		return req.PlanValue, true
	case schema.NumberAttribute:
		req := planmodifier.NumberRequest{Path: a.path, PathExpression: expr, Config: cfg, ConfigValue: config.(basetypes.NumberValue),
			Plan: plan, PlanValue: planned.(basetypes.NumberValue), State: state, StateValue: prior.(basetypes.NumberValue)}
		for _, m := range at.PlanModifiers {
			resp := planmodifier.NumberResponse{PlanValue: req.PlanValue}
			m.PlanModifyNumber(ctx, req, &resp)
			if resp.RequiresReplace || len(resp.Diagnostics) > 0 {
				return nil, false
			}
			req.PlanValue = resp.PlanValue
		}
		return req.PlanValue, true
	case schema.BoolAttribute:
		req := planmodifier.BoolRequest{Path: a.path, PathExpression: expr, Config: cfg, ConfigValue: config.(basetypes.BoolValue),
			Plan: plan, PlanValue: planned.(basetypes.BoolValue), State: state, StateValue: prior.(basetypes.BoolValue)}
		for _, m := range at.PlanModifiers {
			resp := planmodifier.BoolResponse{PlanValue: req.PlanValue}
			m.PlanModifyBool(ctx, req, &resp)
			if resp.RequiresReplace || len(resp.Diagnostics) > 0 {
				return nil, false
			}
			req.PlanValue = resp.PlanValue
		}
		return req.PlanValue, true
	}
	return nil, false
}

func (s *protocolServer) ValidateResourceConfig(ctx context.Context, req *tfprotov6.ValidateResourceConfigRequest) (*tfprotov6.ValidateResourceConfigResponse, error) {
	if s.silentValidation(ctx, req) {
		return &tfprotov6.ValidateResourceConfigResponse{}, nil
	}
	return s.ProviderServer.ValidateResourceConfig(ctx, req)
}

// silentValidation reports whether the framework's validation of a
// resource's configuration would say nothing: no attribute set that is
// read-only or deprecated, none missing that is required, no attribute
// validator, config validator or ValidateConfig with anything to say.
// Validation calls nothing outside the provider, so when this says false
// the framework validates again and gives its own diagnostics; a
// configuration that passes (every resource of a good plan) is validated
// once, without the framework's per-attribute walks.
func (s *protocolServer) silentValidation(ctx context.Context, req *tfprotov6.ValidateResourceConfigRequest) bool {
	fr := s.resources[req.TypeName]
	if fr == nil || fr.attrs == nil || fr.schema.DeprecationMessage != "" || req.Config == nil || req.Config.JSON != nil {
		return false
	}
	raw, err := req.Config.Unmarshal(fr.typ)
	if err != nil || raw.IsNull() || !raw.IsKnown() {
		return false
	}
	var values map[string]tftypes.Value
	if raw.As(&values) != nil {
		return false
	}
	config := tfsdk.Config{Schema: fr.schema, Raw: raw}
	for _, a := range fr.attrs {
		if !silentAttribute(ctx, a, values[a.name], config) {
			return false
		}
	}
	r := fr.new()
	vreq := resource.ValidateConfigRequest{Config: config}
	if cv, ok := r.(resource.ResourceWithConfigValidators); ok {
		for _, v := range cv.ConfigValidators(ctx) {
			var vresp resource.ValidateConfigResponse
			v.ValidateResource(ctx, vreq, &vresp)
			if len(vresp.Diagnostics) > 0 {
				return false
			}
		}
	}
	if vc, ok := r.(resource.ResourceWithValidateConfig); ok {
		var vresp resource.ValidateConfigResponse
		vc.ValidateConfig(ctx, vreq, &vresp)
		if len(vresp.Diagnostics) > 0 {
			return false
		}
	}
	return true
}

// silentAttribute is silentValidation for one attribute: the framework's
// checks of AttributeValidate, then the attribute's validators.
func silentAttribute(ctx context.Context, a fastAttr, value tftypes.Value, config tfsdk.Config) bool {
	at := a.attr
	if !at.IsRequired() && !at.IsOptional() && !at.IsComputed() {
		return false
	}
	v, err := at.GetType().ValueFromTerraform(ctx, value)
	if err != nil {
		return false
	}
	null, unknown := v.IsNull(), v.IsUnknown()
	if (at.IsComputed() && !at.IsOptional() && !null) || (at.IsRequired() && null) ||
		(at.GetDeprecationMessage() != "" && !null && !unknown) {
		return false
	}
	expr := a.path.Expression()
	switch at := at.(type) {
	case schema.StringAttribute:
		valuable, ok := v.(basetypes.StringValuable)
		if !ok {
			return false
		}
		cv, diags := valuable.ToStringValue(ctx)
		if diags.HasError() {
			return false
		}
		for _, val := range at.Validators {
			var resp validator.StringResponse
			val.ValidateString(ctx, validator.StringRequest{Path: a.path, PathExpression: expr, Config: config, ConfigValue: cv}, &resp)
			if len(resp.Diagnostics) > 0 {
				return false
			}
		}
	case schema.Int64Attribute:
		valuable, ok := v.(basetypes.Int64Valuable)
		if !ok {
			return false
		}
		cv, diags := valuable.ToInt64Value(ctx)
		if diags.HasError() {
			return false
		}
		for _, val := range at.Validators {
			var resp validator.Int64Response
			val.ValidateInt64(ctx, validator.Int64Request{Path: a.path, PathExpression: expr, Config: config, ConfigValue: cv}, &resp)
			if len(resp.Diagnostics) > 0 {
				return false
			}
		}
	case schema.NumberAttribute:
		valuable, ok := v.(basetypes.NumberValuable)
		if !ok {
			return false
		}
		cv, diags := valuable.ToNumberValue(ctx)
		if diags.HasError() {
			return false
		}
		for _, val := range at.Validators {
			var resp validator.NumberResponse
			val.ValidateNumber(ctx, validator.NumberRequest{Path: a.path, PathExpression: expr, Config: config, ConfigValue: cv}, &resp)
			if len(resp.Diagnostics) > 0 {
				return false
			}
		}
	case schema.BoolAttribute:
		valuable, ok := v.(basetypes.BoolValuable)
		if !ok {
			return false
		}
		cv, diags := valuable.ToBoolValue(ctx)
		if diags.HasError() {
			return false
		}
		for _, val := range at.Validators {
			var resp validator.BoolResponse
			val.ValidateBool(ctx, validator.BoolRequest{Path: a.path, PathExpression: expr, Config: config, ConfigValue: cv}, &resp)
			if len(resp.Diagnostics) > 0 {
				return false
			}
		}
	default:
		return false
	}
	return true
}

func (s *protocolServer) ReadResource(ctx context.Context, req *tfprotov6.ReadResourceRequest) (*tfprotov6.ReadResourceResponse, error) {
	if resp := s.fastRead(ctx, req); resp != nil {
		return resp, nil
	}
	return s.ProviderServer.ReadResource(ctx, req)
}

// fastRead calls the resource's Read as the framework does, for a resource
// of a simple schema (see simpleAttributes) with no private state, once
// the provider is configured. The framework's work around Read (semantic
// equality, write-only attributes, collection blocks) does nothing for such
// a schema, so the answer is the framework's: the state Read left, and its
// diagnostics. It returns nil, before calling anything, for the framework
// to answer in every other case.
func (s *protocolServer) fastRead(ctx context.Context, req *tfprotov6.ReadResourceRequest) *tfprotov6.ReadResourceResponse {
	fr := s.resources[req.TypeName]
	data := s.provider.configured.Load()
	if fr == nil || fr.attrs == nil || data == nil || req.CurrentState == nil || req.CurrentState.JSON != nil ||
		len(req.Private) != 0 || req.ProviderMeta != nil || req.CurrentIdentity != nil {
		return nil
	}
	current, err := req.CurrentState.Unmarshal(fr.typ)
	if err != nil || current.IsNull() {
		return nil
	}
	r, ok := configuredResource(ctx, fr, data)
	if !ok {
		return nil
	}
	rreq := resource.ReadRequest{State: tfsdk.State{Schema: fr.schema, Raw: current.Copy()}}
	if req.ClientCapabilities != nil {
		rreq.ClientCapabilities.DeferralAllowed = req.ClientCapabilities.DeferralAllowed
	}
	rresp := resource.ReadResponse{State: tfsdk.State{Schema: fr.schema, Raw: current.Copy()}}
	r.Read(ctx, rreq, &rresp)

	resp := &tfprotov6.ReadResourceResponse{Diagnostics: protocolDiagnostics(ctx, rresp.Diagnostics)}
	if rresp.Deferred != nil {
		resp.Deferred = &tfprotov6.Deferred{Reason: tfprotov6.DeferredReason(rresp.Deferred.Reason)}
	}
	resp.NewState = protocolState(fr, rresp.State.Raw, &resp.Diagnostics)
	return resp
}

// configuredResource is a new resource of fr's type configured as the
// framework configures it, with the provider's data; ok is false when
// that says anything.
func configuredResource(ctx context.Context, fr *fastResource, data *providerData) (resource.Resource, bool) {
	r := fr.new()
	configurable, ok := r.(resource.ResourceWithConfigure)
	if !ok {
		return nil, false
	}
	var resp resource.ConfigureResponse
	configurable.Configure(ctx, resource.ConfigureRequest{ProviderData: data}, &resp)
	return r, len(resp.Diagnostics) == 0
}

// protocolState encodes a state or plan as the framework does, with its
// diagnostic when it cannot.
func protocolState(fr *fastResource, raw tftypes.Value, diags *[]*tfprotov6.Diagnostic) *tfprotov6.DynamicValue {
	state, err := tfprotov6.NewDynamicValue(fr.typ, raw)
	if err != nil {
		*diags = append(*diags, &tfprotov6.Diagnostic{Severity: tfprotov6.DiagnosticSeverityError,
			Summary: "Unable to Convert State", Detail: "An unexpected error was encountered when converting the state to the protocol type. " +
				"This is always an issue in terraform-plugin-framework used to implement the provider and should be reported to the provider developers.\n\n" +
				"Please report this to the provider developer:\n\n" + "Unable to create DynamicValue: " + err.Error()})
		return nil
	}
	return &state
}

// protocolDiagnostics converts diagnostics as the framework does.
func protocolDiagnostics(ctx context.Context, diags diag.Diagnostics) []*tfprotov6.Diagnostic {
	var out []*tfprotov6.Diagnostic
	for _, d := range diags {
		pd := &tfprotov6.Diagnostic{Summary: d.Summary(), Detail: d.Detail(), Severity: tfprotov6.DiagnosticSeverityInvalid}
		switch d.Severity() {
		case diag.SeverityError:
			pd.Severity = tfprotov6.DiagnosticSeverityError
		case diag.SeverityWarning:
			pd.Severity = tfprotov6.DiagnosticSeverityWarning
		}
		if withPath, ok := d.(diag.DiagnosticWithPath); ok {
			pd.Attribute = protocolPath(ctx, withPath.Path())
		}
		out = append(out, pd)
	}
	return out
}

func protocolPath(ctx context.Context, p path.Path) *tftypes.AttributePath {
	steps := make([]tftypes.AttributePathStep, 0, len(p.Steps()))
	for _, step := range p.Steps() {
		switch step := step.(type) {
		case path.PathStepAttributeName:
			steps = append(steps, tftypes.AttributeName(string(step)))
		case path.PathStepElementKeyInt:
			steps = append(steps, tftypes.ElementKeyInt(int64(step)))
		case path.PathStepElementKeyString:
			steps = append(steps, tftypes.ElementKeyString(string(step)))
		case path.PathStepElementKeyValue:
			v, err := step.Value.ToTerraformValue(ctx)
			if err != nil {
				return nil
			}
			steps = append(steps, tftypes.ElementKeyValue(v))
		default:
			return nil
		}
	}
	return tftypes.NewAttributePathWithSteps(steps)
}
