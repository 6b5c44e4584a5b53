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
	_ resource.Resource                   = (*quotaResource)(nil)
	_ resource.ResourceWithConfigure      = (*quotaResource)(nil)
	_ resource.ResourceWithImportState    = (*quotaResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*quotaResource)(nil)
	_ resource.ResourceWithValidateConfig = (*quotaResource)(nil)
)

// NewQuotaResource is the allot_quota resource.
func NewQuotaResource() resource.Resource {
	return &quotaResource{objectResource[quotaModel, api.QuotaRequest, api.Quota]{kind: &quotaKind}}
}

type quotaResource struct {
	objectResource[quotaModel, api.QuotaRequest, api.Quota]
}

var quotaKind = objectKind[quotaModel, api.QuotaRequest, api.Quota]{
	typeName:     "allot_quota",
	msgs:         withInvalid(defaultMessages("quota"), "Invalid quota", "The planned resource maps could not be read."),
	identity:     func(m *quotaModel) string { return m.Role.ValueString() },
	identityAttr: "role",
	what:         quotaWhat,
	path:         api.QuotaPath,
	unchanged: func(plan, state *quotaModel) bool {
		return plan.Role.Equal(state.Role) && plan.Guarantees.Equal(state.Guarantees) &&
			plan.Limits.Equal(state.Limits) && plan.Force.Equal(state.Force)
	},
	sameObject: func(plan, state *quotaModel) bool { return plan.Role.Equal(state.Role) },
	known: func(m *quotaModel) bool {
		return !m.Role.IsUnknown() && !m.Guarantees.IsUnknown() && !m.Limits.IsUnknown() && !m.Force.IsUnknown()
	},
	request:  (*quotaModel).request,
	force:    func(r api.QuotaRequest) bool { return r.Force },
	unforced: func(r api.QuotaRequest) api.QuotaRequest { r.Force = false; return r },
	put: func(ctx context.Context, c *api.Client, role string, r api.QuotaRequest, o api.WriteOptions) (*api.Quota, error) {
		return c.PutQuota(ctx, role, r, o)
	},
	get: func(ctx context.Context, c *api.Client, role string) (*api.Quota, error) {
		return c.Quota(ctx, role, api.ReadOptions{})
	},
	listed: func(ctx context.Context, d *providerData, id string) (api.Quota, bool, error) {
		return d.quotas.get(ctx, id, func(ctx context.Context) (map[string]api.Quota, error) { return listQuotas(ctx, d.client) })
	},
	del: func(ctx context.Context, c *api.Client, role string, o api.WriteOptions) error {
		return c.DeleteQuota(ctx, role, o)
	},
	matches: quotaMatches,
	version: func(m *quotaModel) int64 { return m.Version.ValueInt64() },
	written: func(m *quotaModel, role string, q *api.Quota) {
		m.ID = types.StringValue(role)
		m.Version = types.Int64Value(int64(q.Version))
	},
	refreshed: func(m *quotaModel, role string, q *api.Quota) {
		m.ID = types.StringValue(role)
		m.Guarantees = refreshResources(m.Guarantees, q.Guarantees)
		m.Limits = refreshResources(m.Limits, q.Limits)
		if m.Force.IsNull() {
			m.Force = types.BoolValue(false)
		}
		m.Version = types.Int64Value(int64(q.Version))
	},
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
				ElementType: types.NumberType,
				Optional:    true,
				Description: "The resources the role is always able to get, such as `{ cpus = 12, mem = 6144 }`. " +
					"Each guarantee must not exceed the limit of the same resource, and the guarantees of all roles together " +
					"must fit the resources of the admitted agents unless `force` is set. Leaving it out guarantees nothing." +
					resourceMapDescription,
				Validators:    []validator.Map{resourceMapValidator{}},
				PlanModifiers: []planmodifier.Map{normalizedResources{}},
			},
			"limits": schema.MapAttribute{
				ElementType: types.NumberType,
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
					"limit is below the role's current consumption; the plan then warns what force overrides (the " +
					"shortfall per resource). Defaults to `false`. It only affects writes and is not stored in the cluster.",
			},
			"version": schema.Int64Attribute{
				Computed: true,
				Description: "The cluster's version of the quota (the Raft index of its last change). Updates and " +
					"deletes are sent with it, so a change made outside Terraform since the last refresh is never overwritten.",
			},
		},
	}
}

func (r *quotaResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var cfg quotaModel
	resp.Diagnostics.Append(getConfig(ctx, req.Config, &cfg)...)
	if resp.Diagnostics.HasError() || cfg.Guarantees.IsUnknown() || cfg.Limits.IsUnknown() {
		return
	}
	for name, g := range cfg.Guarantees.Elements() {
		gn, ok := g.(types.Number)
		ln, lok := cfg.Limits.Elements()[name].(types.Number)
		if !ok || !lok || gn.IsNull() || gn.IsUnknown() || ln.IsNull() || ln.IsUnknown() {
			continue
		}
		gv, gfits := numberValue(gn)
		lv, lfits := numberValue(ln)
		if gfits && lfits && api.RoundScalar(gv) > api.RoundScalar(lv) {
			resp.Diagnostics.AddAttributeError(path.Root("guarantees").AtMapKey(name), "Guarantee above limit",
				fmt.Sprintf("The guarantee of %s (%s) is above its limit (%s): a role cannot be guaranteed more than it may use.",
					name, formatScalar(gv), formatScalar(lv)))
		}
	}
}

func quotaWhat(role string) string { return fmt.Sprintf("the quota of role %q", role) }

func (m *quotaModel) request() (api.QuotaRequest, bool) {
	guarantees, diags := resourcesFromMap(m.Guarantees)
	limits, limitDiags := resourcesFromMap(m.Limits)
	diags.Append(limitDiags...)
	return api.QuotaRequest{Guarantees: guarantees, Limits: limits, Force: m.Force.ValueBool()}, !diags.HasError()
}

func quotaMatches(q *api.Quota, req api.QuotaRequest) bool {
	return equalResources(q.Guarantees, req.Guarantees) && equalResources(q.Limits, req.Limits)
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
