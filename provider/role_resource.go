package provider

import (
	"context"
	"fmt"
	"math/big"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/numberdefault"
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
func NewRoleResource() resource.Resource {
	return &roleResource{objectResource[roleModel, api.RoleRequest, api.Role]{kind: &roleKind}}
}

type roleResource struct {
	objectResource[roleModel, api.RoleRequest, api.Role]
}

var roleKind = objectKind[roleModel, api.RoleRequest, api.Role]{
	typeName: "allot_role",
	msgs: kindMessages{
		exists:  "Role already configured",
		changed: "Role changed outside Terraform",
		create:  verb{"Unable to configure role", "Configuring"},
		read:    verb{"Unable to read role", "Reading"},
		update:  verb{"Unable to update role", "Updating"},
		delete:  verb{"Unable to reset role", "Resetting"},
		invalid: [2]string{"Invalid role", "The planned lending limit could not be read."},
	},
	identity:     func(m *roleModel) string { return m.Name.ValueString() },
	identityAttr: "name",
	what:         roleWhat,
	path:         api.RolePath,
	unchanged: func(plan, state *roleModel) bool {
		return plan.Name.Equal(state.Name) && plan.Weight.Equal(state.Weight) && plan.LendingLimit.Equal(state.LendingLimit)
	},
	sameObject: func(plan, state *roleModel) bool { return plan.Name.Equal(state.Name) },
	known: func(m *roleModel) bool {
		return !m.Name.IsUnknown() && !m.Weight.IsUnknown() && !m.LendingLimit.IsUnknown()
	},
	request: (*roleModel).request,
	put: func(ctx context.Context, c *api.Client, name string, r api.RoleRequest, o api.WriteOptions) (*api.Role, error) {
		return c.PutRole(ctx, name, r, o)
	},
	get: func(ctx context.Context, c *api.Client, name string) (*api.Role, error) {
		return c.Role(ctx, name, api.ReadOptions{})
	},
	del: func(ctx context.Context, c *api.Client, name string, o api.WriteOptions) error {
		return c.DeleteRole(ctx, name, o)
	},
	matches: roleMatches,
	// Every role reads as weight 1 until it is configured; version 0 says the
	// configuration this resource made is gone.
	gone:    func(role *api.Role) bool { return role.Version == 0 },
	version: func(m *roleModel) int64 { return m.Version.ValueInt64() },
	written: func(m *roleModel, name string, role *api.Role) {
		m.ID = types.StringValue(name)
		m.Version = types.Int64Value(int64(role.Version))
	},
	refreshed: func(m *roleModel, name string, role *api.Role) {
		m.ID = types.StringValue(name)
		m.Weight = refreshNumber(m.Weight, role.Weight)
		m.LendingLimit = refreshLendingLimit(m.LendingLimit, role.LendingLimit)
		m.Version = types.Int64Value(int64(role.Version))
	},
}

type roleModel struct {
	ID           types.String `tfsdk:"id"`
	Name         types.String `tfsdk:"name"`
	Weight       types.Number `tfsdk:"weight"`
	LendingLimit types.Map    `tfsdk:"lending_limit"`
	Version      types.Int64  `tfsdk:"version"`
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
			"weight": schema.NumberAttribute{
				Optional: true,
				Computed: true,
				Default:  numberdefault.StaticBigFloat(big.NewFloat(api.DefaultWeight)),
				Description: "The role's weight: a role of weight 2 is offered twice the share of a role of weight 1. " +
					"Must be above 0 and at most 1000000. Defaults to `1`.",
				Validators: []validator.Number{finiteValidator{min: 0, max: maxWeight}},
			},
			"lending_limit": schema.MapAttribute{
				ElementType: types.NumberType,
				Optional:    true,
				Description: "The most of each resource the role's idle reservations lend to other roles as revocable " +
					"resources, across the cluster, such as `{ cpus = 8, mem = 16384 }`. Leaving the attribute out lends all " +
					"idle reserved resources; a resource the map leaves out is not lent, so `{}` lends nothing. " +
					"Lowering it below what the role lends now rescinds the revocable offers of its reservations and " +
					"evicts the youngest revocable tasks on them until it fits: the plan warns and names them." +
					resourceMapDescription,
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

func roleWhat(name string) string { return fmt.Sprintf("role %q", name) }

func (m *roleModel) request() (api.RoleRequest, bool) {
	lending, diags := resourcesFromMap(m.LendingLimit)
	weight, ok := numberValue(m.Weight)
	return api.RoleRequest{Weight: &weight, LendingLimit: lending}, ok && !diags.HasError()
}

func roleMatches(role *api.Role, req api.RoleRequest) bool {
	return role.Version != 0 && role.Weight == *req.Weight && sameLendingLimit(role.LendingLimit, req.LendingLimit)
}

// sameLendingLimit compares lending limits, for which nil (no cap) and empty
// (lend nothing) are opposites.
func sameLendingLimit(a, b api.Resources) bool {
	return (a == nil) == (b == nil) && equalResources(a, b)
}

// refreshLendingLimit is refreshResources for a lending limit: null (no cap)
// and {} (lend nothing) stay apart, so that either changed to the other
// outside Terraform shows in the next plan.
func refreshLendingLimit(prior types.Map, current api.Resources) types.Map {
	if !prior.IsUnknown() && prior.IsNull() == (current == nil) && equivalentResources(prior, current) {
		return prior
	}
	return lendingLimitValue(current)
}

// lendingLimitValue is a lending limit read from the cluster: nil (no cap)
// is null, an empty map (lend nothing) an empty map.
func lendingLimitValue(r api.Resources) types.Map {
	if r == nil {
		return types.MapNull(types.NumberType)
	}
	elems := make(map[string]attr.Value, len(r))
	for name, v := range r {
		elems[name] = numberFromFloat(v)
	}
	return types.MapValueMust(types.NumberType, elems)
}

func (r *roleResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if err := api.ValidateRole(req.ID); err != nil {
		resp.Diagnostics.AddError("Invalid import ID",
			fmt.Sprintf("The import ID of allot_role is the role name, such as eng/ml: %v.", err))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
}
