package provider

import (
	"context"
	"sort"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/allot/allot/masterd/api"
)

var (
	_ datasource.DataSource              = (*agentsDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*agentsDataSource)(nil)
)

// NewAgentsDataSource is the allot_agents data source.
func NewAgentsDataSource() datasource.DataSource { return &agentsDataSource{} }

type agentsDataSource struct {
	data *providerData
}

type agentsModel struct {
	Agents []agentModel `tfsdk:"agents"`
}

type agentModel struct {
	ID                 types.String   `tfsdk:"id"`
	Name               types.String   `tfsdk:"name"`
	Hostname           types.String   `tfsdk:"hostname"`
	Resources          types.Map      `tfsdk:"resources"`
	Reserved           types.Map      `tfsdk:"reserved"`
	Allocated          types.Map      `tfsdk:"allocated"`
	Revocable          types.Map      `tfsdk:"revocable"`
	RevocableAllocated types.Map      `tfsdk:"revocable_allocated"`
	Capabilities       []types.String `tfsdk:"capabilities"`
	Connected          types.Bool     `tfsdk:"connected"`
	RegisteredAt       types.String   `tfsdk:"registered_at"`
}

func (d *agentsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_agents"
}

func (d *agentsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resources := func(description string) schema.MapAttribute {
		return schema.MapAttribute{ElementType: types.Float64Type, Computed: true, Description: description}
	}
	resp.Schema = schema.Schema{
		Description: "Lists the agents admitted to the cluster with their resources, reservations and allocations, " +
			"sorted by name.",
		Attributes: map[string]schema.Attribute{
			"agents": schema.ListNestedAttribute{
				Computed:    true,
				Description: "The admitted agents, sorted by name.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"id":        schema.StringAttribute{Computed: true, Description: "The agent's ID, assigned when it was admitted."},
					"name":      schema.StringAttribute{Computed: true, Description: "The agent's name, such as `node-1`, which reservations refer to."},
					"hostname":  schema.StringAttribute{Computed: true, Description: "The host the agent runs on."},
					"resources": resources("The agent's total resources."),
					"reserved":  resources("The agent's resources reserved for roles."),
					"allocated": resources("The agent's resources allocated to frameworks right now."),
					"revocable": resources("What the agent can lend now as revocable resources: its estimator's usage slack " +
						"plus its idle reservations within their roles' lending limits."),
					"revocable_allocated": resources("The revocable resources offered or in use on the agent."),
					"capabilities": schema.ListAttribute{
						ElementType: types.StringType, Computed: true,
						Description: "The agent's capabilities, such as `TASK_RESOURCE_LIMITS`.",
					},
					"connected":     schema.BoolAttribute{Computed: true, Description: "Whether the agent is connected to the leader."},
					"registered_at": schema.StringAttribute{Computed: true, Description: "When the agent was admitted (RFC 3339)."},
				}},
			},
		},
	}
}

func (d *agentsDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *agentsDataSource) Read(ctx context.Context, _ datasource.ReadRequest, resp *datasource.ReadResponse) {
	if d.data == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	ctx, cancel := d.data.withTimeout(ctx)
	defer cancel()
	agents, err := d.data.client.Agents(ctx, api.ReadOptions{})
	if err != nil {
		addAPIError(&resp.Diagnostics, "Unable to list agents", "Listing", "the agents", err)
		return
	}
	sort.Slice(agents, func(i, j int) bool { return agents[i].Name < agents[j].Name })
	state := agentsModel{Agents: make([]agentModel, 0, len(agents))}
	for _, a := range agents {
		caps := make([]types.String, 0, len(a.Capabilities))
		for _, c := range a.Capabilities {
			caps = append(caps, types.StringValue(c))
		}
		registered := a.RegisteredAt
		state.Agents = append(state.Agents, agentModel{
			ID:                 types.StringValue(a.ID),
			Name:               types.StringValue(a.Name),
			Hostname:           types.StringValue(a.Hostname),
			Resources:          resourceMapValue(a.Resources),
			Reserved:           resourceMapValue(a.Reserved),
			Allocated:          resourceMapValue(a.Allocated),
			Revocable:          resourceMapValue(a.Revocable),
			RevocableAllocated: resourceMapValue(a.RevocableAllocated),
			Capabilities:       caps,
			Connected:          types.BoolValue(a.Connected),
			RegisteredAt:       timeValue(&registered),
		})
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}
