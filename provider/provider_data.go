package provider

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/allot/allot/masterd/api"
)

// providerData is what Configure hands to every resource and data source.
type providerData struct {
	client  *api.Client
	timeout time.Duration
	// strictPlan makes a plan the cluster could not check an error.
	strictPlan bool
	// token is the bearer token the client sends, to tell which principal
	// the provider's own calls count as.
	token string
	// tls is the client TLS configuration, nil for plaintext.
	tls *tls.Config

	// A plan has many resources; once one dry run found the cluster
	// unreachable the others skip theirs instead of each waiting out the
	// timeout again.
	mu          sync.Mutex
	unreachable error
	// principal is what ownPrincipal found, once it found it.
	principal string

	// A refresh's reads, answered from one list per kind.
	rateLimits   listedReads[api.RateLimit]
	quotas       listedReads[api.Quota]
	reservations listedReads[api.Reservation]
	// written is set by the first write: the provider is applying (see
	// checkPlan).
	written atomic.Bool
}

// wrote records a write (or an attempt: a write that failed may still have
// been applied). It drops every list kept for reads, so a read that follows
// sees the write.
func (d *providerData) wrote() {
	d.written.Store(true)
	d.rateLimits.forget()
	d.quotas.forget()
	d.reservations.forget()
}

// providerDataFrom returns the configured provider data, or nil before
// Configure has run (Terraform validates configurations without it).
func providerDataFrom(data any, diags *diag.Diagnostics) *providerData {
	if data == nil {
		return nil
	}
	d, ok := data.(*providerData)
	if !ok {
		diags.AddError("Unexpected provider data",
			fmt.Sprintf("Expected *providerData, got %T. Please report this issue to the provider developers.", data))
		return nil
	}
	return d
}

// notConfigured adds the error for an API call attempted before Configure.
func notConfigured(diags *diag.Diagnostics) {
	diags.AddError("Provider not configured",
		"The allot provider has no client: its configuration could not be read. Check the provider block and any earlier errors.")
}

// loggingTransport logs every API call at debug level with tflog, without
// its headers: the token travels in Authorization and must never reach a log.
// Masking the token in the message and fields as well guards against it
// appearing anywhere else, such as an error string that echoes a URL.
type loggingTransport struct {
	next  http.RoundTripper
	token string
}

func (t *loggingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	next := t.next
	if next == nil {
		next = http.DefaultTransport
	}
	start := time.Now()
	resp, err := next.RoundTrip(req)
	ctx := req.Context()
	if t.token != "" {
		ctx = tflog.MaskMessageStrings(ctx, t.token)
		ctx = tflog.MaskAllFieldValuesStrings(ctx, t.token)
	}
	fields := map[string]any{
		"method":      req.Method,
		"url":         req.URL.Redacted(),
		"duration_ms": time.Since(start).Milliseconds(),
	}
	if err != nil {
		fields["error"] = err.Error()
	} else {
		fields["status"] = resp.StatusCode
		fields["raft_index"] = resp.Header.Get(api.HeaderIndex)
	}
	tflog.Debug(ctx, "allot API call", fields)
	return resp, err
}

// maxIdleConnsPerServer is how many idle connections the provider keeps to
// each server: more than Terraform's default parallelism of 10 resources at
// a time. Go's default of 2 would close 8 of 10 connections after every
// round of calls and open new ones for the next, a TCP handshake (and a TLS
// one with https) for most calls of a large plan or apply.
const maxIdleConnsPerServer = 32

// keepAliveTransport returns the provider's transport: next (the TLS
// transport, or nil for Go's default) with enough idle connections per
// server for every resource Terraform works on at once. Every resource of a
// run shares it through the one client Configure makes.
func keepAliveTransport(next http.RoundTripper) http.RoundTripper {
	var t *http.Transport
	switch n := next.(type) {
	case nil:
		t = http.DefaultTransport.(*http.Transport).Clone()
	case *http.Transport:
		t = n
	default:
		return next
	}
	t.MaxIdleConnsPerHost = maxIdleConnsPerServer
	t.MaxIdleConns = max(t.MaxIdleConns, 4*maxIdleConnsPerServer)
	return t
}

// withTimeout bounds one resource operation by the provider's timeout, plus
// a margin so that the client's own retry deadline ends it first with the
// more telling error.
func (d *providerData) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.timeout+5*time.Second)
}
