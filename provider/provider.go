// Package provider is the Terraform provider for allot: quotas, role weights,
// reservations and rate limits as Terraform resources, checked against the
// live cluster at plan time.
package provider

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/allot/allot/masterd/api"
)

// Address is the provider's source address in the Terraform registry.
const Address = "registry.terraform.io/allot/allot"

// Environment variables the provider reads when its configuration leaves the
// matching attribute out.
const (
	EnvAddresses  = "ALLOT_ADDR"
	EnvToken      = "ALLOT_TOKEN"
	EnvStrictPlan = "ALLOT_STRICT_PLAN"
)

const (
	defaultAddress = "http://127.0.0.1:5050"
	defaultTimeout = 30 * time.Second
	// maxAttemptTimeout bounds one HTTP attempt, so that a server that hangs
	// instead of refusing costs one attempt rather than the whole timeout.
	maxAttemptTimeout = 10 * time.Second
)

var _ provider.Provider = (*allotProvider)(nil)

type allotProvider struct {
	version string
}

type providerModel struct {
	Addresses  types.List   `tfsdk:"addresses"`
	Token      types.String `tfsdk:"token"`
	Timeout    types.String `tfsdk:"timeout"`
	StrictPlan types.Bool   `tfsdk:"strict_plan"`
}

// New returns the provider factory for providerserver.Serve and for
// acceptance tests; version is the release version ("dev" for local builds).
func New(version string) func() provider.Provider {
	return func() provider.Provider {
		return &allotProvider{version: version}
	}
}

func (p *allotProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "allot"
	resp.Version = p.version
}

func (p *allotProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The allot provider manages the policy of an allot cluster — quotas, role weights, " +
			"reservations and API rate limits — and checks every planned change against the live cluster " +
			"with a dry run, so that `terraform plan` shows what `terraform apply` would do or why it would fail.",
		Attributes: map[string]schema.Attribute{
			"addresses": schema.ListAttribute{
				ElementType: types.StringType,
				Optional:    true,
				Description: "The URLs of the masterd servers, such as `http://10.0.0.1:5050`. Any server of the " +
					"cluster will do: writes are forwarded to the leader, and the provider moves on to the next " +
					"address when a server is unreachable or has no leader. Defaults to the comma-separated list " +
					"in the `ALLOT_ADDR` environment variable, else `http://127.0.0.1:5050`.",
				Validators: []validator.List{addressesValidator{}},
			},
			"token": schema.StringAttribute{
				Optional:  true,
				Sensitive: true,
				Description: "The bearer token sent with every call, for clusters started with an operator token. " +
					"Defaults to the `ALLOT_TOKEN` environment variable. It is never written to the state or the logs.",
			},
			"timeout": schema.StringAttribute{
				Optional: true,
				Description: "How long one API call may keep retrying through leader elections and unreachable " +
					"servers, as a Go duration such as `30s` or `2m`. Defaults to `30s`.",
				Validators: []validator.String{durationValidator{}},
			},
			"strict_plan": schema.BoolAttribute{
				Optional: true,
				Description: "Whether a plan that cannot be checked against the cluster — no server reachable, no " +
					"leader, a dry run the cluster could not answer — fails instead of warning. Set it in CI, where a plan " +
					"that was not checked must not pass for one that was. Defaults to the `ALLOT_STRICT_PLAN` environment " +
					"variable (`true` or `1`), else `false`.",
			},
		},
	}
}

func (p *allotProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if cfg.Addresses.IsUnknown() {
		resp.Diagnostics.AddAttributeError(path.Root("addresses"), "Unknown allot server addresses",
			"The provider cannot connect to the cluster because `addresses` depends on a value known only after apply. "+
				"Set it to literal URLs, or leave it out and set the ALLOT_ADDR environment variable.")
	}
	if cfg.Token.IsUnknown() {
		resp.Diagnostics.AddAttributeError(path.Root("token"), "Unknown allot token",
			"The provider cannot authenticate because `token` depends on a value known only after apply. "+
				"Set it from a variable, or leave it out and set the ALLOT_TOKEN environment variable.")
	}
	if cfg.Timeout.IsUnknown() {
		resp.Diagnostics.AddAttributeError(path.Root("timeout"), "Unknown allot timeout",
			"Set `timeout` to a literal duration such as \"30s\".")
	}
	if resp.Diagnostics.HasError() {
		return
	}

	addresses := api.SplitAddresses(os.Getenv(EnvAddresses))
	if !cfg.Addresses.IsNull() {
		addresses = nil
		resp.Diagnostics.Append(cfg.Addresses.ElementsAs(ctx, &addresses, false)...)
		if resp.Diagnostics.HasError() {
			return
		}
	}
	if len(addresses) == 0 {
		addresses = []string{defaultAddress}
	}
	token := os.Getenv(EnvToken)
	if !cfg.Token.IsNull() {
		token = cfg.Token.ValueString()
	}
	timeout := defaultTimeout
	if !cfg.Timeout.IsNull() {
		// The validator has already vouched for the syntax.
		timeout, _ = time.ParseDuration(cfg.Timeout.ValueString())
	}

	client, err := api.NewClient(addresses, token)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("addresses"), "Invalid allot server address",
			fmt.Sprintf("The provider cannot use the configured addresses (%s): %v.", EnvAddresses, err))
		return
	}
	client.RetryFor = timeout
	client.HTTP.Timeout = min(timeout, maxAttemptTimeout)
	client.HTTP.Transport = &loggingTransport{next: client.HTTP.Transport, token: token}

	strict := false
	if v, err := strconv.ParseBool(os.Getenv(EnvStrictPlan)); err == nil {
		strict = v
	}
	if !cfg.StrictPlan.IsNull() && !cfg.StrictPlan.IsUnknown() {
		strict = cfg.StrictPlan.ValueBool()
	}

	data := &providerData{client: client, timeout: timeout, strictPlan: strict, token: token}
	resp.ResourceData = data
	resp.DataSourceData = data
}

func (p *allotProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		NewQuotaResource,
		NewRoleResource,
		NewReservationResource,
		NewRateLimitResource,
		NewRateLimitDefaultResource,
	}
}

func (p *allotProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{
		NewClusterDataSource,
		NewAgentsDataSource,
		NewRoleDataSource,
	}
}
