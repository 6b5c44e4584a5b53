package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/allot/allot/masterd/api"
)

// planCheckTimeout bounds one dry run at plan time: long enough to ride out a
// leader election, short enough that a plan against an unreachable cluster
// finishes promptly with a warning.
const planCheckTimeout = 10 * time.Second

// Planned actions, for messages.
const (
	actionCreate = "create"
	actionUpdate = "update"
	actionDelete = "delete"
)

// dryRun is one planned write for the cluster to check at plan time.
type dryRun struct {
	action string // actionCreate, actionUpdate or actionDelete
	what   string // `the quota of role "eng/ml"`, for messages
	method string
	path   string
	body   any
	// force is nil for resources without a force attribute and otherwise
	// points at its planned value: the hint to set it only makes sense when
	// it exists and is off.
	force *bool
	// unforced is the body without force, when force is on: a second dry run
	// of it shows what force overrides.
	unforced any
	// ifNoneMatch sends If-None-Match: * (a create): when the object exists,
	// exists makes the plan's diagnostics.
	ifNoneMatch bool
	exists      func(ctx context.Context) diag.Diagnostics
	// dependsOnPlan recognizes a refusal for a missing object that another
	// resource of the same plan may create first (a token naming a policy
	// the plan creates): each change is dry-run against the cluster as it is
	// now, so such a refusal is a warning, not an error.
	dependsOnPlan func(apiErr *api.Error) (summary, detail string, ok bool)
	// onlyRefuses: the kind's dry runs report no effects and no warnings,
	// only whether the write would be refused (see checkPlan).
	onlyRefuses bool
}

// clusterAnswer is the cluster's answer that err carries, or false when err
// says nothing of the call itself: no server answered, none leads, or time
// ran out.
func clusterAnswer(err error) (*api.Error, bool) {
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Code == api.CodeNoLeader {
		return nil, false
	}
	return apiErr, true
}

// noAnswer reports an error that is not the cluster's answer (see
// clusterAnswer).
func noAnswer(err error) bool {
	_, answered := clusterAnswer(err)
	return !answered
}

// checkPlan asks the cluster for a dry run of a planned write and turns the
// answer into plan diagnostics: an error for a write apply would refuse,
// warnings for its side effects and for what force overrides, and a warning
// when the cluster cannot be reached, so that the plan itself still works
// (an error instead with strict_plan, for CI).
func (d *providerData) checkPlan(ctx context.Context, run dryRun) diag.Diagnostics {
	var diags diag.Diagnostics
	if d == nil {
		return diags
	}
	if run.onlyRefuses && d.written.Load() {
		// Terraform applies a resource by planning it again and then
		// writing it. Once this provider has written, it is applying. The
		// cluster checks each write exactly as it checks its dry run, and
		// for this kind a dry run tells nothing else (no effects, no
		// warnings), so a change refused now fails at its write with the
		// same refusal and nothing of it written: a second dry run would
		// only cost a call per resource. Kinds whose dry runs warn of
		// effects are dry-run again, since values unknown when the plan
		// was made are first known here. (Terraform configures a new
		// provider for every plan and apply.)
		return diags
	}
	if err := d.unreachableError(); err != nil {
		d.notChecked(&diags, unreachableSummary, unreachableDetail(run, err))
		return diags
	}
	ctx, cancel := context.WithTimeout(ctx, min(d.timeout, planCheckTimeout))
	defer cancel()
	result, err := d.dryRun(ctx, run.method, run.path, run.body, run.ifNoneMatch)
	if err == nil {
		diags.Append(effectDiagnostics(run, result.Effects)...)
		if run.unforced != nil {
			diags.Append(d.forceDiagnostics(ctx, run)...)
		}
		return diags
	}

	apiErr, answered := clusterAnswer(err)
	if !answered {
		d.setUnreachable(err)
		d.notChecked(&diags, unreachableSummary, unreachableDetail(run, err))
		return diags
	}
	switch apiErr.Code {
	case api.CodeNotFound:
		if run.method == http.MethodDelete {
			return diags // already gone: the delete has nothing to do
		}
	case api.CodePreconditionFailed:
		if run.ifNoneMatch && run.exists != nil {
			return run.exists(ctx)
		}
	case api.CodeInternal, api.CodeRateLimited:
		d.notChecked(&diags, unreachableSummary,
			fmt.Sprintf("The cluster could not dry-run the planned %s of %s, so the plan does not show whether apply "+
				"would succeed. The cluster answered %v.", run.action, run.what, apiErr))
		return diags
	}
	if run.dependsOnPlan != nil {
		if summary, detail, ok := run.dependsOnPlan(apiErr); ok {
			diags.AddWarning(summary, detail)
			return diags
		}
	}
	diags.AddError(refusalSummary(apiErr.Code), refusalDetail(run, apiErr))
	return diags
}

// dryRun asks the cluster what a write would do, without doing it.
func (d *providerData) dryRun(ctx context.Context, method, path string, body any, ifNoneMatch bool) (*api.DryRun, error) {
	req := api.Request{Method: method, Path: path, Body: body, Query: url.Values{"dry_run": {"true"}}}
	if ifNoneMatch {
		req.Headers = http.Header{"If-None-Match": {"*"}}
	}
	var out api.DryRun
	if _, err := d.client.Do(ctx, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// notChecked reports a plan the cluster could not check: a warning, so that
// a plan works offline, or an error when strict_plan asks for one.
func (d *providerData) notChecked(diags *diag.Diagnostics, summary, detail string) {
	if d.strictPlan {
		diags.AddError(summary, detail+"\n\nThe provider's strict_plan setting makes this an error (unset it to plan without the cluster).")
		return
	}
	diags.AddWarning(summary, detail)
}

// forceDiagnostics shows what force = true overrides: the same write without
// it, dry-run, is refused for a reason apply will store past.
func (d *providerData) forceDiagnostics(ctx context.Context, run dryRun) diag.Diagnostics {
	var diags diag.Diagnostics
	_, err := d.dryRun(ctx, run.method, run.path, run.unforced, run.ifNoneMatch)
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || (apiErr.Code != api.CodeCapacityExceeded && apiErr.Code != api.CodeConflict) {
		return diags
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Without force, the cluster would refuse the planned %s of %s; with force = true, apply stores it anyway.", run.action, run.what)
	if lines := detailLines(apiErr.Details); len(lines) > 0 {
		b.WriteString("\n\n" + strings.Join(lines, "\n"))
	}
	fmt.Fprintf(&b, "\n\nThe cluster answered %s: %s", apiErr.Code, apiErr.Message)
	summary := "Apply forces a change the cluster would refuse"
	if apiErr.Code == api.CodeCapacityExceeded {
		summary = "Apply forces a change past the cluster's capacity"
	}
	diags.AddWarning(summary, b.String())
	return diags
}

func (d *providerData) unreachableError() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.unreachable
}

func (d *providerData) setUnreachable(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.unreachable == nil {
		d.unreachable = err
	}
}

const unreachableSummary = "Plan not checked against the cluster"

func unreachableDetail(run dryRun, err error) string {
	return fmt.Sprintf("The provider could not reach the allot cluster to dry-run the planned %s of %s, so this plan "+
		"does not show whether apply would succeed or what else it would change. The plan is otherwise complete; "+
		"apply needs the cluster. Last error: %v.", run.action, run.what, err)
}

func refusalSummary(code string) string {
	switch code {
	case api.CodeCapacityExceeded:
		return "Apply would fail: not enough capacity"
	case api.CodeConflict:
		return "Apply would fail: conflict with the cluster's state"
	case api.CodeInvalidArgument:
		return "Apply would fail: invalid change"
	case api.CodeNotFound:
		return "Apply would fail: a referenced object does not exist"
	case api.CodeUnauthenticated, api.CodePermissionDenied:
		return "Apply would fail: not authorized"
	}
	return "Apply would fail"
}

func refusalDetail(run dryRun, apiErr *api.Error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The cluster refused a dry run of the planned %s of %s.", run.action, run.what)
	if lines := detailLines(apiErr.Details); len(lines) > 0 {
		b.WriteString("\n\n")
		b.WriteString(strings.Join(lines, "\n"))
	}
	if run.force != nil && !*run.force && (apiErr.Code == api.CodeCapacityExceeded || apiErr.Code == api.CodeConflict) {
		b.WriteString("\n\nSet force = true to apply it anyway.")
	}
	fmt.Fprintf(&b, "\n\nThe cluster answered %s: %s", apiErr.Code, apiErr.Message)
	return b.String()
}

// detailLines renders an error's details for people: each shortfall says what
// is short and by how much; anything else is shown as the cluster sent it.
func detailLines(details map[string]any) []string {
	var lines []string
	keys := make([]string, 0, len(details))
	for k := range details {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "shortfalls" {
			if items, ok := details[k].([]any); ok {
				for _, item := range items {
					lines = append(lines, shortfallLine(item))
				}
				continue
			}
		}
		label := strings.ReplaceAll(k, "_", " ")
		if amounts, ok := amountsLine(details[k]); ok {
			lines = append(lines, fmt.Sprintf("  %s: %s", label, amounts))
			continue
		}
		raw, err := json.Marshal(details[k])
		if err != nil {
			raw = []byte(fmt.Sprint(details[k]))
		}
		lines = append(lines, fmt.Sprintf("  %s: %s", label, raw))
	}
	return lines
}

// amountsLine renders a resource map such as {"cpus": 3, "mem": 512} as
// "cpus 3, mem 512".
func amountsLine(v any) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return "", false
	}
	r := make(api.Resources, len(m))
	for name, amount := range m {
		f, ok := amount.(float64)
		if !ok {
			return "", false
		}
		r[name] = f
	}
	parts := make([]string, 0, len(r))
	for _, name := range r.Names() {
		parts = append(parts, name+" "+formatScalar(r[name]))
	}
	return strings.Join(parts, ", "), true
}

// shortfallLine says what one short resource is short of, in plain numbers:
// "mem: 500000 requested by this change + 600000 already held by others =
// 1100000, capacity 1008192: short by 91808". Servers that only send the
// total (requested) and the capacity get the line without the parts.
func shortfallLine(item any) string {
	m, ok := item.(map[string]any)
	if !ok {
		raw, _ := json.Marshal(item)
		return "  - " + string(raw)
	}
	resource, _ := m["resource"].(string)
	requested, rok := m["requested"].(float64)
	capacity, cok := m["capacity"].(float64)
	if !rok || !cok {
		raw, _ := json.Marshal(m)
		return "  - " + string(raw)
	}
	shortBy, ok := m["short_by"].(float64)
	if !ok {
		shortBy = requested - capacity
	}
	var b strings.Builder
	b.WriteString("  - " + resource + ": ")
	request, hasRequest := m["request"].(float64)
	others, hasOthers := m["others"].(float64)
	switch {
	case hasRequest && hasOthers && others != 0:
		fmt.Fprintf(&b, "%s requested by this change + %s already held by others = %s", formatScalar(request), formatScalar(others), formatScalar(requested))
	case hasRequest:
		fmt.Fprintf(&b, "%s requested by this change", formatScalar(request))
	default:
		fmt.Fprintf(&b, "%s requested", formatScalar(requested))
	}
	fmt.Fprintf(&b, ", capacity %s: short by %s", formatScalar(capacity), formatScalar(shortBy))
	return b.String()
}

// formatScalar writes an amount at the cluster's precision as people write
// it: 1008192, never 1.008192e+06.
func formatScalar(v float64) string {
	return strconv.FormatFloat(api.RoundScalar(v), 'f', -1, 64)
}

// effectDiagnostics turns what a successful dry run says the write would do
// besides storing its object into plan warnings.
func effectDiagnostics(run dryRun, effects api.Effects) diag.Diagnostics {
	var diags diag.Diagnostics
	if n := effects.RescindedOffers; n > 0 {
		diags.AddWarning("Apply will rescind offers",
			fmt.Sprintf("Applying the planned %s of %s rescinds %d outstanding %s; the frameworks that hold them "+
				"receive new offers in a later allocation cycle.", run.action, run.what, n, plural(n, "offer", "offers")))
	}
	roles := make([]string, 0, len(effects.OverLimit))
	for role := range effects.OverLimit {
		roles = append(roles, role)
	}
	sort.Strings(roles)
	for _, role := range roles {
		over := effects.OverLimit[role]
		diags.AddWarning("Role will be over its limit",
			fmt.Sprintf("After the planned %s of %s, role %q consumes more than its limit allows (over by %s). "+
				"Nothing running is stopped; the role receives no more of these resources until its use falls below the limit.",
				run.action, run.what, role, amounts(over)))
	}
	if n := len(effects.Evictions); n > 0 {
		lines := make([]string, 0, n)
		for _, e := range effects.Evictions {
			lines = append(lines, fmt.Sprintf("  - task %s of framework %s (role %s) on agent %s, holding %s",
				e.TaskID, e.FrameworkID, e.Role, e.AgentID, amounts(e.Resources)))
		}
		diags.AddWarning("Apply will evict revocable tasks",
			fmt.Sprintf("Applying the planned %s of %s takes back lent reservations now in use: the cluster kills "+
				"%d revocable %s running on them (TASK_KILLED, REASON_CONTAINER_PREEMPTED), youngest first, until what "+
				"the role lends fits the new lending limit:\n\n%s",
				run.action, run.what, n, plural(n, "task", "tasks"), strings.Join(lines, "\n")))
	}
	for _, warning := range effects.Warnings {
		diags.AddWarning("Cluster warning",
			fmt.Sprintf("The cluster's dry run of the planned %s of %s warns: %s", run.action, run.what, warning))
	}
	return diags
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// amounts renders a resource map as "cpus 3, mem 512".
func amounts(r api.Resources) string {
	parts := make([]string, 0, len(r))
	for _, name := range r.Names() {
		parts = append(parts, name+" "+formatScalar(r[name]))
	}
	return strings.Join(parts, ", ")
}
