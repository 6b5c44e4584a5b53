package api

import (
	"encoding/json"
	"time"
)

// Quota is a role's guarantees (resources it is always able to get) and limits
// (resources it can never exceed). A resource left out of Limits is unlimited.
type Quota struct {
	Role       string    `json:"role"`
	Guarantees Resources `json:"guarantees"`
	Limits     Resources `json:"limits"`
	Version    uint64    `json:"version"`
}

// QuotaRequest is the body of PUT /v1/quotas/{role}.
type QuotaRequest struct {
	Guarantees Resources `json:"guarantees"`
	Limits     Resources `json:"limits"`
	// Force skips the capacity heuristic and the limit-below-consumption check.
	Force bool `json:"force"`
}

// DefaultWeight is the weight of a role that was never given one.
const DefaultWeight = 1.0

// Role is a role's policy and live allocation.
type Role struct {
	Role   string  `json:"role"`
	Weight float64 `json:"weight"`
	// LendingLimit caps what the role's idle reservations lend as revocable
	// resources: nil (absent) means no cap; otherwise every resource is
	// capped, one it leaves out at 0, so an empty map ({}) lends nothing.
	// MarshalJSON leaves it out only when nil.
	LendingLimit Resources `json:"lending_limit"`
	Quota        *Quota    `json:"quota,omitempty"`
	Allocated    Resources `json:"allocated"`
	Reserved     Resources `json:"reserved"`
	Offered      Resources `json:"offered"`
	// RevocableAllocated is the revocable resources offered to or used by
	// the role's frameworks; Lent is the part of the role's own reservations
	// that other roles hold as revocable resources (offered or in use).
	RevocableAllocated Resources `json:"revocable_allocated"`
	Lent               Resources `json:"lent"`
	Frameworks         []string  `json:"frameworks"`
	// Version is the Raft index of the last change to the role's weight or
	// lending limit; 0 when the role has never been configured.
	Version uint64 `json:"version"`
}

// MarshalJSON writes the role with its lending limit left out only when it is
// nil. The tag omitzero cannot say so: encoding/json asks Resources.IsZero,
// which is true for {} (lend nothing) and for {"cpus": 0} too.
func (r Role) MarshalJSON() ([]byte, error) {
	type fields Role // the same fields, without this method
	return json.Marshal(struct {
		fields
		LendingLimit map[string]float64 `json:"lending_limit,omitzero"`
	}{fields(r), r.LendingLimit})
}

// RoleRequest is the body of PUT /v1/roles/{role}. A missing weight means
// DefaultWeight. A missing (or null) lending limit means no cap; an empty one
// ({}) lends nothing.
type RoleRequest struct {
	Weight       *float64  `json:"weight"`
	LendingLimit Resources `json:"lending_limit"`
}

// Reservation statuses.
const (
	ReservationActive  = "active"
	ReservationPending = "pending" // forced past the agent's free capacity
)

// Reservation holds resources of one agent for one role.
type Reservation struct {
	Name      string    `json:"name"`
	Agent     string    `json:"agent"`
	Role      string    `json:"role"`
	Resources Resources `json:"resources"`
	Version   uint64    `json:"version"`
	Status    string    `json:"status"`
}

// ReservationRequest is the body of PUT /v1/reservations/{name}.
type ReservationRequest struct {
	Agent     string    `json:"agent"`
	Role      string    `json:"role"`
	Resources Resources `json:"resources"`
	Force     bool      `json:"force"`
}

// DefaultRateLimitCapacity is the queue length of a limit that names none.
const DefaultRateLimitCapacity = 1000

// RateLimit throttles one principal's calls. A nil QPS counts calls without
// throttling them.
type RateLimit struct {
	Principal string `json:"principal"`
	// Label, when set, narrows the limit to the principal's frameworks that
	// carry this label; they also stay under the principal's own limit.
	Label    string   `json:"label,omitempty"`
	QPS      *float64 `json:"qps"`
	Burst    int      `json:"burst"`
	Capacity int      `json:"capacity"`
	Version  uint64   `json:"version"`
}

// RateLimitRequest is the body of PUT /v1/ratelimits/{principal} and of
// PUT /v1/ratelimits-default. Burst defaults to max(1, ceil(qps)), capacity
// to DefaultRateLimitCapacity.
type RateLimitRequest struct {
	QPS      *float64 `json:"qps"`
	Burst    *int     `json:"burst"`
	Capacity *int     `json:"capacity"`
}

// RateLimitDefault is the aggregate limit shared by every principal not named.
type RateLimitDefault struct {
	QPS      *float64 `json:"qps"`
	Burst    int      `json:"burst"`
	Capacity int      `json:"capacity"`
	Version  uint64   `json:"version"`
}

// RateLimitConfigLimit is one entry of the Mesos rates.json format.
type RateLimitConfigLimit struct {
	Principal string   `json:"principal"`
	Label     string   `json:"label,omitempty"`
	QPS       *float64 `json:"qps,omitempty"`
	Burst     *int     `json:"burst,omitempty"`
	Capacity  *int     `json:"capacity,omitempty"`
	// Version is the limit's version as read back; a PUT ignores it.
	Version uint64 `json:"version,omitempty"`
}

// RateLimitConfig is the whole configuration in the Mesos rates.json format,
// with burst as an allot extension. PUT replaces it atomically.
type RateLimitConfig struct {
	Limits                   []RateLimitConfigLimit `json:"limits"`
	AggregateDefaultQPS      *float64               `json:"aggregate_default_qps,omitempty"`
	AggregateDefaultBurst    *int                   `json:"aggregate_default_burst,omitempty"`
	AggregateDefaultCapacity *int                   `json:"aggregate_default_capacity,omitempty"`
}

// WithoutVersions is c with no limit's version, as a PUT sends it: the
// versions a GET gives are read back, not written.
func (c RateLimitConfig) WithoutVersions() RateLimitConfig {
	limits := make([]RateLimitConfigLimit, len(c.Limits))
	for i, l := range c.Limits {
		l.Version = 0
		limits[i] = l
	}
	c.Limits = limits
	return c
}

// Agent is an admitted agent and, on the leader, its live state.
type Agent struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Hostname  string    `json:"hostname"`
	Resources Resources `json:"resources"`
	Reserved  Resources `json:"reserved"`
	Allocated Resources `json:"allocated"`
	// Revocable is what the agent can lend now: its estimator's usage slack
	// plus its idle reservations within their roles' lending limits.
	Revocable Resources `json:"revocable"`
	// RevocableAllocated is the revocable resources offered or in use.
	RevocableAllocated Resources `json:"revocable_allocated"`
	Capabilities       []string  `json:"capabilities"`
	Connected          bool      `json:"connected"`
	RegisteredAt       time.Time `json:"registered_at"`
	Version            uint64    `json:"version"`
}

// Server is one member of the masterd Raft cluster.
type Server struct {
	ID          string `json:"id"`
	RaftAddress string `json:"raft_address"`
	APIAddress  string `json:"api_address"`
	Suffrage    string `json:"suffrage,omitempty"`
	Leader      bool   `json:"leader,omitempty"`
	// StoreVersion is the newest store version the server runs, as the
	// answering server knows it: the leader asks every server; a follower
	// knows only its own (0 and omitted: not known).
	StoreVersion uint32 `json:"store_version,omitempty"`
}

// AddServerRequest is the body of POST /v1/cluster/servers.
type AddServerRequest struct {
	ID          string `json:"id"`
	RaftAddress string `json:"raft_address"`
	APIAddress  string `json:"api_address"`
	// Replace lets the new server take over the id of a member at another
	// Raft address (a replacement host), but only while the leader's
	// heartbeats to that member fail and it has not answered one for a few
	// seconds. Without it, or while that member is live, the request is a
	// 409 conflict that names the member and its address.
	Replace bool `json:"replace,omitempty"`
}

// Recovery reports whether a new leader still waits for agents to re-register
// before it sends offers.
type Recovery struct {
	Active       bool       `json:"active"`
	Reregistered int        `json:"reregistered"`
	Expected     int        `json:"expected"`
	Deadline     *time.Time `json:"deadline,omitempty"`
}

// Cluster is the answer of GET /v1/cluster.
type Cluster struct {
	Leader   *Server   `json:"leader"`
	Servers  []Server  `json:"servers"`
	Recovery Recovery  `json:"recovery"`
	Total    Resources `json:"total"`
	// Allocated is what launched tasks hold, from the leader's live state;
	// nil (null) when the answering server could not ask the leader, or
	// was asked with ?stale=true as a follower.
	Allocated Resources `json:"allocated"`
	// Offered, Revocable (what the agents can lend now) and
	// RevocableAllocated (revocable resources offered or in use) come from
	// the leader's live state too, and are null when Allocated is.
	Offered            Resources `json:"offered"`
	Revocable          Resources `json:"revocable"`
	RevocableAllocated Resources `json:"revocable_allocated"`
	// Reserved is what the active reservations hold (replicated state).
	Reserved Resources `json:"reserved"`
	// StoreVersion is the store version the cluster has committed to: it
	// moves up with the first write after every server runs a newer one.
	StoreVersion uint32 `json:"store_version"`
}

// AuditEntry records one policy change.
type AuditEntry struct {
	Index     uint64          `json:"index"`
	Time      time.Time       `json:"time"`
	Principal string          `json:"principal"`
	Action    string          `json:"action"`
	Object    string          `json:"object"`
	Before    json.RawMessage `json:"before"`
	After     json.RawMessage `json:"after"`
}

// Effects are what a write would do beyond storing its object.
type Effects struct {
	RescindedOffers int                  `json:"rescinded_offers"`
	OverLimit       map[string]Resources `json:"over_limit,omitempty"`
	Warnings        []string             `json:"warnings,omitempty"`
	// Evictions are the running tasks the write kills: revocable tasks on
	// a role's reservations past its lowered lending limit.
	Evictions []Eviction `json:"evictions,omitempty"`
}

// Eviction is a task a write kills.
type Eviction struct {
	TaskID      string `json:"task_id"`
	FrameworkID string `json:"framework_id"`
	AgentID     string `json:"agent_id"`
	// Role is the role the task runs as (the borrower's).
	Role string `json:"role"`
	// Resources is what the task holds of the reservations it is evicted
	// from: what killing it gives back to their role.
	Resources Resources `json:"resources"`
}

// DryRun is the answer to a PUT or DELETE with ?dry_run=true.
type DryRun struct {
	DryRun  bool            `json:"dry_run"`
	Object  json.RawMessage `json:"object"`
	Effects Effects         `json:"effects"`
}

// List wrappers: a list comes wrapped in an object named for its items.
type (
	QuotaList struct {
		Quotas []Quota `json:"quotas"`
	}
	RoleList struct {
		Roles []Role `json:"roles"`
	}
	ReservationList struct {
		Reservations []Reservation `json:"reservations"`
	}
	AgentList struct {
		Agents []Agent `json:"agents"`
	}
	AuditList struct {
		Entries []AuditEntry `json:"entries"`
	}
)
