package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/allot/allot/masterd/api"
)

var (
	_ datasource.DataSource              = (*roleDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*roleDataSource)(nil)
)

// NewRoleDataSource is the allot_role data source.
func NewRoleDataSource() datasource.DataSource { return &roleDataSource{} }

type roleDataSource struct {
	data *providerData
}

type roleDataModel struct {
	Name               types.String    `tfsdk:"name"`
	Weight             types.Float64   `tfsdk:"weight"`
	LendingLimit       types.Map       `tfsdk:"lending_limit"`
	Quota              *roleQuotaModel `tfsdk:"quota"`
	Allocated          types.Map       `tfsdk:"allocated"`
	Reserved           types.Map       `tfsdk:"reserved"`
	Offered            types.Map       `tfsdk:"offered"`
	RevocableAllocated types.Map       `tfsdk:"revocable_allocated"`
	Lent               types.Map       `tfsdk:"lent"`
	Frameworks         []types.String  `tfsdk:"frameworks"`
	Version            types.Int64     `tfsdk:"version"`
}

type roleQuotaModel struct {
	Guarantees types.Map   `tfsdk:"guarantees"`
	Limits     types.Map   `tfsdk:"limits"`
	Version    types.Int64 `tfsdk:"version"`
}

func (d *roleDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_role"
}

func (d *roleDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resources := func(description string) schema.MapAttribute {
		return schema.MapAttribute{ElementType: types.Float64Type, Computed: true, Description: description}
	}
	resp.Schema = schema.Schema{
		Description: "Reads a role's configuration, its quota and what it consumes right now: allocated, reserved, " +
			"offered and revocable resources, and its frameworks. Every valid role can be read; one never configured " +
			"has weight 1, no quota and version 0.",
		Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{
				Required:    true,
				Description: "The role, such as `eng/ml`.",
				Validators:  []validator.String{roleValidator{}},
			},
			"weight": schema.Float64Attribute{Computed: true, Description: "The role's weight in fair sharing."},
			"lending_limit": schema.MapAttribute{
				ElementType: types.Float64Type, Computed: true,
				Description: "The most of each resource the role's idle reservations lend as revocable resources: null " +
					"when uncapped; a resource the map leaves out is not lent, so an empty map lends nothing.",
			},
			"quota": schema.SingleNestedAttribute{
				Computed:    true,
				Description: "The role's quota, or null when it has none.",
				Attributes: map[string]schema.Attribute{
					"guarantees": resources("The resources the role is guaranteed."),
					"limits":     resources("The resources the role may never exceed; a resource left out is unlimited."),
					"version":    schema.Int64Attribute{Computed: true, Description: "The quota's version."},
				},
			},
			"allocated":           resources("The resources allocated to the role's frameworks, reserved ones included."),
			"reserved":            resources("The resources reserved for the role."),
			"offered":             resources("The resources offered to the role's frameworks and not yet accepted or declined."),
			"revocable_allocated": resources("The revocable resources offered to or used by the role's frameworks; they never count toward quota."),
			"lent":                resources("What other roles hold of the role's own reservations as revocable resources, offered or in use."),
			"frameworks": schema.ListAttribute{
				ElementType: types.StringType, Computed: true,
				Description: "The IDs of the frameworks subscribed to the role.",
			},
			"version": schema.Int64Attribute{
				Computed:    true,
				Description: "The version of the role's weight and lending limit; 0 when it was never configured.",
			},
		},
	}
}

func (d *roleDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *roleDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	if d.data == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var cfg roleDataModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := cfg.Name.ValueString()
	ctx, cancel := d.data.withTimeout(ctx)
	defer cancel()
	role, err := d.data.client.Role(ctx, name, api.ReadOptions{})
	if err != nil {
		addAPIError(&resp.Diagnostics, "Unable to read role", "Reading", roleWhat(name), err)
		return
	}
	state := roleDataModel{
		Name:               cfg.Name,
		Weight:             types.Float64Value(role.Weight),
		LendingLimit:       lendingLimitFloats(role.LendingLimit),
		Allocated:          resourceMapValue(role.Allocated),
		Reserved:           resourceMapValue(role.Reserved),
		Offered:            resourceMapValue(role.Offered),
		RevocableAllocated: resourceMapValue(role.RevocableAllocated),
		Lent:               resourceMapValue(role.Lent),
		Frameworks:         make([]types.String, 0, len(role.Frameworks)),
		Version:            types.Int64Value(int64(role.Version)),
	}
	if role.Quota != nil {
		state.Quota = &roleQuotaModel{
			Guarantees: resourceMapValue(role.Quota.Guarantees),
			Limits:     resourceMapValue(role.Quota.Limits),
			Version:    types.Int64Value(int64(role.Quota.Version)),
		}
	}
	for _, f := range role.Frameworks {
		state.Frameworks = append(state.Frameworks, types.StringValue(f))
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// lendingLimitFloats is a lending limit for the data source: null when
// uncapped, an empty map when the role lends nothing.
func lendingLimitFloats(r api.Resources) types.Map {
	if r == nil {
		return types.MapNull(types.Float64Type)
	}
	return resourceMapValue(r)
}
