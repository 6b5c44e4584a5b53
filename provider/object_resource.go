package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/allot/allot/masterd/api"
)

// objectResource is what every allot resource does the same way, once:
//   - plan: a dry run of the planned write (see checkPlan), which for a create
//     also finds an object that already exists;
//   - create, update, delete: writes guarded by the object's version
//     (If-None-Match: * on create, If-Match on update and delete), and a 412
//     answered by re-reading the object: if it holds what was planned, the
//     write was our own, stored before a failover lost its answer (the client
//     retries), otherwise someone else's, which is never overwritten;
//   - read: a 404 (or what the kind calls gone) removes it from the state.
//
// Each resource describes its kind of object in an objectKind and adds its
// schema, validation and import. M is the Terraform model, R the request body
// and O the object the API answers.
type objectResource[M, R, O any] struct {
	kind *objectKind[M, R, O]
	data *providerData
}

// objectKind describes one kind of cluster object to objectResource.
type objectKind[M, R, O any] struct {
	// typeName is the resource type, such as allot_quota.
	typeName string
	msgs     kindMessages

	// identity is the object's key in the API (the role, the reservation
	// name, the principal); identityAttr is the attribute that holds it, or
	// empty for the one default rate limit.
	identity     func(m *M) string
	identityAttr string
	what         func(id string) string // `the quota of role "eng/ml"`
	path         func(id string) string // the API path, for dry runs

	// unchanged reports a plan that differs from the state only below the
	// cluster's precision: nothing is planned then. sameObject reports an
	// update in place rather than a replacement.
	unchanged  func(plan, state *M) bool
	sameObject func(plan, state *M) bool
	// known reports whether every value the request needs is known.
	known   func(m *M) bool
	request func(m *M) (R, bool)
	// force, when the kind has a force attribute, is its value in a request;
	// unforced is the same request without it.
	force    func(r R) bool
	unforced func(r R) R
	// planWarnings adds the kind's own plan warnings after a dry run passed.
	// dependsOnPlan, when set, recognizes a dry-run refusal that other
	// changes of the same plan may resolve (see dryRun.dependsOnPlan).
	dependsOnPlan func(apiErr *api.Error) (summary, detail string, ok bool)
	planWarnings  func(ctx context.Context, d *providerData, id string, r R) diag.Diagnostics

	put func(ctx context.Context, c *api.Client, id string, r R, opts api.WriteOptions) (*O, error)
	get func(ctx context.Context, c *api.Client, id string) (*O, error)
	// dryRunOnlyRefuses: the kind's dry runs report no effects and no
	// warnings, so an apply does not dry-run its plans again once the
	// provider has written (see checkPlan).
	dryRunOnlyRefuses bool
	// listed, when set, answers a refresh's read from a list of every
	// object of the kind (see listedReads); without an answer from it, the
	// read is made with get.
	listed  func(ctx context.Context, d *providerData, id string) (O, bool, error)
	del     func(ctx context.Context, c *api.Client, id string, opts api.WriteOptions) error
	matches func(o *O, r R) bool
	// gone reports an object that reads back but no longer exists as far as
	// the resource is concerned (a role that is not configured); nil: only a
	// 404 is gone.
	gone func(o *O) bool

	version func(m *M) int64
	// written stores what the cluster answered to a create or an update
	// (the id, the version, computed attributes); refreshed what it answered
	// to a read.
	written   func(m *M, id string, o *O)
	refreshed func(m *M, id string, o *O)
}

// kindMessages are the diagnostics' words that differ between kinds.
type kindMessages struct {
	exists, changed string // summaries: "Quota already exists", "Quota changed outside Terraform"
	create, read    verb
	update, delete  verb
	// invalid is the summary and detail for a planned value that cannot be
	// turned into a request (which validation should have caught).
	invalid [2]string
}

// verb is a summary and the gerund that starts the detail of a failed call:
// "Unable to create quota", "Creating".
type verb struct{ summary, doing string }

func (r *objectResource[M, R, O]) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (r *objectResource[M, R, O]) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	k := r.kind
	if req.Plan.Raw.IsNull() {
		var state M
		resp.Diagnostics.Append(getState(ctx, req.State, &state)...)
		if resp.Diagnostics.HasError() {
			return
		}
		id := k.identity(&state)
		resp.Diagnostics.Append(r.data.checkPlan(ctx, dryRun{
			action: actionDelete, what: k.what(id), method: http.MethodDelete, path: k.path(id),
			onlyRefuses: k.dryRunOnlyRefuses,
		})...)
		return
	}
	if !req.State.Raw.IsNull() && req.Plan.Raw.Equal(req.State.Raw) {
		// Nothing planned: nothing for the cluster to check. Most resources
		// of most plans take this way, before any decoding.
		return
	}
	var plan M
	resp.Diagnostics.Append(getPlan(ctx, req.Plan, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	action := actionCreate
	// replacing is the identity of an object this plan replaces: it exists,
	// and is deleted before the new one is created. Terraform plans a
	// replacement twice, the second time as a create with no prior state but
	// with the private data of the first plan, which carries the identity.
	replacing := replacedIdentity(ctx, req.Private)
	if !req.State.Raw.IsNull() {
		var state M
		resp.Diagnostics.Append(getState(ctx, req.State, &state)...)
		if resp.Diagnostics.HasError() {
			return
		}
		if k.unchanged(&plan, &state) {
			// Only a rounding difference remained: plan nothing at all.
			resp.Diagnostics.Append(setPlan(ctx, &resp.Plan, &state)...)
			return
		}
		if k.sameObject(&plan, &state) {
			action = actionUpdate
		} else {
			replacing = k.identity(&state)
			resp.Diagnostics.Append(resp.Private.SetKey(ctx, replacesKey, replacesValue(replacing))...)
		}
	}
	if !k.known(&plan) {
		return // the cluster can only check known values
	}
	body, ok := k.request(&plan)
	if !ok {
		return
	}
	id := k.identity(&plan)
	run := dryRun{action: action, what: k.what(id), method: http.MethodPut, path: k.path(id), body: body,
		dependsOnPlan: k.dependsOnPlan, onlyRefuses: k.dryRunOnlyRefuses}
	if k.force != nil {
		force := k.force(body)
		run.force = &force
		if force {
			run.unforced = k.unforced(body)
		}
	}
	if action == actionCreate && id != replacing {
		// Apply would find it and stop; say so now, with what to do.
		run.ifNoneMatch = true
		run.exists = func(ctx context.Context) diag.Diagnostics { return r.existsAtPlan(ctx, id, body) }
	}
	diags := r.data.checkPlan(ctx, run)
	resp.Diagnostics.Append(diags...)
	if !diags.HasError() && k.planWarnings != nil && r.data != nil && r.data.unreachableError() == nil {
		resp.Diagnostics.Append(k.planWarnings(ctx, r.data, id, body)...)
	}
}

// existsAtPlan is the plan's answer to a create of an object the cluster
// already has: an error with the import command, unless it holds exactly
// what is planned, which apply takes over as it would its own lost write.
func (r *objectResource[M, R, O]) existsAtPlan(ctx context.Context, id string, body R) diag.Diagnostics {
	k := r.kind
	var diags diag.Diagnostics
	current, err := k.get(ctx, r.data.client, id)
	if err == nil && k.matches(current, body) && (k.gone == nil || !k.gone(current)) {
		diags.AddWarning(k.msgs.exists, fmt.Sprintf(
			"%s already exists in the cluster with the planned values, but not in this Terraform state: apply "+
				"takes it over as it is. To make that explicit, import it instead:\n\n%s",
			capitalize(k.what(id)), importHint(k.typeName, k.identityAttr, id)))
		return diags
	}
	detail := existsDetail(k.what(id), k.typeName, k.identityAttr, id) + "\n\nApply would fail: it never overwrites an object it did not create."
	if k.identityAttr != "" {
		diags.AddAttributeError(path.Root(k.identityAttr), k.msgs.exists, detail)
	} else {
		diags.AddError(k.msgs.exists, detail)
	}
	return diags
}

func (r *objectResource[M, R, O]) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	k := r.kind
	if r.data == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var plan M
	resp.Diagnostics.Append(getPlan(ctx, req.Plan, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	body, ok := k.request(&plan)
	if !ok {
		resp.Diagnostics.AddError(k.msgs.invalid[0], k.msgs.invalid[1])
		return
	}
	id := k.identity(&plan)
	ctx, cancel := r.data.withTimeout(ctx)
	defer cancel()

	obj, err := r.put(ctx, id, body, api.WriteOptions{IfNoneMatch: true})
	if api.IsPreconditionFailed(err) {
		addExistsError(&resp.Diagnostics, k.msgs.exists, k.what(id), k.typeName, k.identityAttr, id)
		return
	}
	if err != nil {
		addAPIError(&resp.Diagnostics, k.msgs.create.summary, k.msgs.create.doing, k.what(id), err)
		return
	}
	k.written(&plan, id, obj)
	resp.Diagnostics.Append(setState(ctx, &resp.State, &plan)...)
}

// put writes body under a precondition. A 412 whose object reads back as
// body is this very write, stored by an earlier attempt whose answer a
// failover lost (the client retries): it counts as written. Any other 412
// is returned as it came: the object existed, or someone else changed it.
func (r *objectResource[M, R, O]) put(ctx context.Context, id string, body R, opts api.WriteOptions) (*O, error) {
	k := r.kind
	defer r.data.wrote()
	obj, err := k.put(ctx, r.data.client, id, body, opts)
	if api.IsPreconditionFailed(err) {
		if current, getErr := k.get(ctx, r.data.client, id); getErr == nil && k.matches(current, body) {
			return current, nil
		}
	}
	return obj, err
}

// read is Read's call: from the kind's list when it has one that holds the
// object, else on its own.
func (r *objectResource[M, R, O]) read(ctx context.Context, id string) (*O, error) {
	if r.kind.listed != nil {
		obj, found, err := r.kind.listed(ctx, r.data, id)
		if err != nil {
			return nil, err
		}
		if found {
			return &obj, nil
		}
	}
	return r.kind.get(ctx, r.data.client, id)
}

func (r *objectResource[M, R, O]) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	k := r.kind
	if r.data == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var state M
	resp.Diagnostics.Append(getState(ctx, req.State, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id := k.identity(&state)
	ctx, cancel := r.data.withTimeout(ctx)
	defer cancel()

	obj, err := r.read(ctx, id)
	if api.IsNotFound(err) || (err == nil && k.gone != nil && k.gone(obj)) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		addAPIError(&resp.Diagnostics, k.msgs.read.summary, k.msgs.read.doing, k.what(id), err)
		return
	}
	k.refreshed(&state, id, obj)
	resp.Diagnostics.Append(setState(ctx, &resp.State, &state)...)
}

func (r *objectResource[M, R, O]) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	k := r.kind
	if r.data == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var plan, state M
	resp.Diagnostics.Append(getPlan(ctx, req.Plan, &plan)...)
	resp.Diagnostics.Append(getState(ctx, req.State, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	body, ok := k.request(&plan)
	if !ok {
		resp.Diagnostics.AddError(k.msgs.invalid[0], k.msgs.invalid[1])
		return
	}
	id := k.identity(&plan)
	ctx, cancel := r.data.withTimeout(ctx)
	defer cancel()

	version := k.version(&state)
	obj, err := r.put(ctx, id, body, api.WriteOptions{IfMatch: uint64(version)})
	if api.IsPreconditionFailed(err) {
		addChangedError(&resp.Diagnostics, k.msgs.changed, k.what(id), version, err)
		return
	}
	if err != nil {
		addAPIError(&resp.Diagnostics, k.msgs.update.summary, k.msgs.update.doing, k.what(id), err)
		return
	}
	k.written(&plan, id, obj)
	resp.Diagnostics.Append(setState(ctx, &resp.State, &plan)...)
}

func (r *objectResource[M, R, O]) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	k := r.kind
	if r.data == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var state M
	resp.Diagnostics.Append(getState(ctx, req.State, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id := k.identity(&state)
	ctx, cancel := r.data.withTimeout(ctx)
	defer cancel()

	version := k.version(&state)
	err := k.del(ctx, r.data.client, id, api.WriteOptions{IfMatch: uint64(version)})
	r.data.wrote()
	switch {
	case err == nil, api.IsNotFound(err):
	case api.IsPreconditionFailed(err):
		addChangedError(&resp.Diagnostics, k.msgs.changed, k.what(id), version, err)
	default:
		addAPIError(&resp.Diagnostics, k.msgs.delete.summary, k.msgs.delete.doing, k.what(id), err)
	}
}

// replacesKey is the private-state key under which a plan that replaces an
// object passes its identity to the plan of the replacement.
const replacesKey = "replaces"

func replacesValue(id string) []byte {
	b, _ := json.Marshal(id)
	return b
}

func replacedIdentity(ctx context.Context, private privateState) string {
	if private == nil {
		return ""
	}
	b, diags := private.GetKey(ctx, replacesKey)
	var id string
	if diags.HasError() || len(b) == 0 || json.Unmarshal(b, &id) != nil {
		return ""
	}
	return id
}

// privateState is the part of the framework's private state a plan reads.
type privateState interface {
	GetKey(ctx context.Context, key string) ([]byte, diag.Diagnostics)
}

// withInvalid sets the messages for a plan that cannot become a request.
func withInvalid(m kindMessages, summary, detail string) kindMessages {
	m.invalid = [2]string{summary, detail}
	return m
}

// defaultMessages are the usual words for a noun such as "quota".
func defaultMessages(noun string) kindMessages {
	return kindMessages{
		exists:  capitalize(noun) + " already exists",
		changed: capitalize(noun) + " changed outside Terraform",
		create:  verb{"Unable to create " + noun, "Creating"},
		read:    verb{"Unable to read " + noun, "Reading"},
		update:  verb{"Unable to update " + noun, "Updating"},
		delete:  verb{"Unable to delete " + noun, "Deleting"},
	}
}
