package provider

import (
	"context"
	"fmt"
	"net/http"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/allot/allot/masterd/api"
)

var (
	_ resource.Resource                   = (*rateLimitDefaultResource)(nil)
	_ resource.ResourceWithConfigure      = (*rateLimitDefaultResource)(nil)
	_ resource.ResourceWithImportState    = (*rateLimitDefaultResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*rateLimitDefaultResource)(nil)
	_ resource.ResourceWithValidateConfig = (*rateLimitDefaultResource)(nil)
)

// rateLimitDefaultID is the ID of the one default limit of a cluster.
const rateLimitDefaultID = "default"

const rateLimitDefaultWhat = "the default rate limit"

// NewRateLimitDefaultResource is the allot_rate_limit_default resource.
func NewRateLimitDefaultResource() resource.Resource { return &rateLimitDefaultResource{} }

type rateLimitDefaultResource struct {
	data *providerData
}

type rateLimitDefaultModel struct {
	ID       types.String  `tfsdk:"id"`
	QPS      types.Float64 `tfsdk:"qps"`
	Burst    types.Int64   `tfsdk:"burst"`
	Capacity types.Int64   `tfsdk:"capacity"`
	Version  types.Int64   `tfsdk:"version"`
}

func (r *rateLimitDefaultResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_rate_limit_default"
}

func (r *rateLimitDefaultResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	attrs := rateLimitValueAttributes("all principals without a limit of their own together")
	attrs["id"] = schema.StringAttribute{
		Computed:      true,
		Description:   "Always `default`, which is also the import ID.",
		PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
	}
	resp.Schema = schema.Schema{
		Description: "Sets the aggregate default rate limit that every framework principal without an " +
			"`allot_rate_limit` of its own shares. A cluster has one; declare it at most once. Without it, such " +
			"principals are not throttled.",
		Attributes: attrs,
	}
}

func (r *rateLimitDefaultResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (r *rateLimitDefaultResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var cfg rateLimitDefaultModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if !resp.Diagnostics.HasError() {
		validateBurst(cfg.QPS, cfg.Burst, &resp.Diagnostics)
	}
}

func rateLimitDefaultMatches(rl *api.RateLimitDefault, req api.RateLimitRequest) bool {
	return sameQPS(rl.QPS, req.QPS) && (req.Burst == nil || *req.Burst == rl.Burst) &&
		(req.Capacity == nil || *req.Capacity == rl.Capacity)
}

func (r *rateLimitDefaultResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		resp.Diagnostics.Append(r.data.checkPlan(ctx, dryRun{
			action: actionDelete, what: rateLimitDefaultWhat, method: http.MethodDelete, path: api.RateLimitDefaultPath,
		})...)
		return
	}
	var plan rateLimitDefaultModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	action := actionCreate
	if !req.State.Raw.IsNull() {
		var state rateLimitDefaultModel
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		if resp.Diagnostics.HasError() {
			return
		}
		if plan.QPS.Equal(state.QPS) && plan.Burst.Equal(state.Burst) && plan.Capacity.Equal(state.Capacity) {
			resp.Diagnostics.Append(resp.Plan.Set(ctx, state)...)
			return
		}
		action = actionUpdate
	}
	if plan.QPS.IsUnknown() || plan.Burst.IsUnknown() || plan.Capacity.IsUnknown() {
		return
	}
	resp.Diagnostics.Append(r.data.checkPlan(ctx, dryRun{
		action: action, what: rateLimitDefaultWhat, method: http.MethodPut, path: api.RateLimitDefaultPath,
		body: rateLimitRequest(plan.QPS, plan.Burst, plan.Capacity),
	})...)
}

func (r *rateLimitDefaultResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	if r.data == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var plan rateLimitDefaultModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	body := rateLimitRequest(plan.QPS, plan.Burst, plan.Capacity)
	ctx, cancel := r.data.withTimeout(ctx)
	defer cancel()

	rl, err := r.data.client.PutRateLimitDefault(ctx, body, api.WriteOptions{IfNoneMatch: true})
	if api.IsPreconditionFailed(err) {
		// Set before, or our own write stored before a failover lost its
		// answer (see allot_quota).
		current, getErr := r.data.client.RateLimitDefault(ctx, api.ReadOptions{})
		if getErr != nil || !rateLimitDefaultMatches(current, body) {
			addExistsError(&resp.Diagnostics, "Default rate limit already set", rateLimitDefaultWhat,
				"allot_rate_limit_default", rateLimitDefaultID)
			return
		}
		rl, err = current, nil
	}
	if err != nil {
		addAPIError(&resp.Diagnostics, "Unable to set default rate limit", "Setting", rateLimitDefaultWhat, err)
		return
	}
	plan.ID = types.StringValue(rateLimitDefaultID)
	plan.Burst = types.Int64Value(int64(rl.Burst))
	plan.Capacity = types.Int64Value(int64(rl.Capacity))
	plan.Version = types.Int64Value(int64(rl.Version))
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *rateLimitDefaultResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	if r.data == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var state rateLimitDefaultModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := r.data.withTimeout(ctx)
	defer cancel()

	rl, err := r.data.client.RateLimitDefault(ctx, api.ReadOptions{})
	if api.IsNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		addAPIError(&resp.Diagnostics, "Unable to read default rate limit", "Reading", rateLimitDefaultWhat, err)
		return
	}
	state.ID = types.StringValue(rateLimitDefaultID)
	state.QPS = qpsValue(rl.QPS)
	state.Burst = types.Int64Value(int64(rl.Burst))
	state.Capacity = types.Int64Value(int64(rl.Capacity))
	state.Version = types.Int64Value(int64(rl.Version))
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *rateLimitDefaultResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	if r.data == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var plan, state rateLimitDefaultModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	body := rateLimitRequest(plan.QPS, plan.Burst, plan.Capacity)
	ctx, cancel := r.data.withTimeout(ctx)
	defer cancel()

	rl, err := r.data.client.PutRateLimitDefault(ctx, body, api.WriteOptions{IfMatch: uint64(state.Version.ValueInt64())})
	if api.IsPreconditionFailed(err) {
		current, getErr := r.data.client.RateLimitDefault(ctx, api.ReadOptions{})
		if getErr != nil || !rateLimitDefaultMatches(current, body) {
			addChangedError(&resp.Diagnostics, "Default rate limit changed outside Terraform", rateLimitDefaultWhat,
				state.Version.ValueInt64(), err)
			return
		}
		rl, err = current, nil
	}
	if err != nil {
		addAPIError(&resp.Diagnostics, "Unable to update default rate limit", "Updating", rateLimitDefaultWhat, err)
		return
	}
	plan.ID = types.StringValue(rateLimitDefaultID)
	plan.Burst = types.Int64Value(int64(rl.Burst))
	plan.Capacity = types.Int64Value(int64(rl.Capacity))
	plan.Version = types.Int64Value(int64(rl.Version))
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *rateLimitDefaultResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	if r.data == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var state rateLimitDefaultModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := r.data.withTimeout(ctx)
	defer cancel()

	err := r.data.client.DeleteRateLimitDefault(ctx, api.WriteOptions{IfMatch: uint64(state.Version.ValueInt64())})
	switch {
	case err == nil, api.IsNotFound(err):
	case api.IsPreconditionFailed(err):
		addChangedError(&resp.Diagnostics, "Default rate limit changed outside Terraform", rateLimitDefaultWhat,
			state.Version.ValueInt64(), err)
	default:
		addAPIError(&resp.Diagnostics, "Unable to remove default rate limit", "Removing", rateLimitDefaultWhat, err)
	}
}

func (r *rateLimitDefaultResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if req.ID != rateLimitDefaultID {
		resp.Diagnostics.AddError("Invalid import ID",
			fmt.Sprintf("The import ID of allot_rate_limit_default is always %q, not %q.", rateLimitDefaultID, req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), rateLimitDefaultID)...)
}
