package provider

import (
	"context"
	"fmt"

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
func NewReservationResource() resource.Resource {
	return &reservationResource{objectResource[reservationModel, api.ReservationRequest, api.Reservation]{kind: &reservationKind}}
}

type reservationResource struct {
	objectResource[reservationModel, api.ReservationRequest, api.Reservation]
}

var reservationKind = objectKind[reservationModel, api.ReservationRequest, api.Reservation]{
	typeName:     "allot_reservation",
	msgs:         withInvalid(defaultMessages("reservation"), "Invalid reservation", "The planned resources could not be read."),
	identity:     func(m *reservationModel) string { return m.Name.ValueString() },
	identityAttr: "name",
	what:         reservationWhat,
	path:         api.ReservationPath,
	unchanged: func(plan, state *reservationModel) bool {
		return reservationSameIdentity(plan, state) && plan.Resources.Equal(state.Resources) && plan.Force.Equal(state.Force)
	},
	sameObject: reservationSameIdentity,
	known: func(m *reservationModel) bool {
		return !m.Name.IsUnknown() && !m.Agent.IsUnknown() && !m.Role.IsUnknown() && !m.Resources.IsUnknown() && !m.Force.IsUnknown()
	},
	request:  (*reservationModel).request,
	force:    func(r api.ReservationRequest) bool { return r.Force },
	unforced: func(r api.ReservationRequest) api.ReservationRequest { r.Force = false; return r },
	put: func(ctx context.Context, c *api.Client, name string, r api.ReservationRequest, o api.WriteOptions) (*api.Reservation, error) {
		return c.PutReservation(ctx, name, r, o)
	},
	get: func(ctx context.Context, c *api.Client, name string) (*api.Reservation, error) {
		return c.Reservation(ctx, name, api.ReadOptions{})
	},
	listed: func(ctx context.Context, d *providerData, id string) (api.Reservation, bool, error) {
		return d.reservations.get(ctx, id, func(ctx context.Context) (map[string]api.Reservation, error) { return listReservations(ctx, d.client) })
	},
	del: func(ctx context.Context, c *api.Client, name string, o api.WriteOptions) error {
		return c.DeleteReservation(ctx, name, o)
	},
	matches: reservationMatches,
	version: func(m *reservationModel) int64 { return m.Version.ValueInt64() },
	written: func(m *reservationModel, name string, res *api.Reservation) {
		m.ID = types.StringValue(name)
		m.Status = types.StringValue(res.Status)
		m.Version = types.Int64Value(int64(res.Version))
	},
	refreshed: func(m *reservationModel, name string, res *api.Reservation) {
		m.ID = types.StringValue(name)
		m.Agent = types.StringValue(res.Agent)
		m.Role = types.StringValue(res.Role)
		m.Resources = refreshResources(m.Resources, res.Resources)
		if m.Force.IsNull() {
			m.Force = types.BoolValue(false)
		}
		m.Status = types.StringValue(res.Status)
		m.Version = types.Int64Value(int64(res.Version))
	},
}

func reservationSameIdentity(plan, state *reservationModel) bool {
	return plan.Name.Equal(state.Name) && plan.Agent.Equal(state.Agent) && plan.Role.Equal(state.Role)
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
				Description: "The name of the agent whose resources are reserved, such as `node-1`. It must be admitted, " +
					"unless `force` is set: the reservation is then `pending` until the agent is admitted with room for " +
					"it (a node provisioned from Terraform before its agent runs). Changing it forces a new reservation.",
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
				ElementType: types.NumberType,
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
				Description: "Whether to store the reservation even when it does not fit the agent's free resources, or " +
					"its agent is not admitted yet; it is then `pending` until the agent is admitted and enough is free, and " +
					"the plan warns what force overrides. Defaults to `false`. It only affects writes and is not stored in " +
					"the cluster.",
			},
			"status": schema.StringAttribute{
				Computed: true,
				Description: "`active`, or `pending` for a forced reservation that does not fit its agent yet or whose " +
					"agent is not admitted yet. The cluster derives it from the agents and the reservations, so it turns " +
					"`active` by itself once the agent has room.",
			},
			"version": schema.Int64Attribute{
				Computed: true,
				Description: "The cluster's version of the reservation (the Raft index of its last change). Updates and " +
					"deletes are sent with it, so a change made outside Terraform since the last refresh is never overwritten.",
			},
		},
	}
}

func (r *reservationResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var cfg reservationModel
	resp.Diagnostics.Append(getConfig(ctx, req.Config, &cfg)...)
	if resp.Diagnostics.HasError() || cfg.Resources.IsNull() || cfg.Resources.IsUnknown() {
		return
	}
	for _, elem := range cfg.Resources.Elements() {
		n, ok := elem.(types.Number)
		v, fits := numberValue(n)
		if !ok || n.IsUnknown() || !fits || api.RoundScalar(v) > 0 {
			return
		}
	}
	resp.Diagnostics.AddAttributeError(path.Root("resources"), "Reservation reserves nothing",
		"A reservation must name at least one resource with an amount of at least 0.001.")
}

func reservationWhat(name string) string { return fmt.Sprintf("reservation %q", name) }

func (m *reservationModel) request() (api.ReservationRequest, bool) {
	res, diags := resourcesFromMap(m.Resources)
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

func (r *reservationResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if err := api.ValidateName("reservation name", req.ID); err != nil {
		resp.Diagnostics.AddError("Invalid import ID",
			fmt.Sprintf("The import ID of allot_reservation is the reservation name, such as db-node-1: %v.", err))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("force"), false)...)
}
