package provider

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/allot/allot/masterd/api"
)

var (
	_ resource.Resource                   = (*rateLimitResource)(nil)
	_ resource.ResourceWithConfigure      = (*rateLimitResource)(nil)
	_ resource.ResourceWithImportState    = (*rateLimitResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*rateLimitResource)(nil)
	_ resource.ResourceWithValidateConfig = (*rateLimitResource)(nil)
)

// Bounds the cluster enforces on rate-limit values.
const (
	maxQPS             = 1e9
	maxBurstOrCapacity = 1 << 24
)

// NewRateLimitResource is the allot_rate_limit resource.
func NewRateLimitResource() resource.Resource {
	return &rateLimitResource{objectResource[rateLimitModel, api.RateLimitRequest, api.RateLimit]{kind: &rateLimitKind}}
}

type rateLimitResource struct {
	objectResource[rateLimitModel, api.RateLimitRequest, api.RateLimit]
}

var rateLimitKind = objectKind[rateLimitModel, api.RateLimitRequest, api.RateLimit]{
	typeName: "allot_rate_limit",
	msgs:     defaultMessages("rate limit"),
	identity: func(m *rateLimitModel) string {
		return rateLimitID(m.Principal.ValueString(), m.Label.ValueString())
	},
	identityAttr: "principal",
	what:         rateLimitIDWhat,
	path:         rateLimitIDPath,
	unchanged: func(plan, state *rateLimitModel) bool {
		return sameRateLimit(plan, state) && plan.QPS.Equal(state.QPS) && plan.Burst.Equal(state.Burst) &&
			plan.Capacity.Equal(state.Capacity)
	},
	sameObject: sameRateLimit,
	known: func(m *rateLimitModel) bool {
		return !m.Principal.IsUnknown() && !m.Label.IsUnknown() && !m.QPS.IsUnknown() && !m.Burst.IsUnknown() &&
			!m.Capacity.IsUnknown()
	},
	request: func(m *rateLimitModel) (api.RateLimitRequest, bool) {
		return rateLimitRequest(m.QPS, m.Burst, m.Capacity)
	},
	planWarnings: func(ctx context.Context, d *providerData, id string, r api.RateLimitRequest) diag.Diagnostics {
		var diags diag.Diagnostics
		principal, label := splitRateLimitID(id)
		if label != "" {
			return diags // the provider's calls carry no label
		}
		if own, ok := d.ownPrincipal(ctx); ok && own == principal {
			selfThrottleWarning(&diags, rateLimitWhat(principal), own, r)
		}
		return diags
	},
	put: func(ctx context.Context, c *api.Client, id string, r api.RateLimitRequest, o api.WriteOptions) (*api.RateLimit, error) {
		if principal, label := splitRateLimitID(id); label != "" {
			return c.PutLabeledRateLimit(ctx, principal, label, r, o)
		}
		return c.PutRateLimit(ctx, id, r, o)
	},
	get: func(ctx context.Context, c *api.Client, id string) (*api.RateLimit, error) {
		if principal, label := splitRateLimitID(id); label != "" {
			return c.LabeledRateLimit(ctx, principal, label, api.ReadOptions{})
		}
		return c.RateLimit(ctx, id, api.ReadOptions{})
	},
	listed: func(ctx context.Context, d *providerData, id string) (api.RateLimit, bool, error) {
		return d.rateLimits.get(ctx, id, func(ctx context.Context) (map[string]api.RateLimit, error) { return listRateLimits(ctx, d.client) })
	},
	dryRunOnlyRefuses: true,
	del: func(ctx context.Context, c *api.Client, id string, o api.WriteOptions) error {
		if principal, label := splitRateLimitID(id); label != "" {
			return c.DeleteLabeledRateLimit(ctx, principal, label, o)
		}
		return c.DeleteRateLimit(ctx, id, o)
	},
	matches: rateLimitMatches,
	version: func(m *rateLimitModel) int64 { return m.Version.ValueInt64() },
	written: func(m *rateLimitModel, id string, rl *api.RateLimit) {
		m.ID = types.StringValue(id)
		m.Burst = types.Int64Value(int64(rl.Burst))
		m.Capacity = types.Int64Value(int64(rl.Capacity))
		m.Version = types.Int64Value(int64(rl.Version))
	},
	refreshed: func(m *rateLimitModel, id string, rl *api.RateLimit) {
		m.ID = types.StringValue(id)
		m.QPS = qpsValue(m.QPS, rl.QPS)
		m.Burst = types.Int64Value(int64(rl.Burst))
		m.Capacity = types.Int64Value(int64(rl.Capacity))
		m.Version = types.Int64Value(int64(rl.Version))
	},
}

type rateLimitModel struct {
	ID        types.String `tfsdk:"id"`
	Principal types.String `tfsdk:"principal"`
	Label     types.String `tfsdk:"label"`
	QPS       types.Number `tfsdk:"qps"`
	Burst     types.Int64  `tfsdk:"burst"`
	Capacity  types.Int64  `tfsdk:"capacity"`
	Version   types.Int64  `tfsdk:"version"`
}

// rateLimitValueAttributes are the attributes allot_rate_limit and
// allot_rate_limit_default share.
func rateLimitValueAttributes(whose string) map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"qps": schema.NumberAttribute{
			Optional: true,
			Description: "The calls per second " + whose + " may make, such as `55.5`; calls beyond it wait in a " +
				"queue. Leaving it out counts the calls without throttling them. Must be above 0 and at most 1000000000.",
			Validators: []validator.Number{finiteValidator{min: 0, max: maxQPS}},
		},
		"burst": schema.Int64Attribute{
			Optional: true,
			Computed: true,
			Description: "How many calls may be made at once before the rate applies (the token bucket's size), " +
				"at least 1 when `qps` is set and at most 16777216. Defaults to `qps` rounded up (at least 1), or 0 " +
				"without `qps`.",
			Validators:    []validator.Int64{int64validator.Between(0, maxBurstOrCapacity)},
			PlanModifiers: []planmodifier.Int64{defaultBurst{}},
		},
		"capacity": schema.Int64Attribute{
			Optional: true,
			Computed: true,
			Default:  int64default.StaticInt64(api.DefaultRateLimitCapacity),
			Description: "How many calls may wait for their turn; further calls are refused with HTTP 429 and " +
				"`Retry-After`. `0` refuses a call as soon as no token is left; at most 16777216. Defaults to `1000`.",
			Validators: []validator.Int64{int64validator.Between(0, maxBurstOrCapacity)},
		},
		"version": schema.Int64Attribute{
			Computed: true,
			Description: "The cluster's version of the limit (the Raft index of its last change). Updates and deletes " +
				"are sent with it, so a change made outside Terraform since the last refresh is never overwritten.",
		},
	}
}

func (r *rateLimitResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_rate_limit"
}

func (r *rateLimitResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	attrs := rateLimitValueAttributes("the principal")
	attrs["id"] = schema.StringAttribute{
		Computed:      true,
		Description:   "The principal, or `principal/label` for a labeled limit; also the import ID.",
		PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
	}
	attrs["principal"] = schema.StringAttribute{
		Required: true,
		Description: "The framework principal whose scheduler calls are limited, such as `spark`: letters, digits " +
			"and `_.:@-`. Changing it forces a new limit.",
		Validators:    []validator.String{nameValidator{kind: "principal"}},
		PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
	}
	attrs["label"] = schema.StringAttribute{
		Optional: true,
		Description: "Narrows the limit to the principal's frameworks that subscribe with this label " +
			"(`framework_info.label`), such as `batch`: letters, digits and `_.:@-`. Their calls wait for this limit " +
			"first, then for the principal's own limit (or the default limit when the principal has none), which " +
			"still caps all of its frameworks together. Leave it out to limit the principal itself. Changing it " +
			"forces a new limit.",
		Validators:    []validator.String{nameValidator{kind: "label"}},
		PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
	}
	resp.Schema = schema.Schema{
		Description: "Limits the rate of one framework principal's scheduler calls on every server of the cluster, " +
			"or, with `label`, of the principal's frameworks with that label. Principals without a limit of their own " +
			"share the default limit (`allot_rate_limit_default`). A change takes effect at once, without dropping " +
			"queued calls.",
		Attributes: attrs,
	}
}

func (r *rateLimitResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var cfg rateLimitModel
	resp.Diagnostics.Append(getConfig(ctx, req.Config, &cfg)...)
	if !resp.Diagnostics.HasError() {
		validateBurst(cfg.QPS, cfg.Burst, &resp.Diagnostics)
	}
}

func rateLimitWhat(principal string) string {
	return fmt.Sprintf("the rate limit of principal %q", principal)
}

// A labeled limit's identity is "principal/label": a principal has no
// slash, so the first one splits the two, and the identity doubles as the
// import ID.
func rateLimitID(principal, label string) string {
	if label == "" {
		return principal
	}
	return principal + "/" + label
}

func splitRateLimitID(id string) (principal, label string) {
	principal, label, _ = strings.Cut(id, "/")
	return principal, label
}

func rateLimitIDWhat(id string) string {
	principal, label := splitRateLimitID(id)
	if label == "" {
		return rateLimitWhat(principal)
	}
	return fmt.Sprintf("the rate limit of principal %q with label %q", principal, label)
}

func rateLimitIDPath(id string) string {
	if principal, label := splitRateLimitID(id); label != "" {
		return api.LabeledRateLimitPath(principal, label)
	}
	return api.RateLimitPath(id)
}

func sameRateLimit(plan, state *rateLimitModel) bool {
	return plan.Principal.Equal(state.Principal) && plan.Label.Equal(state.Label)
}

// rateLimitRequest builds the PUT body; a burst the configuration leaves out
// is left to the cluster's default, which the plan already shows.
func rateLimitRequest(qps types.Number, burst, capacity types.Int64) (api.RateLimitRequest, bool) {
	var req api.RateLimitRequest
	if !qps.IsNull() && !qps.IsUnknown() {
		v, ok := numberValue(qps)
		if !ok {
			return req, false
		}
		req.QPS = &v
	}
	if !burst.IsNull() && !burst.IsUnknown() {
		v := int(burst.ValueInt64())
		req.Burst = &v
	}
	if !capacity.IsNull() && !capacity.IsUnknown() {
		v := int(capacity.ValueInt64())
		req.Capacity = &v
	}
	return req, true
}

func sameQPS(a *float64, b *float64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func rateLimitMatches(rl *api.RateLimit, req api.RateLimitRequest) bool {
	return sameQPS(rl.QPS, req.QPS) && (req.Burst == nil || *req.Burst == rl.Burst) &&
		(req.Capacity == nil || *req.Capacity == rl.Capacity)
}

// qpsValue is the qps Read stores: null for none, the prior state when it is
// the same number.
func qpsValue(prior types.Number, qps *float64) types.Number {
	if qps == nil {
		return types.NumberNull()
	}
	return refreshNumber(prior, *qps)
}

// defaultBurst plans the burst the cluster derives when the configuration
// leaves it out: max(1, ceil(qps)).
//
// Why: burst is computed by the cluster, so without this the plan could only
// say "known after apply" for it on every change of qps, or keep the old
// value (UseStateForUnknown) and be wrong once qps changed. Planning the
// cluster's rule shows the real value and lets a burst removed from the
// configuration return to its default.
type defaultBurst struct{}

var _ planmodifier.Int64 = defaultBurst{}

func (defaultBurst) Description(context.Context) string {
	return "Defaults to max(1, ceil(qps))."
}

func (m defaultBurst) MarkdownDescription(ctx context.Context) string { return m.Description(ctx) }

func (defaultBurst) PlanModifyInt64(ctx context.Context, req planmodifier.Int64Request, resp *planmodifier.Int64Response) {
	if !req.ConfigValue.IsNull() {
		return
	}
	var qps types.Number
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("qps"), &qps)...)
	if resp.Diagnostics.HasError() || qps.IsUnknown() {
		return
	}
	resp.PlanValue = types.Int64Value(defaultBurstFor(qps))
}

// defaultBurstFor is the cluster's default burst for a qps; a limit without
// qps throttles nothing and has no bucket.
func defaultBurstFor(qps types.Number) int64 {
	v, ok := numberValue(qps)
	if qps.IsNull() || !ok {
		return 0
	}
	return min(max(1, int64(math.Ceil(v))), maxBurstOrCapacity)
}

// validateBurst rejects a burst of 0 with a qps: such a bucket could never
// let a call through.
func validateBurst(qps types.Number, burst types.Int64, diags *diag.Diagnostics) {
	if qps.IsNull() || qps.IsUnknown() || burst.IsNull() || burst.IsUnknown() || burst.ValueInt64() >= 1 {
		return
	}
	diags.AddAttributeError(path.Root("burst"), "Invalid burst",
		"A limit with a qps needs a burst of at least 1, or no burst for the default of qps rounded up.")
}

func (r *rateLimitResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	principal, label, labeled := strings.Cut(req.ID, "/")
	err := api.ValidateName("principal", principal)
	if err == nil && labeled {
		err = api.ValidateName("label", label)
	}
	if err != nil {
		resp.Diagnostics.AddError("Invalid import ID",
			fmt.Sprintf("The import ID of allot_rate_limit is the principal, such as spark, or principal/label for "+
				"a labeled limit, such as spark/batch: %v.", err))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("principal"), principal)...)
	if labeled {
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("label"), label)...)
	}
}
