package provider

import (
	"context"
	"fmt"
	"net/http"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/allot/allot/masterd/api"
)

var (
	_ resource.Resource                   = (*quotaResource)(nil)
	_ resource.ResourceWithConfigure      = (*quotaResource)(nil)
	_ resource.ResourceWithImportState    = (*quotaResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*quotaResource)(nil)
	_ resource.ResourceWithValidateConfig = (*quotaResource)(nil)
)

// NewQuotaResource is the allot_quota resource.
func NewQuotaResource() resource.Resource { return &quotaResource{} }

type quotaResource struct {
	data *providerData
}

type quotaModel struct {
	ID         types.String `tfsdk:"id"`
	Role       types.String `tfsdk:"role"`
	Guarantees types.Map    `tfsdk:"guarantees"`
	Limits     types.Map    `tfsdk:"limits"`
	Force      types.Bool   `tfsdk:"force"`
	Version    types.Int64  `tfsdk:"version"`
}

func (r *quotaResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_quota"
}

func (r *quotaResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Sets the quota of a role: the resources it is guaranteed and the resources it may never exceed. " +
			"Every plan asks the cluster for a dry run of the change, so a quota the cluster would refuse — guarantees " +
			"beyond the capacity of the admitted agents, a limit below what the role already consumes, a child role " +
			"outside its parent's bounds — fails at plan time, and offers the change would rescind show as warnings.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:      true,
				Description:   "The role, which is also the import ID.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"role": schema.StringAttribute{
				Required: true,
				Description: "The role the quota applies to, such as `eng/ml`: slash-separated parts of letters, digits, " +
					"`_`, `.` and `-`; `eng/ml` is a child of `eng`. Changing it forces a new quota.",
				Validators:    []validator.String{roleValidator{}},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"guarantees": schema.MapAttribute{
				ElementType: types.Float64Type,
				Optional:    true,
				Description: "The resources the role is always able to get, such as `{ cpus = 12, mem = 6144 }`. " +
					"Each guarantee must not exceed the limit of the same resource, and the guarantees of all roles together " +
					"must fit the resources of the admitted agents unless `force` is set. Leaving it out guarantees nothing." +
					resourceMapDescription,
				Validators:    []validator.Map{resourceMapValidator{}},
				PlanModifiers: []planmodifier.Map{normalizedResources{}},
			},
			"limits": schema.MapAttribute{
				ElementType: types.Float64Type,
				Optional:    true,
				Description: "The resources the role may never exceed, such as `{ cpus = 24, mem = 12288 }`. A resource " +
					"left out is not limited. A child role's limits must not exceed its parent's. Lowering a limit below " +
					"what the role already consumes fails unless `force` is set." + resourceMapDescription,
				Validators:    []validator.Map{resourceMapValidator{}},
				PlanModifiers: []planmodifier.Map{normalizedResources{}},
			},
			"force": schema.BoolAttribute{
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(false),
				Description: "Whether to store the quota even when its guarantees exceed the cluster's capacity or a " +
					"limit is below the role's current consumption. Defaults to `false`. It only affects writes and is " +
					"not stored in the cluster.",
			},
			"version": schema.Int64Attribute{
				Computed: true,
				Description: "The cluster's version of the quota (the Raft index of its last change). Updates and " +
					"deletes are sent with it, so a change made outside Terraform since the last refresh is never overwritten.",
			},
		},
	}
}

func (r *quotaResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (r *quotaResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var cfg quotaModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() || cfg.Guarantees.IsUnknown() || cfg.Limits.IsUnknown() {
		return
	}
	for name, g := range cfg.Guarantees.Elements() {
		gv, ok := g.(types.Float64)
		lv, lok := cfg.Limits.Elements()[name].(types.Float64)
		if !ok || !lok || gv.IsNull() || gv.IsUnknown() || lv.IsNull() || lv.IsUnknown() {
			continue
		}
		if api.RoundScalar(gv.ValueFloat64()) > api.RoundScalar(lv.ValueFloat64()) {
			resp.Diagnostics.AddAttributeError(path.Root("guarantees").AtMapKey(name), "Guarantee above limit",
				fmt.Sprintf("The guarantee of %s (%g) is above its limit (%g): a role cannot be guaranteed more than it may use.",
					name, gv.ValueFloat64(), lv.ValueFloat64()))
		}
	}
}

func quotaWhat(role string) string { return fmt.Sprintf("the quota of role %q", role) }

func (m *quotaModel) request(ctx context.Context) (api.QuotaRequest, bool) {
	guarantees, diags := resourcesFromMap(ctx, m.Guarantees)
	limits, limitDiags := resourcesFromMap(ctx, m.Limits)
	diags.Append(limitDiags...)
	return api.QuotaRequest{Guarantees: guarantees, Limits: limits, Force: m.Force.ValueBool()}, !diags.HasError()
}

func quotaMatches(q *api.Quota, req api.QuotaRequest) bool {
	return equalResources(q.Guarantees, req.Guarantees) && equalResources(q.Limits, req.Limits)
}

func (r *quotaResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		var state quotaModel
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		if resp.Diagnostics.HasError() {
			return
		}
		role := state.Role.ValueString()
		resp.Diagnostics.Append(r.data.checkPlan(ctx, dryRun{
			action: actionDelete, what: quotaWhat(role), method: http.MethodDelete, path: api.QuotaPath(role),
		})...)
		return
	}
	var plan quotaModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	action := actionCreate
	if !req.State.Raw.IsNull() {
		var state quotaModel
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		if resp.Diagnostics.HasError() {
			return
		}
		if plan.Role.Equal(state.Role) && plan.Guarantees.Equal(state.Guarantees) &&
			plan.Limits.Equal(state.Limits) && plan.Force.Equal(state.Force) {
			// Only a rounding difference remained: plan nothing at all.
			resp.Diagnostics.Append(resp.Plan.Set(ctx, state)...)
			return
		}
		if plan.Role.Equal(state.Role) {
			action = actionUpdate
		}
	}
	if plan.Role.IsUnknown() || plan.Guarantees.IsUnknown() || plan.Limits.IsUnknown() || plan.Force.IsUnknown() {
		return // the cluster can only check known values
	}
	body, ok := plan.request(ctx)
	if !ok {
		return
	}
	role := plan.Role.ValueString()
	force := body.Force
	resp.Diagnostics.Append(r.data.checkPlan(ctx, dryRun{
		action: action, what: quotaWhat(role), method: http.MethodPut, path: api.QuotaPath(role), body: body, force: &force,
	})...)
}

func (r *quotaResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	if r.data == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var plan quotaModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	body, ok := plan.request(ctx)
	if !ok {
		resp.Diagnostics.AddError("Invalid quota", "The planned resource maps could not be read.")
		return
	}
	role := plan.Role.ValueString()
	ctx, cancel := r.data.withTimeout(ctx)
	defer cancel()

	q, err := r.data.client.PutQuota(ctx, role, body, api.WriteOptions{IfNoneMatch: true})
	if api.IsPreconditionFailed(err) {
		// Either the quota existed before, or an earlier attempt of this very
		// call was stored and its answer lost in a failover: the client
		// retries, and the retry finds its own write.
		current, getErr := r.data.client.Quota(ctx, role, api.ReadOptions{})
		if getErr != nil || !quotaMatches(current, body) {
			addExistsError(&resp.Diagnostics, "Quota already exists", quotaWhat(role), "allot_quota", role)
			return
		}
		q, err = current, nil
	}
	if err != nil {
		addAPIError(&resp.Diagnostics, "Unable to create quota", "Creating", quotaWhat(role), err)
		return
	}
	plan.ID = types.StringValue(role)
	plan.Version = types.Int64Value(int64(q.Version))
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *quotaResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	if r.data == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var state quotaModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	role := state.Role.ValueString()
	ctx, cancel := r.data.withTimeout(ctx)
	defer cancel()

	q, err := r.data.client.Quota(ctx, role, api.ReadOptions{})
	if api.IsNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		addAPIError(&resp.Diagnostics, "Unable to read quota", "Reading", quotaWhat(role), err)
		return
	}
	state.ID = types.StringValue(role)
	state.Guarantees = refreshResources(state.Guarantees, q.Guarantees)
	state.Limits = refreshResources(state.Limits, q.Limits)
	if state.Force.IsNull() {
		state.Force = types.BoolValue(false)
	}
	state.Version = types.Int64Value(int64(q.Version))
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *quotaResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	if r.data == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var plan, state quotaModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	body, ok := plan.request(ctx)
	if !ok {
		resp.Diagnostics.AddError("Invalid quota", "The planned resource maps could not be read.")
		return
	}
	role := plan.Role.ValueString()
	ctx, cancel := r.data.withTimeout(ctx)
	defer cancel()

	q, err := r.data.client.PutQuota(ctx, role, body, api.WriteOptions{IfMatch: uint64(state.Version.ValueInt64())})
	if api.IsPreconditionFailed(err) {
		current, getErr := r.data.client.Quota(ctx, role, api.ReadOptions{})
		if getErr != nil || !quotaMatches(current, body) {
			addChangedError(&resp.Diagnostics, "Quota changed outside Terraform", quotaWhat(role), state.Version.ValueInt64(), err)
			return
		}
		q, err = current, nil
	}
	if err != nil {
		addAPIError(&resp.Diagnostics, "Unable to update quota", "Updating", quotaWhat(role), err)
		return
	}
	plan.ID = types.StringValue(role)
	plan.Version = types.Int64Value(int64(q.Version))
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *quotaResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	if r.data == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var state quotaModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	role := state.Role.ValueString()
	ctx, cancel := r.data.withTimeout(ctx)
	defer cancel()

	err := r.data.client.DeleteQuota(ctx, role, api.WriteOptions{IfMatch: uint64(state.Version.ValueInt64())})
	switch {
	case err == nil, api.IsNotFound(err):
	case api.IsPreconditionFailed(err):
		addChangedError(&resp.Diagnostics, "Quota changed outside Terraform", quotaWhat(role), state.Version.ValueInt64(), err)
	default:
		addAPIError(&resp.Diagnostics, "Unable to delete quota", "Deleting", quotaWhat(role), err)
	}
}

func (r *quotaResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if err := api.ValidateRole(req.ID); err != nil {
		resp.Diagnostics.AddError("Invalid import ID",
			fmt.Sprintf("The import ID of allot_quota is the role, such as eng/ml: %v.", err))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("role"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("force"), false)...)
}
