package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Headers of the allot HTTP APIs.
const (
	// HeaderIndex is on every answer: the Raft index the answer reflects.
	HeaderIndex    = "X-Allot-Index"
	HeaderStreamID = "Allot-Stream-Id"
)

// Headers of an answer a server gives from its own state (?stale=true
// reads, GET /v1/cluster, no_leader errors), as Consul's
// X-Consul-KnownLeader and X-Consul-LastContact: how current that state is.
const (
	// HeaderLastContact is the milliseconds since the server last heard
	// from the leader: 0 on the leader, -1 before it heard from one.
	HeaderLastContact = "X-Allot-Last-Contact"
	// HeaderKnownLeader is "true" when the server knows which server leads,
	// "false" during an election or before it heard from a leader.
	HeaderKnownLeader = "X-Allot-Known-Leader"
	// HeaderAppliedIndex is the last Raft log index the server applied.
	HeaderAppliedIndex = "X-Allot-Applied-Index"
	// HeaderKnownIndex is the last Raft log index the server knows exists:
	// the leader's commit index as last heard, or, before it heard from a
	// leader since it started, the end of its own log. Applied below known:
	// the server is catching up.
	HeaderKnownIndex = "X-Allot-Known-Index"
)

// Client talks to a masterd cluster. It accepts any server's address: servers
// forward writes and linearizable reads to the leader, and the client moves on
// to the next address when one is unreachable or has no leader, retrying with
// backoff until the context ends or RetryFor has passed.
type Client struct {
	addresses []string
	token     string

	// HTTP is the transport; replace it to set TLS or timeouts.
	HTTP *http.Client
	// RetryFor bounds how long one call keeps retrying through leader
	// elections and unreachable servers.
	RetryFor time.Duration

	mu      sync.Mutex
	current int // index of the address that answered last
}

// NewClient returns a client for the comma-free list of server URLs
// ("http://127.0.0.1:5050"). token, when not empty, is sent as a bearer token.
func NewClient(addresses []string, token string) (*Client, error) {
	if len(addresses) == 0 {
		return nil, errors.New("no masterd address given")
	}
	clean := make([]string, 0, len(addresses))
	for _, a := range addresses {
		a = strings.TrimRight(strings.TrimSpace(a), "/")
		u, err := url.Parse(a)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("address %q: want http://host:port", a)
		}
		clean = append(clean, a)
	}
	return &Client{
		addresses: clean,
		token:     token,
		HTTP:      &http.Client{Timeout: 30 * time.Second},
		RetryFor:  30 * time.Second,
	}, nil
}

// SplitAddresses splits ALLOT_ADDR's comma-separated list.
func SplitAddresses(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// Addresses returns the server URLs the client uses.
func (c *Client) Addresses() []string { return append([]string(nil), c.addresses...) }

// WriteOptions modify a PUT or DELETE.
type WriteOptions struct {
	// IfMatch, when not zero, makes the write fail with precondition_failed
	// unless the object's version equals it.
	IfMatch uint64
	// IfNoneMatch makes the write fail with precondition_failed when the
	// object exists.
	IfNoneMatch bool
}

// ReadOptions modify a GET.
type ReadOptions struct {
	// Stale lets any server answer from its local state.
	Stale bool
}

// Meta is what every answer says about the state it reflects.
type Meta struct {
	// Index is the Raft index the answer reflects.
	Index uint64

	// The rest is only sent with an answer from the server's own state
	// (?stale=true reads, GET /v1/cluster, no_leader errors) and is zero
	// otherwise; see the Header constants.

	// LastContact is how long ago the answering server last heard from the
	// leader: 0 on the leader, negative before it heard from one.
	LastContact time.Duration
	// KnownLeader reports whether the answering server knew which server
	// leads.
	KnownLeader bool
	// AppliedIndex is the last Raft index the answering server applied,
	// KnownIndex the last one it knew exists; AppliedIndex below KnownIndex
	// means its state is behind the leader's.
	AppliedIndex uint64
	KnownIndex   uint64
}

// Request is one API call for Do.
type Request struct {
	Method  string
	Path    string
	Query   url.Values
	Body    any
	Headers http.Header
}

// Do sends req and decodes a 2xx JSON answer into out (when not nil). A non-2xx
// answer becomes an *Error. Unreachable servers and no_leader answers are
// retried on the next address with backoff.
func (c *Client) Do(ctx context.Context, req Request, out any) (Meta, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = json.Marshal(req.Body); err != nil {
			return Meta{}, fmt.Errorf("encode %s %s: %w", req.Method, req.Path, err)
		}
	}
	var meta Meta
	err := c.eachServer(ctx, func(base string) (retry bool, err error) {
		meta, retry, err = c.once(ctx, base, req, body, out)
		return retry, err
	})
	return meta, err
}

// eachServer calls attempt with the current server's address until it
// answers without asking to retry, moving on to the next address each time
// it asks (a server that does not answer, or knows no leader), for at most
// RetryFor. It returns the last attempt's error.
func (c *Client) eachServer(ctx context.Context, attempt func(base string) (retry bool, err error)) error {
	deadline := time.Now().Add(c.RetryFor)
	backoff := 50 * time.Millisecond
	for n := 0; ; n++ {
		c.mu.Lock()
		i := c.current
		c.mu.Unlock()
		retry, err := attempt(c.addresses[i])
		if !retry {
			return err
		}
		c.mu.Lock()
		if c.current == i {
			c.current = (i + 1) % len(c.addresses)
		}
		c.mu.Unlock()
		if time.Now().After(deadline) {
			return err
		}
		// Try every address once quickly, then back off between rounds.
		if (n+1)%len(c.addresses) == 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
		}
	}
}

func (c *Client) once(ctx context.Context, base string, req Request, body []byte, out any) (meta Meta, retry bool, err error) {
	u := base + req.Path
	if len(req.Query) > 0 {
		u += "?" + req.Query.Encode()
	}
	var rdr io.Reader
	if body != nil {
		rdr = bytes.NewReader(body)
	}
	hreq, err := http.NewRequestWithContext(ctx, req.Method, u, rdr)
	if err != nil {
		return meta, false, fmt.Errorf("%s %s: %w", req.Method, req.Path, err)
	}
	for k, vs := range req.Headers {
		hreq.Header[k] = vs
	}
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.HTTP.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return meta, false, fmt.Errorf("%s %s: %w", req.Method, req.Path, ctx.Err())
		}
		// *url.Error repeats the method and URL this message already names.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return meta, !permanent(err), fmt.Errorf("%s %s: %w", req.Method, u, err)
	}
	defer resp.Body.Close()
	meta = metaOf(resp.Header)
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return meta, true, fmt.Errorf("%s %s: read answer: %w", req.Method, u, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		apiErr := decodeError(resp.StatusCode, data)
		return meta, apiErr.Code == CodeNoLeader, apiErr
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return meta, false, fmt.Errorf("%s %s: decode answer: %w", req.Method, u, err)
		}
	}
	return meta, false, nil
}

// permanent reports whether a failed exchange failed for the caller's own
// configuration, which no retry and no other server of the same cluster
// fixes: a certificate the client does not trust (or a client certificate
// the server refuses), or an address of the wrong scheme. Retrying those for
// RetryFor only delays the error that says what to change.
func permanent(err error) bool {
	var verify *tls.CertificateVerificationError
	if errors.As(err, &verify) {
		return true
	}
	switch Diagnose(err) {
	case TroubleUnknownAuthority, TroubleCertificateRequired, TroubleSpeaksHTTP, TroubleSpeaksHTTPS:
		return true
	}
	return false
}

// metaOf reads the headers an answer describes its state with; a header
// that is absent or malformed leaves its field zero.
func metaOf(h http.Header) Meta {
	var meta Meta
	meta.Index, _ = strconv.ParseUint(h.Get(HeaderIndex), 10, 64)
	if ms, err := strconv.ParseInt(h.Get(HeaderLastContact), 10, 64); err == nil {
		meta.LastContact = time.Duration(ms) * time.Millisecond
	}
	meta.KnownLeader, _ = strconv.ParseBool(h.Get(HeaderKnownLeader))
	meta.AppliedIndex, _ = strconv.ParseUint(h.Get(HeaderAppliedIndex), 10, 64)
	meta.KnownIndex, _ = strconv.ParseUint(h.Get(HeaderKnownIndex), 10, 64)
	return meta
}

func decodeError(status int, data []byte) *Error {
	var body ErrorBody
	if err := json.Unmarshal(data, &body); err == nil && body.Error != nil && body.Error.Code != "" {
		body.Error.Status = status
		return body.Error
	}
	code := CodeInternal
	for c, s := range codeStatus {
		if s == status && c != CodeCapacityExceeded {
			code = c
		}
	}
	msg := strings.TrimSpace(string(data))
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return &Error{Code: code, Message: fmt.Sprintf("HTTP %d: %s", status, msg), Status: status}
}

// EscapePath escapes each slash-separated segment of a role or name, keeping
// the slashes: "eng/ml" stays "eng/ml".
func EscapePath(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

func writeHeaders(opts WriteOptions) http.Header {
	h := http.Header{}
	if opts.IfMatch != 0 {
		h.Set("If-Match", strconv.FormatUint(opts.IfMatch, 10))
	}
	if opts.IfNoneMatch {
		h.Set("If-None-Match", "*")
	}
	return h
}

func readQuery(opts ReadOptions) url.Values {
	if !opts.Stale {
		return nil
	}
	return url.Values{"stale": {"true"}}
}

func (c *Client) get(ctx context.Context, path string, opts ReadOptions, out any) error {
	_, err := c.Do(ctx, Request{Method: http.MethodGet, Path: path, Query: readQuery(opts)}, out)
	return err
}

func (c *Client) write(ctx context.Context, method, path string, body any, opts WriteOptions, out any) error {
	_, err := c.Do(ctx, Request{Method: method, Path: path, Body: body, Headers: writeHeaders(opts)}, out)
	return err
}

// DryRun asks the cluster what a PUT or DELETE of path with body would do,
// without storing anything. A write that would be refused returns its error.
func (c *Client) DryRun(ctx context.Context, method, path string, body any) (*DryRun, error) {
	var out DryRun
	_, err := c.Do(ctx, Request{Method: method, Path: path, Body: body, Query: url.Values{"dry_run": {"true"}}}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Paths of the operator API, for DryRun and Do.
func QuotaPath(role string) string          { return "/v1/quotas/" + EscapePath(role) }
func RolePath(role string) string           { return "/v1/roles/" + EscapePath(role) }
func ReservationPath(name string) string    { return "/v1/reservations/" + EscapePath(name) }
func RateLimitPath(principal string) string { return "/v1/ratelimits/" + EscapePath(principal) }

// LabeledRateLimitPath is the limit of one principal's frameworks with one
// label.
func LabeledRateLimitPath(principal, label string) string {
	return RateLimitPath(principal) + "/labels/" + EscapePath(label)
}
func AgentPath(id string) string { return "/v1/agents/" + EscapePath(id) }

const RateLimitDefaultPath = "/v1/ratelimits-default"

// Health checks that the addressed server answers.
func (c *Client) Health(ctx context.Context) error {
	return c.get(ctx, "/v1/health", ReadOptions{}, nil)
}

// Cluster returns the leader, the servers and the recovery state as the
// server that answers sees them: each server names the leader it follows,
// which, for a follower, may be one that has just died. LeaderCluster
// returns the leader's own view.
func (c *Client) Cluster(ctx context.Context, opts ReadOptions) (*Cluster, error) {
	var out Cluster
	return &out, c.get(ctx, "/v1/cluster", opts, &out)
}

// LeaderCluster returns the cluster as its live leader sees it. A follower
// keeps naming a leader that died until its heartbeat timeout runs out and
// an election starts, so the answer of whichever server the client reaches
// may name a dead leader; this asks a server which leader it follows, then
// asks that leader, at the API address the cluster recorded for it (where
// the scheduler API's redirects send frameworks too), and accepts only an
// answer in which the leader names itself. Until one does, it asks again
// with backoff, until the context ends or RetryFor has passed (then a
// no_leader error).
func (c *Client) LeaderCluster(ctx context.Context) (*Cluster, error) {
	deadline := time.Now().Add(c.RetryFor)
	backoff := 50 * time.Millisecond
	for {
		view, err := c.Cluster(ctx, ReadOptions{})
		if err != nil {
			return nil, err
		}
		own, unconfirmed, err := c.askLeader(ctx, view)
		if err != nil || own != nil {
			return own, err
		}
		if time.Now().After(deadline) {
			return nil, Errorf(CodeNoLeader, "no leader confirmed its leadership within %v (last: %s); retry", c.RetryFor, unconfirmed)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("GET /v1/cluster from the leader: %w (last: %s)", ctx.Err(), unconfirmed)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// askLeader asks the leader that view names for its own view. own is nil
// when it did not confirm its leadership, and unconfirmed then says why;
// err is an answer that asking again would not change (a refused token).
func (c *Client) askLeader(ctx context.Context, view *Cluster) (own *Cluster, unconfirmed string, err error) {
	if view.Leader == nil || view.Leader.ID == "" {
		return nil, "the server asked knows no leader", nil
	}
	leader := *view.Leader
	addr := strings.TrimRight(leader.APIAddress, "/")
	if addr == "" {
		return nil, fmt.Sprintf("the server asked names leader %s, whose API address it does not know yet", leader.ID), nil
	}
	var out Cluster
	_, retry, err := c.once(ctx, addr, Request{Method: http.MethodGet, Path: "/v1/cluster"}, nil, &out)
	switch {
	case retry:
		return nil, fmt.Sprintf("leader %s did not answer: %v", leader.ID, err), nil
	case err != nil:
		return nil, "", err
	case out.Leader == nil || out.Leader.ID != leader.ID:
		follows := "no leader"
		if out.Leader != nil && out.Leader.ID != "" {
			follows = "leader " + out.Leader.ID
		}
		return nil, fmt.Sprintf("%s, named leader, answered at %s that it follows %s", leader.ID, addr, follows), nil
	}
	return &out, "", nil
}

// HeaderStoreVersion carries, on a join, the store version the joining
// server runs (its GET /v1/health answers it). A join without it counts as
// version 1, which a cluster that has moved past 1 refuses.
const HeaderStoreVersion = "X-Allot-Store-Version"

// AddServer adds a voter to the Raft cluster: a server started with neither
// -bootstrap nor -join waits for it. storeVersion is the store version that
// server runs, as its GET /v1/health answers it: the leader refuses a server
// older than the cluster. Adding a present server is a no-op. An id that is
// a member at another address is a conflict unless s.Replace is set and
// that member is gone (see AddServerRequest).
func (c *Client) AddServer(ctx context.Context, s AddServerRequest, storeVersion uint32) error {
	headers := http.Header{HeaderStoreVersion: {strconv.FormatUint(uint64(storeVersion), 10)}}
	_, err := c.Do(ctx, Request{Method: http.MethodPost, Path: "/v1/cluster/servers", Body: s, Headers: headers}, nil)
	return err
}

// RemoveServer removes a server from the Raft cluster.
func (c *Client) RemoveServer(ctx context.Context, id string) error {
	return c.write(ctx, http.MethodDelete, "/v1/cluster/servers/"+EscapePath(id), nil, WriteOptions{}, nil)
}

// Quotas lists every quota.
func (c *Client) Quotas(ctx context.Context, opts ReadOptions) ([]Quota, error) {
	var out QuotaList
	return out.Quotas, c.get(ctx, "/v1/quotas", opts, &out)
}

// Quota returns the quota of role.
func (c *Client) Quota(ctx context.Context, role string, opts ReadOptions) (*Quota, error) {
	var out Quota
	if err := c.get(ctx, QuotaPath(role), opts, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutQuota sets the quota of role.
func (c *Client) PutQuota(ctx context.Context, role string, req QuotaRequest, opts WriteOptions) (*Quota, error) {
	var out Quota
	if err := c.write(ctx, http.MethodPut, QuotaPath(role), req, opts, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteQuota removes the quota of role.
func (c *Client) DeleteQuota(ctx context.Context, role string, opts WriteOptions) error {
	return c.write(ctx, http.MethodDelete, QuotaPath(role), nil, opts, nil)
}

// Roles lists every known role.
func (c *Client) Roles(ctx context.Context, opts ReadOptions) ([]Role, error) {
	var out RoleList
	return out.Roles, c.get(ctx, "/v1/roles", opts, &out)
}

// Role returns one role.
func (c *Client) Role(ctx context.Context, role string, opts ReadOptions) (*Role, error) {
	var out Role
	if err := c.get(ctx, RolePath(role), opts, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutRole sets a role's weight and lending limit.
func (c *Client) PutRole(ctx context.Context, role string, req RoleRequest, opts WriteOptions) (*Role, error) {
	var out Role
	if err := c.write(ctx, http.MethodPut, RolePath(role), req, opts, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteRole resets a role's weight and lending limit.
func (c *Client) DeleteRole(ctx context.Context, role string, opts WriteOptions) error {
	return c.write(ctx, http.MethodDelete, RolePath(role), nil, opts, nil)
}

// Reservations lists every reservation.
func (c *Client) Reservations(ctx context.Context, opts ReadOptions) ([]Reservation, error) {
	var out ReservationList
	return out.Reservations, c.get(ctx, "/v1/reservations", opts, &out)
}

// Reservation returns one reservation.
func (c *Client) Reservation(ctx context.Context, name string, opts ReadOptions) (*Reservation, error) {
	var out Reservation
	if err := c.get(ctx, ReservationPath(name), opts, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutReservation creates or updates a reservation.
func (c *Client) PutReservation(ctx context.Context, name string, req ReservationRequest, opts WriteOptions) (*Reservation, error) {
	var out Reservation
	if err := c.write(ctx, http.MethodPut, ReservationPath(name), req, opts, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteReservation removes a reservation.
func (c *Client) DeleteReservation(ctx context.Context, name string, opts WriteOptions) error {
	return c.write(ctx, http.MethodDelete, ReservationPath(name), nil, opts, nil)
}

// RateLimitConfig returns the whole rate-limit configuration.
func (c *Client) RateLimitConfig(ctx context.Context, opts ReadOptions) (*RateLimitConfig, error) {
	var out RateLimitConfig
	if err := c.get(ctx, "/v1/ratelimits", opts, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutRateLimitConfig replaces the whole rate-limit configuration atomically.
func (c *Client) PutRateLimitConfig(ctx context.Context, cfg RateLimitConfig) (*RateLimitConfig, error) {
	// The versions a GET gave are not sent back: servers before they were
	// listed refuse them.
	cfg = cfg.WithoutVersions()
	var out RateLimitConfig
	if err := c.write(ctx, http.MethodPut, "/v1/ratelimits", cfg, WriteOptions{}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RateLimit returns one principal's limit.
func (c *Client) RateLimit(ctx context.Context, principal string, opts ReadOptions) (*RateLimit, error) {
	var out RateLimit
	if err := c.get(ctx, RateLimitPath(principal), opts, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutRateLimit sets one principal's limit.
func (c *Client) PutRateLimit(ctx context.Context, principal string, req RateLimitRequest, opts WriteOptions) (*RateLimit, error) {
	var out RateLimit
	if err := c.write(ctx, http.MethodPut, RateLimitPath(principal), req, opts, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteRateLimit removes one principal's limit.
func (c *Client) DeleteRateLimit(ctx context.Context, principal string, opts WriteOptions) error {
	return c.write(ctx, http.MethodDelete, RateLimitPath(principal), nil, opts, nil)
}

// RateLimitDefault returns the aggregate default limit.
func (c *Client) RateLimitDefault(ctx context.Context, opts ReadOptions) (*RateLimitDefault, error) {
	var out RateLimitDefault
	if err := c.get(ctx, RateLimitDefaultPath, opts, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutRateLimitDefault sets the aggregate default limit.
func (c *Client) PutRateLimitDefault(ctx context.Context, req RateLimitRequest, opts WriteOptions) (*RateLimitDefault, error) {
	var out RateLimitDefault
	if err := c.write(ctx, http.MethodPut, RateLimitDefaultPath, req, opts, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteRateLimitDefault removes the aggregate default limit.
func (c *Client) DeleteRateLimitDefault(ctx context.Context, opts WriteOptions) error {
	return c.write(ctx, http.MethodDelete, RateLimitDefaultPath, nil, opts, nil)
}

// Agents lists the admitted agents.
func (c *Client) Agents(ctx context.Context, opts ReadOptions) ([]Agent, error) {
	var out AgentList
	return out.Agents, c.get(ctx, "/v1/agents", opts, &out)
}

// Agent returns one agent by id.
func (c *Client) Agent(ctx context.Context, id string, opts ReadOptions) (*Agent, error) {
	var out Agent
	if err := c.get(ctx, AgentPath(id), opts, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Audit returns the audit entries with an index above after.
func (c *Client) Audit(ctx context.Context, after uint64) ([]AuditEntry, error) {
	var out AuditList
	_, err := c.Do(ctx, Request{Method: http.MethodGet, Path: "/v1/audit",
		Query: url.Values{"after": {strconv.FormatUint(after, 10)}}}, &out)
	return out.Entries, err
}

// Frameworks lists the frameworks the leader knows.
func (c *Client) Frameworks(ctx context.Context) ([]Framework, error) {
	var out FrameworkList
	return out.Frameworks, c.get(ctx, "/v1/frameworks", ReadOptions{}, &out)
}

// Tasks lists the leader's live tasks and the most recently ended ones.
func (c *Client) Tasks(ctx context.Context) ([]Task, error) {
	return c.TasksWhere(ctx, TaskFilter{})
}

// TasksWhere lists the leader's tasks that match f.
func (c *Client) TasksWhere(ctx context.Context, f TaskFilter) ([]Task, error) {
	q := url.Values{}
	if len(f.States) > 0 {
		q.Set("state", strings.Join(f.States, ","))
	}
	if f.Role != "" {
		q.Set("role", f.Role)
	}
	if f.Agent != "" {
		q.Set("agent", f.Agent)
	}
	path := "/v1/tasks"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out TaskList
	return out.Tasks, c.get(ctx, path, ReadOptions{}, &out)
}

// Offers lists the leader's outstanding offers.
func (c *Client) Offers(ctx context.Context) ([]Offer, error) {
	var out OfferList
	return out.Offers, c.get(ctx, "/v1/offers", ReadOptions{}, &out)
}
