package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
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
func NewRateLimitDefaultResource() resource.Resource {
	return &rateLimitDefaultResource{objectResource[rateLimitDefaultModel, api.RateLimitRequest, api.RateLimitDefault]{kind: &rateLimitDefaultKind}}
}

type rateLimitDefaultResource struct {
	objectResource[rateLimitDefaultModel, api.RateLimitRequest, api.RateLimitDefault]
}

// rateLimitDefaultKind: a cluster has one default limit, so the identity is
// always rateLimitDefaultID and there is no identity attribute.
var rateLimitDefaultKind = objectKind[rateLimitDefaultModel, api.RateLimitRequest, api.RateLimitDefault]{
	typeName: "allot_rate_limit_default",
	msgs: kindMessages{
		exists:  "Default rate limit already set",
		changed: "Default rate limit changed outside Terraform",
		create:  verb{"Unable to set default rate limit", "Setting"},
		read:    verb{"Unable to read default rate limit", "Reading"},
		update:  verb{"Unable to update default rate limit", "Updating"},
		delete:  verb{"Unable to remove default rate limit", "Removing"},
	},
	identity: func(*rateLimitDefaultModel) string { return rateLimitDefaultID },
	what:     func(string) string { return rateLimitDefaultWhat },
	path:     func(string) string { return api.RateLimitDefaultPath },
	unchanged: func(plan, state *rateLimitDefaultModel) bool {
		return plan.QPS.Equal(state.QPS) && plan.Burst.Equal(state.Burst) && plan.Capacity.Equal(state.Capacity)
	},
	sameObject: func(plan, state *rateLimitDefaultModel) bool { return true },
	known: func(m *rateLimitDefaultModel) bool {
		return !m.QPS.IsUnknown() && !m.Burst.IsUnknown() && !m.Capacity.IsUnknown()
	},
	request: func(m *rateLimitDefaultModel) (api.RateLimitRequest, bool) {
		return rateLimitRequest(m.QPS, m.Burst, m.Capacity)
	},
	planWarnings: func(ctx context.Context, d *providerData, _ string, r api.RateLimitRequest) diag.Diagnostics {
		var diags diag.Diagnostics
		// The default limits the provider's own calls when its principal has
		// no limit of its own.
		own, ok := d.ownPrincipal(ctx)
		if !ok {
			return diags
		}
		if _, err := d.client.RateLimit(ctx, own, api.ReadOptions{}); api.IsNotFound(err) {
			selfThrottleWarning(&diags, rateLimitDefaultWhat, own, r)
		}
		return diags
	},
	put: func(ctx context.Context, c *api.Client, _ string, r api.RateLimitRequest, o api.WriteOptions) (*api.RateLimitDefault, error) {
		return c.PutRateLimitDefault(ctx, r, o)
	},
	get: func(ctx context.Context, c *api.Client, _ string) (*api.RateLimitDefault, error) {
		return c.RateLimitDefault(ctx, api.ReadOptions{})
	},
	dryRunOnlyRefuses: true,
	del: func(ctx context.Context, c *api.Client, _ string, o api.WriteOptions) error {
		return c.DeleteRateLimitDefault(ctx, o)
	},
	matches: rateLimitDefaultMatches,
	version: func(m *rateLimitDefaultModel) int64 { return m.Version.ValueInt64() },
	written: func(m *rateLimitDefaultModel, id string, rl *api.RateLimitDefault) {
		m.ID = types.StringValue(id)
		m.Burst = types.Int64Value(int64(rl.Burst))
		m.Capacity = types.Int64Value(int64(rl.Capacity))
		m.Version = types.Int64Value(int64(rl.Version))
	},
	refreshed: func(m *rateLimitDefaultModel, id string, rl *api.RateLimitDefault) {
		m.ID = types.StringValue(id)
		m.QPS = qpsValue(m.QPS, rl.QPS)
		m.Burst = types.Int64Value(int64(rl.Burst))
		m.Capacity = types.Int64Value(int64(rl.Capacity))
		m.Version = types.Int64Value(int64(rl.Version))
	},
}

type rateLimitDefaultModel struct {
	ID       types.String `tfsdk:"id"`
	QPS      types.Number `tfsdk:"qps"`
	Burst    types.Int64  `tfsdk:"burst"`
	Capacity types.Int64  `tfsdk:"capacity"`
	Version  types.Int64  `tfsdk:"version"`
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

func (r *rateLimitDefaultResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var cfg rateLimitDefaultModel
	resp.Diagnostics.Append(getConfig(ctx, req.Config, &cfg)...)
	if !resp.Diagnostics.HasError() {
		validateBurst(cfg.QPS, cfg.Burst, &resp.Diagnostics)
	}
}

func rateLimitDefaultMatches(rl *api.RateLimitDefault, req api.RateLimitRequest) bool {
	return sameQPS(rl.QPS, req.QPS) && (req.Burst == nil || *req.Burst == rl.Burst) &&
		(req.Capacity == nil || *req.Capacity == rl.Capacity)
}

func (r *rateLimitDefaultResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if req.ID != rateLimitDefaultID {
		resp.Diagnostics.AddError("Invalid import ID",
			fmt.Sprintf("The import ID of allot_rate_limit_default is always %q, not %q.", rateLimitDefaultID, req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), rateLimitDefaultID)...)
}
