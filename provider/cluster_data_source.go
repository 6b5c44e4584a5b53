package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/allot/allot/masterd/api"
)

var (
	_ datasource.DataSource              = (*clusterDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*clusterDataSource)(nil)
)

// NewClusterDataSource is the allot_cluster data source.
func NewClusterDataSource() datasource.DataSource { return &clusterDataSource{} }

type clusterDataSource struct {
	data *providerData
}

type clusterModel struct {
	Leader    *serverModel  `tfsdk:"leader"`
	Servers   []serverModel `tfsdk:"servers"`
	Recovery  recoveryModel `tfsdk:"recovery"`
	Total     types.Map     `tfsdk:"total"`
	Allocated types.Map     `tfsdk:"allocated"`
}

type serverModel struct {
	ID          types.String `tfsdk:"id"`
	RaftAddress types.String `tfsdk:"raft_address"`
	APIAddress  types.String `tfsdk:"api_address"`
	Suffrage    types.String `tfsdk:"suffrage"`
	Leader      types.Bool   `tfsdk:"leader"`
}

type recoveryModel struct {
	Active       types.Bool   `tfsdk:"active"`
	Reregistered types.Int64  `tfsdk:"reregistered"`
	Expected     types.Int64  `tfsdk:"expected"`
	Deadline     types.String `tfsdk:"deadline"`
}

func serverAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"id":           schema.StringAttribute{Computed: true, Description: "The server's Raft ID, such as `m1`."},
		"raft_address": schema.StringAttribute{Computed: true, Description: "The address the server speaks Raft on."},
		"api_address":  schema.StringAttribute{Computed: true, Description: "The address of the server's HTTP API."},
		"suffrage":     schema.StringAttribute{Computed: true, Description: "The server's Raft suffrage, such as `voter`."},
		"leader":       schema.BoolAttribute{Computed: true, Description: "Whether the server is the leader."},
	}
}

func (d *clusterDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_cluster"
}

func (d *clusterDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Reads the cluster's servers, its leader, whether a new leader is still recovering, and the total " +
			"and allocated resources of its agents, as the leader itself sees them. A read right after the leader died " +
			"waits (within the provider's `timeout`) for the next leader to be elected, instead of showing the dead one, " +
			"which the other servers keep naming until they notice it is gone.",
		Attributes: map[string]schema.Attribute{
			"leader": schema.SingleNestedAttribute{
				Computed:    true,
				Description: "The current leader, confirmed by the leader itself.",
				Attributes:  serverAttributes(),
			},
			"servers": schema.ListNestedAttribute{
				Computed:     true,
				Description:  "Every server of the cluster.",
				NestedObject: schema.NestedAttributeObject{Attributes: serverAttributes()},
			},
			"recovery": schema.SingleNestedAttribute{
				Computed: true,
				Description: "Whether a newly elected leader still waits for agents to re-register before it sends offers " +
					"(it cannot judge quota guarantees on half a cluster).",
				Attributes: map[string]schema.Attribute{
					"active":       schema.BoolAttribute{Computed: true, Description: "Whether the leader is still waiting."},
					"reregistered": schema.Int64Attribute{Computed: true, Description: "How many agents have re-registered."},
					"expected":     schema.Int64Attribute{Computed: true, Description: "How many agents the leader waits for."},
					"deadline": schema.StringAttribute{
						Computed:    true,
						Description: "When the leader stops waiting (RFC 3339), or null when it is not waiting.",
					},
				},
			},
			"total": schema.MapAttribute{
				ElementType: types.Float64Type,
				Computed:    true,
				Description: "The total resources of the admitted agents, such as `{ cpus = 64, mem = 262144 }`.",
			},
			"allocated": schema.MapAttribute{
				ElementType: types.Float64Type,
				Computed:    true,
				Description: "The resources allocated to frameworks right now.",
			},
		},
	}
}

func (d *clusterDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func serverValue(s api.Server) serverModel {
	return serverModel{
		ID:          types.StringValue(s.ID),
		RaftAddress: types.StringValue(s.RaftAddress),
		APIAddress:  types.StringValue(s.APIAddress),
		Suffrage:    types.StringValue(s.Suffrage),
		Leader:      types.BoolValue(s.Leader),
	}
}

func timeValue(t *time.Time) types.String {
	if t == nil || t.IsZero() {
		return types.StringNull()
	}
	return types.StringValue(t.UTC().Format(time.RFC3339Nano))
}

func (d *clusterDataSource) Read(ctx context.Context, _ datasource.ReadRequest, resp *datasource.ReadResponse) {
	if d.data == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	ctx, cancel := d.data.withTimeout(ctx)
	defer cancel()
	// From the leader itself: right after a leader dies, a follower still
	// names it until its heartbeat timeout runs out.
	cluster, err := d.data.client.LeaderCluster(ctx)
	if err != nil {
		addAPIError(&resp.Diagnostics, "Unable to read cluster", "Reading", "the cluster", err)
		return
	}
	state := clusterModel{
		Servers: make([]serverModel, 0, len(cluster.Servers)),
		Recovery: recoveryModel{
			Active:       types.BoolValue(cluster.Recovery.Active),
			Reregistered: types.Int64Value(int64(cluster.Recovery.Reregistered)),
			Expected:     types.Int64Value(int64(cluster.Recovery.Expected)),
			Deadline:     timeValue(cluster.Recovery.Deadline),
		},
		Total:     resourceMapValue(cluster.Total),
		Allocated: resourceMapValue(cluster.Allocated),
	}
	if cluster.Leader != nil && cluster.Leader.ID != "" {
		leader := serverValue(*cluster.Leader)
		leader.Leader = types.BoolValue(true)
		if leader.Suffrage.ValueString() == "" {
			leader.Suffrage = types.StringValue("voter")
		}
		state.Leader = &leader
	}
	for _, s := range cluster.Servers {
		state.Servers = append(state.Servers, serverValue(s))
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}
