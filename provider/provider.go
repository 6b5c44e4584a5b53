// Package provider is the Terraform provider for allot: quotas, role weights,
// reservations and rate limits as Terraform resources, checked against the
// live cluster at plan time.
package provider

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
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
	// TLS: the CA file the masters' certificates chain to, and the client
	// certificate and key files presented to masters that verify clients.
	EnvCACert     = "ALLOT_CACERT"
	EnvClientCert = "ALLOT_CLIENT_CERT"
	EnvClientKey  = "ALLOT_CLIENT_KEY"
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
	// configured is what Configure handed to the resources, for the
	// protocol server's fast paths (see NewProtocolServer).
	configured atomic.Pointer[providerData]
}

type providerModel struct {
	Addresses  types.List   `tfsdk:"addresses"`
	Token      types.String `tfsdk:"token"`
	Timeout    types.String `tfsdk:"timeout"`
	StrictPlan types.Bool   `tfsdk:"strict_plan"`
	CAFile     types.String `tfsdk:"ca_file"`
	CAPEM      types.String `tfsdk:"ca_pem"`
	ClientCert types.String `tfsdk:"client_cert"`
	ClientKey  types.String `tfsdk:"client_key"`
}

// New returns the provider factory, which NewProtocolServer serves; version
// is the release version ("dev" for local builds).
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
		Description: "The allot provider manages the policy of an allot cluster — quotas, role weights, ACLs, " +
			"reservations and API rate limits — and checks every planned change against the live cluster " +
			"with a dry run, so that `terraform plan` shows what `terraform apply` would do or why it would fail.",
		Attributes: map[string]schema.Attribute{
			"addresses": schema.ListAttribute{
				ElementType: types.StringType,
				Optional:    true,
				Description: "The URLs of the masterd servers, such as `http://10.0.0.1:5050`, or `https://…` for " +
					"servers started with `-tls-cert` (see `ca_file`). Any server of the " +
					"cluster will do: writes are forwarded to the leader, and the provider moves on to the next " +
					"address when a server is unreachable or has no leader. Defaults to the comma-separated list " +
					"in the `ALLOT_ADDR` environment variable, else `http://127.0.0.1:5050`.",
				Validators: []validator.List{addressesValidator{}},
			},
			"token": schema.StringAttribute{
				Optional:  true,
				Sensitive: true,
				Description: "The bearer token sent with every call: the secret of an ACL token (clusters started " +
					"with `-acl`) or the operator token (`-operator-token`). Defaults to the `ALLOT_TOKEN` environment " +
					"variable. It is never written to the state or the logs. With ACLs, the token's policies must grant " +
					"what the configuration manages: read and write on its objects (`quota`, `role`, `reservation`, " +
					"`ratelimit`, `acl`) for the roles concerned, and `cluster` read for the data sources. Plans need the " +
					"same rights: each planned change is dry-run with this token, and a right it lacks fails the plan.",
			},
			"ca_file": schema.StringAttribute{
				Optional: true,
				Description: "The path of a PEM file holding the CA certificate that signed the masters' certificates " +
					"(`masterd tls ca`), for `https://` addresses. Defaults to the `ALLOT_CACERT` environment variable, " +
					"else the system's trusted roots.",
				Validators: []validator.String{stringvalidator.ConflictsWith(path.MatchRoot("ca_pem"))},
			},
			"ca_pem": schema.StringAttribute{
				Optional: true,
				Description: "The CA certificate as PEM text, instead of `ca_file`, such as " +
					"`file(\"ca.pem\")` or a value from a secret store.",
				Validators: []validator.String{stringvalidator.ConflictsWith(path.MatchRoot("ca_file"))},
			},
			"client_cert": schema.StringAttribute{
				Optional: true,
				Description: "The path of the PEM client certificate presented to the masters, for servers started " +
					"with `-tls-verify-incoming`; it must be signed by their `-tls-ca`. Needs `client_key`. Defaults " +
					"to the `ALLOT_CLIENT_CERT` environment variable.",
				Validators: []validator.String{stringvalidator.AlsoRequires(path.MatchRoot("client_key"))},
			},
			"client_key": schema.StringAttribute{
				Optional: true,
				Description: "The path of the PEM private key of `client_cert`. Defaults to the `ALLOT_CLIENT_KEY` " +
					"environment variable. Only the path is in the configuration; the key is read when the provider " +
					"connects and never stored.",
				Validators: []validator.String{stringvalidator.AlsoRequires(path.MatchRoot("client_cert"))},
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
	for name, v := range map[string]types.String{"ca_file": cfg.CAFile, "ca_pem": cfg.CAPEM, "client_cert": cfg.ClientCert, "client_key": cfg.ClientKey} {
		if v.IsUnknown() {
			resp.Diagnostics.AddAttributeError(path.Root(name), "Unknown allot TLS setting",
				fmt.Sprintf("The provider cannot connect to the cluster because `%s` depends on a value known only after apply. "+
					"Set it to a literal value or a variable.", name))
		}
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
	files := tlsFiles(cfg)
	var tlsConfig *tls.Config
	if !files.IsZero() {
		if tlsConfig, err = files.Config(); err != nil {
			resp.Diagnostics.AddError("Invalid allot TLS settings",
				fmt.Sprintf("The provider cannot use its TLS settings (ca_file, ca_pem, client_cert, client_key, or %s, %s, %s): %v.",
					EnvCACert, EnvClientCert, EnvClientKey, err))
			return
		}
		client.SetTLS(tlsConfig)
		for _, a := range addresses {
			if strings.HasPrefix(strings.TrimSpace(a), "http://") {
				resp.Diagnostics.AddAttributeWarning(path.Root("addresses"), "TLS settings unused for a plaintext address",
					fmt.Sprintf("The provider has TLS settings, but %s is an http:// address: calls to it are neither "+
						"encrypted nor verified. Use https:// for servers started with -tls-cert.", a))
			}
		}
	}
	client.RetryFor = timeout
	client.HTTP.Timeout = min(timeout, maxAttemptTimeout)
	client.HTTP.Transport = &loggingTransport{next: keepAliveTransport(client.HTTP.Transport), token: token}

	strict := false
	if v, err := strconv.ParseBool(os.Getenv(EnvStrictPlan)); err == nil {
		strict = v
	}
	if !cfg.StrictPlan.IsNull() && !cfg.StrictPlan.IsUnknown() {
		strict = cfg.StrictPlan.ValueBool()
	}

	data := &providerData{client: client, timeout: timeout, strictPlan: strict, token: token, tls: tlsConfig}
	data.rateLimits.alone, data.quotas.alone, data.reservations.alone = readsAlone, readsAlone, readsAlone
	resp.ResourceData = data
	p.configured.Store(data)
	resp.DataSourceData = data
}

// tlsFiles is the provider's TLS material: each setting, else its
// environment variable.
func tlsFiles(cfg providerModel) api.TLSFiles {
	orEnv := func(v types.String, env string) string {
		if !v.IsNull() {
			return v.ValueString()
		}
		return os.Getenv(env)
	}
	files := api.TLSFiles{
		CAPEM:    cfg.CAPEM.ValueString(),
		CertFile: orEnv(cfg.ClientCert, EnvClientCert),
		KeyFile:  orEnv(cfg.ClientKey, EnvClientKey),
	}
	if files.CAPEM == "" {
		files.CAFile = orEnv(cfg.CAFile, EnvCACert)
	}
	return files
}

func (p *allotProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		NewQuotaResource,
		NewRoleResource,
		NewReservationResource,
		NewRateLimitResource,
		NewRateLimitDefaultResource,
		NewACLPolicyResource,
		NewACLTokenResource,
	}
}

func (p *allotProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{
		NewClusterDataSource,
		NewAgentsDataSource,
		NewRoleDataSource,
	}
}
