package provider

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/allot/allot/masterd/api"
)

var (
	_ resource.Resource                   = (*aclPolicyResource)(nil)
	_ resource.ResourceWithConfigure      = (*aclPolicyResource)(nil)
	_ resource.ResourceWithImportState    = (*aclPolicyResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*aclPolicyResource)(nil)
	_ resource.ResourceWithValidateConfig = (*aclPolicyResource)(nil)
)

// NewACLPolicyResource is the allot_acl_policy resource.
func NewACLPolicyResource() resource.Resource {
	return &aclPolicyResource{objectResource[aclPolicyModel, api.ACLPolicyRequest, api.ACLPolicy]{kind: &aclPolicyKind}}
}

type aclPolicyResource struct {
	objectResource[aclPolicyModel, api.ACLPolicyRequest, api.ACLPolicy]
}

var aclPolicyKind = objectKind[aclPolicyModel, api.ACLPolicyRequest, api.ACLPolicy]{
	typeName:     "allot_acl_policy",
	msgs:         withInvalid(defaultMessages("ACL policy"), "Invalid ACL policy", "The planned rules could not be read."),
	identity:     func(m *aclPolicyModel) string { return m.Name.ValueString() },
	identityAttr: "name",
	what:         aclPolicyWhat,
	path:         api.ACLPolicyPath,
	unchanged: func(plan, state *aclPolicyModel) bool {
		return plan.Name.Equal(state.Name) && plan.Description.Equal(state.Description) && plan.Rules.Equal(state.Rules)
	},
	sameObject: func(plan, state *aclPolicyModel) bool { return plan.Name.Equal(state.Name) },
	known: func(m *aclPolicyModel) bool {
		return fullyKnown(m.Name) && fullyKnown(m.Description) && fullyKnown(m.Rules)
	},
	request: (*aclPolicyModel).request,
	put: func(ctx context.Context, c *api.Client, name string, r api.ACLPolicyRequest, o api.WriteOptions) (*api.ACLPolicy, error) {
		return c.PutACLPolicy(ctx, name, r, o)
	},
	get: func(ctx context.Context, c *api.Client, name string) (*api.ACLPolicy, error) {
		return c.ACLPolicy(ctx, name, api.ReadOptions{})
	},
	del: func(ctx context.Context, c *api.Client, name string, o api.WriteOptions) error {
		return c.DeleteACLPolicy(ctx, name, o)
	},
	matches: func(p *api.ACLPolicy, r api.ACLPolicyRequest) bool {
		return p.Description == r.Description && sameRules(p.Rules, r.Rules)
	},
	version: func(m *aclPolicyModel) int64 { return m.Version.ValueInt64() },
	written: func(m *aclPolicyModel, name string, p *api.ACLPolicy) {
		m.ID = types.StringValue(name)
		m.Version = types.Int64Value(int64(p.Version))
	},
	refreshed: func(m *aclPolicyModel, name string, p *api.ACLPolicy) {
		m.ID = types.StringValue(name)
		m.Name = types.StringValue(name)
		m.Description = types.StringValue(p.Description)
		m.Rules = refreshRules(m.Rules, p.Rules)
		m.Version = types.Int64Value(int64(p.Version))
	},
}

type aclPolicyModel struct {
	ID          types.String `tfsdk:"id"`
	Name        types.String `tfsdk:"name"`
	Description types.String `tfsdk:"description"`
	Rules       types.List   `tfsdk:"rules"`
	Version     types.Int64  `tfsdk:"version"`
}

// aclRuleModel is one element of rules.
type aclRuleModel struct {
	Object types.String `tfsdk:"object"`
	Access types.String `tfsdk:"access"`
	Roles  types.List   `tfsdk:"roles"`
}

var aclRuleType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"object": types.StringType,
	"access": types.StringType,
	"roles":  types.ListType{ElemType: types.StringType},
}}

func (r *aclPolicyResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_acl_policy"
}

func (r *aclPolicyResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A named set of ACL rules for a cluster started with `-acl`. Tokens (`allot_acl_token`) name " +
			"policies, and a token may do what any rule of its policies grants; rules only grant. Deleting a policy " +
			"removes its name from every token that names it. The provider's own token needs `acl` write to manage " +
			"policies.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:      true,
				Description:   "The policy name, which is also the import ID.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				Required: true,
				Description: "The policy's name, unique in the cluster, such as `eng-frameworks`: letters, digits and " +
					"`_.:@-`. Changing it forces a new policy.",
				Validators:    []validator.String{nameValidator{kind: "policy"}},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"description": schema.StringAttribute{
				Optional:    true,
				Computed:    true,
				Default:     stringdefault.StaticString(""),
				Description: "What the policy is for. Defaults to an empty string.",
			},
			"rules": schema.ListNestedAttribute{
				Required: true,
				Description: "The rules, at least one. Each grants one access to one kind of object. The plan checks " +
					"them offline, as the cluster does.",
				Validators: []validator.List{listvalidator.SizeAtLeast(1)},
				NestedObject: schema.NestedAttributeObject{
					Attributes: map[string]schema.Attribute{
						"object": schema.StringAttribute{
							Required: true,
							Description: "The kind of object: `quota`, `role`, `reservation`, `ratelimit`, `acl` and " +
								"`cluster` (the cluster, its agents, frameworks, tasks, offers, audit trail and metrics " +
								"to read; adding and removing servers to write) for operators; `framework` (subscribe as a " +
								"framework with the roles the rule matches) and `agent` (run the agent protocol).",
						},
						"access": schema.StringAttribute{
							Required: true,
							Description: "`read` or `write` (which includes read) for the operator objects, `register` " +
								"for `framework` and `agent`.",
						},
						"roles": schema.ListAttribute{
							ElementType: types.StringType,
							Optional:    true,
							Description: "Narrows a `quota`, `role`, `reservation` or `framework` rule to the roles " +
								"matching one of these globs, where `*` matches any run of characters, slashes included: " +
								"`eng/*` matches `eng/ml` and `eng/ml/x`, not `eng`; `*` matches every role. Left out, the " +
								"rule covers every role. Other objects take no roles.",
						},
					},
				},
			},
			"version": schema.Int64Attribute{
				Computed: true,
				Description: "The cluster's version of the policy (the Raft index of its last change). Updates and " +
					"deletes are sent with it, so a change made outside Terraform since the last refresh is never overwritten.",
			},
		},
	}
}

// ValidateConfig checks the rules with the cluster's own validation, so that
// a rule the cluster would refuse fails `terraform validate`.
func (r *aclPolicyResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var cfg aclPolicyModel
	resp.Diagnostics.Append(getConfig(ctx, req.Config, &cfg)...)
	if resp.Diagnostics.HasError() || !fullyKnown(cfg.Rules) || len(cfg.Rules.Elements()) == 0 {
		return
	}
	rules, ok := rulesFromList(ctx, cfg.Rules)
	if !ok {
		return
	}
	if err := api.ValidateACLRules(rules); err != nil {
		resp.Diagnostics.AddAttributeError(rulesErrorPath(err), "Invalid ACL rule", fmt.Sprintf("%v.", err))
	}
}

// rulesErrorPath points at the rule an api.ValidateACLRules error names
// ("rules[2].access: ..."), else at rules.
func rulesErrorPath(err error) path.Path {
	var i int
	var attr string
	if n, _ := fmt.Sscanf(err.Error(), "rules[%d].%s", &i, &attr); n == 2 {
		attr, _, _ = strings.Cut(attr, ":")
		attr, _, _ = strings.Cut(attr, "[")
		if attr == "object" || attr == "access" || attr == "roles" {
			return path.Root("rules").AtListIndex(i).AtName(attr)
		}
	}
	return path.Root("rules")
}

func aclPolicyWhat(name string) string { return fmt.Sprintf("ACL policy %q", name) }

func (m *aclPolicyModel) request() (api.ACLPolicyRequest, bool) {
	rules, ok := rulesFromList(context.Background(), m.Rules)
	return api.ACLPolicyRequest{Description: m.Description.ValueString(), Rules: rules}, ok
}

// rulesFromList turns the rules attribute into API rules; ok is false when a
// value is unknown or does not convert.
func rulesFromList(ctx context.Context, list types.List) ([]api.ACLRule, bool) {
	if !fullyKnown(list) {
		return nil, false
	}
	var models []aclRuleModel
	if diags := list.ElementsAs(ctx, &models, false); diags.HasError() {
		return nil, false
	}
	rules := make([]api.ACLRule, 0, len(models))
	for _, m := range models {
		rule := api.ACLRule{Object: m.Object.ValueString(), Access: m.Access.ValueString()}
		if !m.Roles.IsNull() {
			if diags := m.Roles.ElementsAs(ctx, &rule.Roles, false); diags.HasError() {
				return nil, false
			}
		}
		rules = append(rules, rule)
	}
	return rules, true
}

// sameRules compares rules as the cluster means them: no roles and an empty
// list of roles both cover every role.
func sameRules(a, b []api.ACLRule) bool {
	return slices.EqualFunc(a, b, func(x, y api.ACLRule) bool {
		return x.Object == y.Object && x.Access == y.Access && slices.Equal(x.Roles, y.Roles)
	})
}

// refreshRules is the rules attribute for what the cluster holds: the prior
// value when it means the same (roles = [] stays as written rather than
// turning into a null the configuration does not say), else the cluster's.
func refreshRules(prior types.List, rules []api.ACLRule) types.List {
	if held, ok := rulesFromList(context.Background(), prior); ok && sameRules(held, rules) {
		return prior
	}
	elems := make([]attr.Value, 0, len(rules))
	for _, r := range rules {
		roles := types.ListNull(types.StringType)
		if len(r.Roles) > 0 {
			vals := make([]attr.Value, 0, len(r.Roles))
			for _, g := range r.Roles {
				vals = append(vals, types.StringValue(g))
			}
			roles = types.ListValueMust(types.StringType, vals)
		}
		elems = append(elems, types.ObjectValueMust(aclRuleType.AttrTypes, map[string]attr.Value{
			"object": types.StringValue(r.Object),
			"access": types.StringValue(r.Access),
			"roles":  roles,
		}))
	}
	return types.ListValueMust(aclRuleType, elems)
}

func (r *aclPolicyResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if err := api.ValidateName("policy", req.ID); err != nil {
		resp.Diagnostics.AddError("Invalid import ID",
			fmt.Sprintf("The import ID of allot_acl_policy is the policy name, such as eng-frameworks: %v.", err))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
}

// fullyKnown reports whether a value and everything in it is known.
func fullyKnown(v attr.Value) bool {
	if v.IsUnknown() {
		return false
	}
	tv, err := v.ToTerraformValue(context.Background())
	return err == nil && tv.IsFullyKnown()
}
