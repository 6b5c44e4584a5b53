package provider

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/setdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/allot/allot/masterd/api"
)

var (
	_ resource.Resource                = (*aclTokenResource)(nil)
	_ resource.ResourceWithConfigure   = (*aclTokenResource)(nil)
	_ resource.ResourceWithImportState = (*aclTokenResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*aclTokenResource)(nil)
)

// NewACLTokenResource is the allot_acl_token resource.
func NewACLTokenResource() resource.Resource {
	return &aclTokenResource{objectResource[aclTokenModel, api.ACLTokenRequest, api.ACLToken]{kind: &aclTokenKind}}
}

type aclTokenResource struct {
	objectResource[aclTokenModel, api.ACLTokenRequest, api.ACLToken]
}

var aclTokenKind = objectKind[aclTokenModel, api.ACLTokenRequest, api.ACLToken]{
	typeName:     "allot_acl_token",
	msgs:         withInvalid(defaultMessages("ACL token"), "Invalid ACL token", "The planned policies could not be read."),
	identity:     func(m *aclTokenModel) string { return m.Accessor.ValueString() },
	identityAttr: "accessor",
	what:         aclTokenWhat,
	path:         api.ACLTokenPath,
	unchanged: func(plan, state *aclTokenModel) bool {
		return plan.Accessor.Equal(state.Accessor) && plan.Description.Equal(state.Description) &&
			plan.Policies.Equal(state.Policies) && plan.Principal.Equal(state.Principal) &&
			plan.Management.Equal(state.Management)
	},
	sameObject: func(plan, state *aclTokenModel) bool { return plan.Accessor.Equal(state.Accessor) },
	known: func(m *aclTokenModel) bool {
		return fullyKnown(m.Accessor) && fullyKnown(m.Description) && fullyKnown(m.Policies) &&
			fullyKnown(m.Principal) && fullyKnown(m.Management)
	},
	request:       (*aclTokenModel).request,
	dependsOnPlan: missingPolicy,
	put: func(ctx context.Context, c *api.Client, accessor string, r api.ACLTokenRequest, o api.WriteOptions) (*api.ACLToken, error) {
		return c.PutACLToken(ctx, accessor, r, o)
	},
	get: func(ctx context.Context, c *api.Client, accessor string) (*api.ACLToken, error) {
		return c.ACLToken(ctx, accessor, api.ReadOptions{})
	},
	del: func(ctx context.Context, c *api.Client, accessor string, o api.WriteOptions) error {
		return c.DeleteACLToken(ctx, accessor, o)
	},
	matches: aclTokenMatches,
	version: func(m *aclTokenModel) int64 { return m.Version.ValueInt64() },
	written: func(m *aclTokenModel, accessor string, t *api.ACLToken) {
		m.ID = types.StringValue(accessor)
		m.Principal = types.StringValue(t.Principal)
		m.Version = types.Int64Value(int64(t.Version))
		switch {
		case t.Secret != "":
			// The answer that created the token: the only time the cluster
			// shows the secret.
			m.Secret = types.StringValue(t.Secret)
		case m.Secret.IsUnknown():
			// A create that found the token already there with the planned
			// values (an earlier attempt whose answer was lost, or a token
			// taken over at plan time): the cluster no longer has the secret.
			m.Secret = types.StringNull()
		}
	},
	refreshed: func(m *aclTokenModel, accessor string, t *api.ACLToken) {
		m.ID = types.StringValue(accessor)
		m.Accessor = types.StringValue(accessor)
		m.Description = types.StringValue(t.Description)
		m.Policies = stringSet(t.Policies)
		m.Principal = types.StringValue(t.Principal)
		m.Management = types.BoolValue(t.Management)
		m.Version = types.Int64Value(int64(t.Version))
		// The secret is never read back: the state keeps the one the
		// creating answer carried (null for an imported token).
		if m.Secret.IsUnknown() {
			m.Secret = types.StringNull()
		}
	},
}

type aclTokenModel struct {
	ID          types.String `tfsdk:"id"`
	Accessor    types.String `tfsdk:"accessor"`
	Description types.String `tfsdk:"description"`
	Policies    types.Set    `tfsdk:"policies"`
	Principal   types.String `tfsdk:"principal"`
	Management  types.Bool   `tfsdk:"management"`
	Secret      types.String `tfsdk:"secret"`
	Version     types.Int64  `tfsdk:"version"`
}

func (r *aclTokenResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_acl_token"
}

func (r *aclTokenResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "An ACL token of a cluster started with `-acl`: a public accessor, which names the token, and a " +
			"secret, the bearer token its holder sends. The cluster generates the secret when the token is created and " +
			"shows it once; the provider keeps it in the state as the sensitive `secret` attribute (protect the state " +
			"accordingly). The cluster itself keeps only a hash of it. The provider's own token needs `acl` write to " +
			"manage tokens.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:      true,
				Description:   "The accessor, which is also the import ID.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"accessor": schema.StringAttribute{
				Required: true,
				Description: "The token's public name, unique in the cluster, such as `spark-prod`: letters, digits and " +
					"`_.:@-`. It appears in URLs, the audit trail and error messages; it is not a secret. Changing it " +
					"forces a new token, with a new secret.",
				Validators:    []validator.String{nameValidator{kind: "accessor"}},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"description": schema.StringAttribute{
				Optional:    true,
				Computed:    true,
				Default:     stringdefault.StaticString(""),
				Description: "What the token is for. Defaults to an empty string.",
			},
			"policies": schema.SetAttribute{
				ElementType: types.StringType,
				Optional:    true,
				Computed:    true,
				Default:     setdefault.StaticValue(types.SetValueMust(types.StringType, nil)),
				Description: "The names of the policies whose rules the token's holder may use; every one must exist " +
					"(refer to `allot_acl_policy.NAME.name` so that Terraform creates them first). Deleting a policy " +
					"removes it from every token, which the next plan shows. Defaults to none.",
				Validators: []validator.Set{setvalidator.ValueStringsAre(nameValidator{kind: "policy"})},
			},
			"principal": schema.StringAttribute{
				Optional: true,
				Computed: true,
				Description: "Who the token's holder is: a framework subscribing with the token has this principal (its " +
					"rate limits and counters), and the audit trail names it. Letters, digits and `_.:@-`. Defaults to " +
					"the accessor.",
				Validators:    []validator.String{nameValidator{kind: "principal"}},
				PlanModifiers: []planmodifier.String{defaultPrincipal{}},
			},
			"management": schema.BoolAttribute{
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(false),
				Description: "Whether the token may do everything, whatever its policies say, as the bootstrap token " +
					"may. Defaults to `false`.",
			},
			"secret": schema.StringAttribute{
				Computed:  true,
				Sensitive: true,
				Description: "The bearer token, such as `allot_…`: set when Terraform creates the token and kept in " +
					"the state afterwards, since the cluster never shows it again. A token imported with `terraform " +
					"import` has a null secret: the cluster cannot tell it, and whoever holds the secret already has it.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"version": schema.Int64Attribute{
				Computed: true,
				Description: "The cluster's version of the token (the Raft index of its last change). Updates and " +
					"deletes are sent with it, so a change made outside Terraform since the last refresh is never overwritten.",
			},
		},
	}
}

func aclTokenWhat(accessor string) string { return fmt.Sprintf("ACL token %q", accessor) }

func (m *aclTokenModel) request() (api.ACLTokenRequest, bool) {
	req := api.ACLTokenRequest{
		Description: m.Description.ValueString(),
		Principal:   m.Principal.ValueString(),
		Management:  m.Management.ValueBool(),
		Policies:    []string{},
	}
	if !m.Policies.IsNull() {
		if diags := m.Policies.ElementsAs(context.Background(), &req.Policies, false); diags.HasError() {
			return req, false
		}
	}
	slices.Sort(req.Policies)
	return req, true
}

// aclTokenMatches compares a token with a request; the cluster stores
// policies sorted and without duplicates, and the principal defaults to the
// accessor.
func aclTokenMatches(t *api.ACLToken, r api.ACLTokenRequest) bool {
	policies := slices.Compact(slices.Sorted(slices.Values(r.Policies)))
	principal := r.Principal
	if principal == "" {
		principal = t.Accessor
	}
	return t.Description == r.Description && slices.Equal(slices.Sorted(slices.Values(t.Policies)), policies) &&
		t.Principal == principal && t.Management == r.Management
}

// missingPolicy recognizes the cluster's refusal of a token that names a
// policy it does not have: the policy may be one this plan creates, which
// Terraform does first when the token refers to it.
func missingPolicy(apiErr *api.Error) (summary, detail string, ok bool) {
	policy, isString := apiErr.Details["policy"].(string)
	if apiErr.Code != api.CodeInvalidArgument || !isString || !strings.Contains(apiErr.Message, "does not exist") {
		return "", "", false
	}
	return "ACL policy not in the cluster yet", fmt.Sprintf("The token names policy %q, which the cluster does not have "+
		"yet, so the plan could not check the rest of the token. If this plan creates the policy and the token refers "+
		"to it (policies = [allot_acl_policy.NAME.name]), apply creates the policy first; otherwise apply fails."+
		"\n\nThe cluster answered %s: %s", policy, apiErr.Code, apiErr.Message), true
}

func stringSet(values []string) types.Set {
	elems := make([]attr.Value, 0, len(values))
	for _, v := range values {
		elems = append(elems, types.StringValue(v))
	}
	return types.SetValueMust(types.StringType, elems)
}

// defaultPrincipal plans the cluster's default principal, the accessor, when
// the configuration leaves principal out: the plan then shows the principal
// the token will have, and a principal removed from the configuration goes
// back to the accessor.
type defaultPrincipal struct{}

var _ planmodifier.String = defaultPrincipal{}

func (defaultPrincipal) Description(context.Context) string { return "Defaults to the accessor." }

func (m defaultPrincipal) MarkdownDescription(ctx context.Context) string { return m.Description(ctx) }

func (defaultPrincipal) PlanModifyString(ctx context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	if !req.ConfigValue.IsNull() {
		return
	}
	var accessor types.String
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("accessor"), &accessor)...)
	if resp.Diagnostics.HasError() || accessor.IsUnknown() {
		return
	}
	resp.PlanValue = accessor
}

func (r *aclTokenResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if err := api.ValidateName("accessor", req.ID); err != nil {
		resp.Diagnostics.AddError("Invalid import ID",
			fmt.Sprintf("The import ID of allot_acl_token is the accessor, such as spark-prod: %v.", err))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("accessor"), req.ID)...)
}
