package provider

import (
	"context"
	"fmt"
	"net/http"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/float64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/allot/allot/masterd/api"
)

var (
	_ resource.Resource                = (*roleResource)(nil)
	_ resource.ResourceWithConfigure   = (*roleResource)(nil)
	_ resource.ResourceWithImportState = (*roleResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*roleResource)(nil)
)

// maxWeight is the largest weight the cluster accepts.
const maxWeight = 1e6

// NewRoleResource is the allot_role resource.
func NewRoleResource() resource.Resource { return &roleResource{} }

type roleResource struct {
	data *providerData
}

type roleModel struct {
	ID           types.String  `tfsdk:"id"`
	Name         types.String  `tfsdk:"name"`
	Weight       types.Float64 `tfsdk:"weight"`
	LendingLimit types.Map     `tfsdk:"lending_limit"`
	Version      types.Int64   `tfsdk:"version"`
}

func (r *roleResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_role"
}

func (r *roleResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Configures a role: its weight in the allocator's weighted fair sharing and how much of its idle " +
			"reservations it lends to other roles as revocable resources. Destroying it resets the role to weight 1 " +
			"and no lending limit; the role itself, its quota and its reservations are separate objects.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:      true,
				Description:   "The role name, which is also the import ID.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				Required: true,
				Description: "The role, such as `eng/ml`: slash-separated parts of letters, digits, `_`, `.` and `-`; " +
					"`eng/ml` is a child of `eng`. Changing it forces a new resource.",
				Validators:    []validator.String{roleValidator{}},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"weight": schema.Float64Attribute{
				Optional: true,
				Computed: true,
				Default:  float64default.StaticFloat64(api.DefaultWeight),
				Description: "The role's weight: a role of weight 2 is offered twice the share of a role of weight 1. " +
					"Must be above 0 and at most 1000000. Defaults to `1`.",
				Validators: []validator.Float64{finiteValidator{min: 0, max: maxWeight}},
			},
			"lending_limit": schema.MapAttribute{
				ElementType: types.Float64Type,
				Optional:    true,
				Description: "The most of each resource the role's idle reservations lend to other roles as revocable " +
					"resources, such as `{ cpus = 8 }`. A resource left out is lent without a cap; leaving the " +
					"attribute out lends all idle reserved resources." + resourceMapDescription,
				Validators:    []validator.Map{resourceMapValidator{}},
				PlanModifiers: []planmodifier.Map{normalizedResources{}},
			},
			"version": schema.Int64Attribute{
				Computed: true,
				Description: "The cluster's version of the role's configuration (the Raft index of its last change). " +
					"Updates and deletes are sent with it, so a change made outside Terraform since the last refresh is " +
					"never overwritten.",
			},
		},
	}
}

func (r *roleResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func roleWhat(name string) string { return fmt.Sprintf("role %q", name) }

func (m *roleModel) request(ctx context.Context) (api.RoleRequest, bool) {
	lending, diags := resourcesFromMap(ctx, m.LendingLimit)
	weight := m.Weight.ValueFloat64()
	return api.RoleRequest{Weight: &weight, LendingLimit: lending}, !diags.HasError()
}

func roleMatches(role *api.Role, req api.RoleRequest) bool {
	return role.Version != 0 && role.Weight == *req.Weight && equalResources(role.LendingLimit, req.LendingLimit)
}

func (r *roleResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		var state roleModel
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		if resp.Diagnostics.HasError() {
			return
		}
		name := state.Name.ValueString()
		resp.Diagnostics.Append(r.data.checkPlan(ctx, dryRun{
			action: actionDelete, what: roleWhat(name), method: http.MethodDelete, path: api.RolePath(name),
		})...)
		return
	}
	var plan roleModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	action := actionCreate
	if !req.State.Raw.IsNull() {
		var state roleModel
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		if resp.Diagnostics.HasError() {
			return
		}
		if plan.Name.Equal(state.Name) && plan.Weight.Equal(state.Weight) && plan.LendingLimit.Equal(state.LendingLimit) {
			resp.Diagnostics.Append(resp.Plan.Set(ctx, state)...)
			return
		}
		if plan.Name.Equal(state.Name) {
			action = actionUpdate
		}
	}
	if plan.Name.IsUnknown() || plan.Weight.IsUnknown() || plan.LendingLimit.IsUnknown() {
		return
	}
	body, ok := plan.request(ctx)
	if !ok {
		return
	}
	name := plan.Name.ValueString()
	resp.Diagnostics.Append(r.data.checkPlan(ctx, dryRun{
		action: action, what: roleWhat(name), method: http.MethodPut, path: api.RolePath(name), body: body,
	})...)
}

func (r *roleResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	if r.data == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var plan roleModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	body, ok := plan.request(ctx)
	if !ok {
		resp.Diagnostics.AddError("Invalid role", "The planned lending limit could not be read.")
		return
	}
	name := plan.Name.ValueString()
	ctx, cancel := r.data.withTimeout(ctx)
	defer cancel()

	role, err := r.data.client.PutRole(ctx, name, body, api.WriteOptions{IfNoneMatch: true})
	if api.IsPreconditionFailed(err) {
		// Configured before, or our own write stored before a failover lost
		// its answer (see allot_quota).
		current, getErr := r.data.client.Role(ctx, name, api.ReadOptions{})
		if getErr != nil || !roleMatches(current, body) {
			addExistsError(&resp.Diagnostics, "Role already configured", roleWhat(name), "allot_role", name)
			return
		}
		role, err = current, nil
	}
	if err != nil {
		addAPIError(&resp.Diagnostics, "Unable to configure role", "Configuring", roleWhat(name), err)
		return
	}
	plan.ID = types.StringValue(name)
	plan.Version = types.Int64Value(int64(role.Version))
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *roleResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	if r.data == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var state roleModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := state.Name.ValueString()
	ctx, cancel := r.data.withTimeout(ctx)
	defer cancel()

	role, err := r.data.client.Role(ctx, name, api.ReadOptions{})
	// Every role reads as weight 1 until it is configured; version 0 says the
	// configuration this resource made is gone.
	if api.IsNotFound(err) || (err == nil && role.Version == 0) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		addAPIError(&resp.Diagnostics, "Unable to read role", "Reading", roleWhat(name), err)
		return
	}
	state.ID = types.StringValue(name)
	state.Weight = types.Float64Value(role.Weight)
	state.LendingLimit = refreshResources(state.LendingLimit, role.LendingLimit)
	state.Version = types.Int64Value(int64(role.Version))
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *roleResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	if r.data == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var plan, state roleModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	body, ok := plan.request(ctx)
	if !ok {
		resp.Diagnostics.AddError("Invalid role", "The planned lending limit could not be read.")
		return
	}
	name := plan.Name.ValueString()
	ctx, cancel := r.data.withTimeout(ctx)
	defer cancel()

	role, err := r.data.client.PutRole(ctx, name, body, api.WriteOptions{IfMatch: uint64(state.Version.ValueInt64())})
	if api.IsPreconditionFailed(err) {
		current, getErr := r.data.client.Role(ctx, name, api.ReadOptions{})
		if getErr != nil || !roleMatches(current, body) {
			addChangedError(&resp.Diagnostics, "Role changed outside Terraform", roleWhat(name), state.Version.ValueInt64(), err)
			return
		}
		role, err = current, nil
	}
	if err != nil {
		addAPIError(&resp.Diagnostics, "Unable to update role", "Updating", roleWhat(name), err)
		return
	}
	plan.ID = types.StringValue(name)
	plan.Version = types.Int64Value(int64(role.Version))
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *roleResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	if r.data == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var state roleModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := state.Name.ValueString()
	ctx, cancel := r.data.withTimeout(ctx)
	defer cancel()

	err := r.data.client.DeleteRole(ctx, name, api.WriteOptions{IfMatch: uint64(state.Version.ValueInt64())})
	switch {
	case err == nil, api.IsNotFound(err):
	case api.IsPreconditionFailed(err):
		addChangedError(&resp.Diagnostics, "Role changed outside Terraform", roleWhat(name), state.Version.ValueInt64(), err)
	default:
		addAPIError(&resp.Diagnostics, "Unable to reset role", "Resetting", roleWhat(name), err)
	}
}

func (r *roleResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if err := api.ValidateRole(req.ID); err != nil {
		resp.Diagnostics.AddError("Invalid import ID",
			fmt.Sprintf("The import ID of allot_role is the role name, such as eng/ml: %v.", err))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
}
