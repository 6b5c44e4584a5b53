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
	_ resource.Resource                   = (*reservationResource)(nil)
	_ resource.ResourceWithConfigure      = (*reservationResource)(nil)
	_ resource.ResourceWithImportState    = (*reservationResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*reservationResource)(nil)
	_ resource.ResourceWithValidateConfig = (*reservationResource)(nil)
)

// NewReservationResource is the allot_reservation resource.
func NewReservationResource() resource.Resource { return &reservationResource{} }

type reservationResource struct {
	data *providerData
}

type reservationModel struct {
	ID        types.String `tfsdk:"id"`
	Name      types.String `tfsdk:"name"`
	Agent     types.String `tfsdk:"agent"`
	Role      types.String `tfsdk:"role"`
	Resources types.Map    `tfsdk:"resources"`
	Force     types.Bool   `tfsdk:"force"`
	Status    types.String `tfsdk:"status"`
	Version   types.Int64  `tfsdk:"version"`
}

func (r *reservationResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_reservation"
}

func (r *reservationResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Reserves resources of one agent for one role: only that role's frameworks are offered them, and " +
			"they count toward the role's quota. Resources that other roles' running tasks hold become reserved as they " +
			"free up; nothing running is killed. Every plan asks the cluster for a dry run, so a reservation that does " +
			"not fit its agent fails at plan time.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:      true,
				Description:   "The reservation name, which is also the import ID.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				Required: true,
				Description: "The reservation's name, unique in the cluster, such as `db-node-1`: letters, digits and " +
					"`_.:@-`. Changing it forces a new reservation.",
				Validators:    []validator.String{nameValidator{kind: "reservation name"}},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"agent": schema.StringAttribute{
				Required: true,
				Description: "The name of the admitted agent whose resources are reserved, such as `node-1`. Changing it " +
					"forces a new reservation.",
				Validators:    []validator.String{nameValidator{kind: "agent name"}},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"role": schema.StringAttribute{
				Required:      true,
				Description:   "The role the resources are reserved for, such as `db`. Changing it forces a new reservation.",
				Validators:    []validator.String{roleValidator{}},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"resources": schema.MapAttribute{
				ElementType: types.Float64Type,
				Required:    true,
				Description: "The reserved resources, such as `{ cpus = 4, mem = 8192 }`. The agent's reservations " +
					"together must fit its total resources unless `force` is set; changing them updates the reservation " +
					"in place." + resourceMapDescription,
				Validators:    []validator.Map{resourceMapValidator{}},
				PlanModifiers: []planmodifier.Map{normalizedResources{}},
			},
			"force": schema.BoolAttribute{
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(false),
				Description: "Whether to store the reservation even when it does not fit the agent's free resources; it " +
					"is then `pending` until enough is free. Defaults to `false`. It only affects writes and is not stored " +
					"in the cluster.",
			},
			"status": schema.StringAttribute{
				Computed:    true,
				Description: "`active`, or `pending` for a forced reservation that does not fit its agent yet.",
			},
			"version": schema.Int64Attribute{
				Computed: true,
				Description: "The cluster's version of the reservation (the Raft index of its last change). Updates and " +
					"deletes are sent with it, so a change made outside Terraform since the last refresh is never overwritten.",
			},
		},
	}
}

func (r *reservationResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (r *reservationResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var cfg reservationModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() || cfg.Resources.IsNull() || cfg.Resources.IsUnknown() {
		return
	}
	for _, elem := range cfg.Resources.Elements() {
		f, ok := elem.(types.Float64)
		if !ok || f.IsUnknown() || api.RoundScalar(f.ValueFloat64()) > 0 {
			return
		}
	}
	resp.Diagnostics.AddAttributeError(path.Root("resources"), "Reservation reserves nothing",
		"A reservation must name at least one resource with an amount of at least 0.001.")
}

func reservationWhat(name string) string { return fmt.Sprintf("reservation %q", name) }

func (m *reservationModel) request(ctx context.Context) (api.ReservationRequest, bool) {
	res, diags := resourcesFromMap(ctx, m.Resources)
	return api.ReservationRequest{
		Agent:     m.Agent.ValueString(),
		Role:      m.Role.ValueString(),
		Resources: res,
		Force:     m.Force.ValueBool(),
	}, !diags.HasError()
}

func reservationMatches(res *api.Reservation, req api.ReservationRequest) bool {
	return res.Agent == req.Agent && res.Role == req.Role && equalResources(res.Resources, req.Resources)
}

func (r *reservationResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		var state reservationModel
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		if resp.Diagnostics.HasError() {
			return
		}
		name := state.Name.ValueString()
		resp.Diagnostics.Append(r.data.checkPlan(ctx, dryRun{
			action: actionDelete, what: reservationWhat(name), method: http.MethodDelete, path: api.ReservationPath(name),
		})...)
		return
	}
	var plan reservationModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	action := actionCreate
	if !req.State.Raw.IsNull() {
		var state reservationModel
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		if resp.Diagnostics.HasError() {
			return
		}
		sameIdentity := plan.Name.Equal(state.Name) && plan.Agent.Equal(state.Agent) && plan.Role.Equal(state.Role)
		if sameIdentity && plan.Resources.Equal(state.Resources) && plan.Force.Equal(state.Force) {
			resp.Diagnostics.Append(resp.Plan.Set(ctx, state)...)
			return
		}
		if sameIdentity {
			action = actionUpdate
		}
	}
	if plan.Name.IsUnknown() || plan.Agent.IsUnknown() || plan.Role.IsUnknown() || plan.Resources.IsUnknown() || plan.Force.IsUnknown() {
		return
	}
	body, ok := plan.request(ctx)
	if !ok {
		return
	}
	name := plan.Name.ValueString()
	force := body.Force
	resp.Diagnostics.Append(r.data.checkPlan(ctx, dryRun{
		action: action, what: reservationWhat(name), method: http.MethodPut, path: api.ReservationPath(name), body: body, force: &force,
	})...)
}

func (r *reservationResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	if r.data == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var plan reservationModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	body, ok := plan.request(ctx)
	if !ok {
		resp.Diagnostics.AddError("Invalid reservation", "The planned resources could not be read.")
		return
	}
	name := plan.Name.ValueString()
	ctx, cancel := r.data.withTimeout(ctx)
	defer cancel()

	res, err := r.data.client.PutReservation(ctx, name, body, api.WriteOptions{IfNoneMatch: true})
	if api.IsPreconditionFailed(err) {
		// Existed before, or our own write stored before a failover lost its
		// answer (see allot_quota).
		current, getErr := r.data.client.Reservation(ctx, name, api.ReadOptions{})
		if getErr != nil || !reservationMatches(current, body) {
			addExistsError(&resp.Diagnostics, "Reservation already exists", reservationWhat(name), "allot_reservation", name)
			return
		}
		res, err = current, nil
	}
	if err != nil {
		addAPIError(&resp.Diagnostics, "Unable to create reservation", "Creating", reservationWhat(name), err)
		return
	}
	plan.ID = types.StringValue(name)
	plan.Status = types.StringValue(res.Status)
	plan.Version = types.Int64Value(int64(res.Version))
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *reservationResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	if r.data == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var state reservationModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := state.Name.ValueString()
	ctx, cancel := r.data.withTimeout(ctx)
	defer cancel()

	res, err := r.data.client.Reservation(ctx, name, api.ReadOptions{})
	if api.IsNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		addAPIError(&resp.Diagnostics, "Unable to read reservation", "Reading", reservationWhat(name), err)
		return
	}
	state.ID = types.StringValue(name)
	state.Agent = types.StringValue(res.Agent)
	state.Role = types.StringValue(res.Role)
	state.Resources = refreshResources(state.Resources, res.Resources)
	if state.Force.IsNull() {
		state.Force = types.BoolValue(false)
	}
	state.Status = types.StringValue(res.Status)
	state.Version = types.Int64Value(int64(res.Version))
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *reservationResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	if r.data == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var plan, state reservationModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	body, ok := plan.request(ctx)
	if !ok {
		resp.Diagnostics.AddError("Invalid reservation", "The planned resources could not be read.")
		return
	}
	name := plan.Name.ValueString()
	ctx, cancel := r.data.withTimeout(ctx)
	defer cancel()

	res, err := r.data.client.PutReservation(ctx, name, body, api.WriteOptions{IfMatch: uint64(state.Version.ValueInt64())})
	if api.IsPreconditionFailed(err) {
		current, getErr := r.data.client.Reservation(ctx, name, api.ReadOptions{})
		if getErr != nil || !reservationMatches(current, body) {
			addChangedError(&resp.Diagnostics, "Reservation changed outside Terraform", reservationWhat(name), state.Version.ValueInt64(), err)
			return
		}
		res, err = current, nil
	}
	if err != nil {
		addAPIError(&resp.Diagnostics, "Unable to update reservation", "Updating", reservationWhat(name), err)
		return
	}
	plan.ID = types.StringValue(name)
	plan.Status = types.StringValue(res.Status)
	plan.Version = types.Int64Value(int64(res.Version))
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *reservationResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	if r.data == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var state reservationModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := state.Name.ValueString()
	ctx, cancel := r.data.withTimeout(ctx)
	defer cancel()

	err := r.data.client.DeleteReservation(ctx, name, api.WriteOptions{IfMatch: uint64(state.Version.ValueInt64())})
	switch {
	case err == nil, api.IsNotFound(err):
	case api.IsPreconditionFailed(err):
		addChangedError(&resp.Diagnostics, "Reservation changed outside Terraform", reservationWhat(name), state.Version.ValueInt64(), err)
	default:
		addAPIError(&resp.Diagnostics, "Unable to delete reservation", "Deleting", reservationWhat(name), err)
	}
}

func (r *reservationResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if err := api.ValidateName("reservation name", req.ID); err != nil {
		resp.Diagnostics.AddError("Invalid import ID",
			fmt.Sprintf("The import ID of allot_reservation is the reservation name, such as db-node-1: %v.", err))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("force"), false)...)
}
