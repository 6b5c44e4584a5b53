package provider

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/allot/allot/masterd/api"
)

// Principals the cluster counts calls as without ACLs: every call with the
// operator token is "operator"; on a cluster without one, every call is
// "anonymous". With ACLs, a call counts as its token's principal.
const (
	principalOperator  = "operator"
	principalAnonymous = "anonymous"
)

// ownPrincipal is the principal the cluster counts the provider's own calls
// as: GET /v1/acl/token/self answers it (its ACL token's, "operator" for the
// operator token, "anonymous" without a token on a cluster without ACLs). A
// server from before ACLs answers 404 there: then it is "operator" when the
// servers require a token and "anonymous" when they take calls without one,
// which a call without the token tells apart. ok is false when the cluster
// could not be asked.
func (d *providerData) ownPrincipal(ctx context.Context) (string, bool) {
	d.mu.Lock()
	known := d.principal
	d.mu.Unlock()
	if known != "" {
		return known, true
	}
	self, err := d.client.ACLTokenSelf(ctx)
	switch {
	case err == nil && self.Principal != "":
		d.mu.Lock()
		d.principal = self.Principal
		d.mu.Unlock()
		return self.Principal, true
	case !api.IsNotFound(err):
		return "", false
	}
	// A server from before ACLs has no token/self: tell the two principals
	// it knows apart.
	anonymous, err := api.NewClient(d.client.Addresses(), "")
	if err != nil {
		return "", false
	}
	if d.tls != nil {
		anonymous.SetTLS(d.tls)
	}
	anonymous.RetryFor = min(d.timeout, 5*time.Second)
	anonymous.HTTP.Timeout = min(d.timeout, maxAttemptTimeout)
	_, err = anonymous.Cluster(ctx, api.ReadOptions{Stale: true})
	principal := ""
	switch {
	case err == nil:
		principal = principalAnonymous
	case api.ErrorCode(err) == api.CodeUnauthenticated:
		principal = principalOperator
	default:
		return "", false
	}
	d.mu.Lock()
	d.principal = principal
	d.mu.Unlock()
	return principal, true
}

// selfThrottleWarning warns that a planned limit throttles the principal the
// provider itself calls as: every later plan and apply waits behind it, the
// apply that would lift it included, and a slow enough limit locks Terraform
// out of the cluster.
func selfThrottleWarning(diags *diag.Diagnostics, what, principal string, r api.RateLimitRequest) {
	if r.QPS == nil {
		return // counted, not throttled
	}
	qps := *r.QPS
	burst := max(1, int(math.Ceil(qps)))
	if r.Burst != nil {
		burst = *r.Burst
	}
	capacity := api.DefaultRateLimitCapacity
	if r.Capacity != nil {
		capacity = *r.Capacity
	}
	detail := fmt.Sprintf("The provider calls the cluster as principal %q, which %s throttles to %s calls a second "+
		"(burst %d, %d queued). Once applied, every later plan and apply waits its turn behind it, including the "+
		"apply that would lift it.", principal, what, plainNumber(qps), burst, capacity)
	summary := "Rate limit throttles Terraform's own calls"
	if qps < 1 || capacity == 0 {
		summary = "Rate limit may lock Terraform out of the cluster"
		detail += fmt.Sprintf(" A plan makes a few calls for each resource: at %s calls a second", plainNumber(qps))
		if capacity == 0 {
			detail += " and with no queue (calls beyond the burst are refused with 429)"
		}
		detail += ", Terraform may no longer be able to plan or apply anything, this limit's removal included; " +
			"lifting it would then take a call from another principal."
	}
	diags.AddWarning(summary, detail)
}
