package raftstore

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/allot/allot/masterd/api"
)

// MessageType identifies a command in the Raft log. Values are written to disk:
// append new types at the end, never renumber or reuse one.
type MessageType uint8

const (
	QuotaSetType MessageType = iota + 1
	QuotaDeleteType
	RoleSetType
	RoleDeleteType
	ReservationSetType
	ReservationDeleteType
	RateLimitSetType
	RateLimitDeleteType
	RateLimitDefaultSetType
	RateLimitDefaultDeleteType
	RateLimitConfigReplaceType
	AgentAdmitType
	AgentRemoveType
	ServerSetType
	ServerRemoveType
	FrameworkSetType
	FrameworkRemoveType
	ACLBootstrapType
	ACLPolicySetType
	ACLPolicyDeleteType
	ACLTokenSetType
	ACLTokenDeleteType
)

// IgnoreUnknownTypeFlag marks a command that an older server may skip when it
// does not know the type. Without it an unknown type panics, so replicas never
// silently diverge.
const IgnoreUnknownTypeFlag MessageType = 128

// The registry: a new command type is one constant above and one line here,
// with its validate, check and apply methods. Each of them gets the store
// version the entry is judged by (see versions.go).
func init() {
	register(QuotaSetType, "quota.set", 1, (*State).checkQuotaSet, (*State).applyQuotaSet)
	register(QuotaDeleteType, "quota.delete", 1, (*State).checkQuotaDelete, (*State).applyQuotaDelete)
	register(RoleSetType, "role.set", 1, (*State).checkRoleSet, (*State).applyRoleSet)
	register(RoleDeleteType, "role.delete", 1, (*State).checkRoleDelete, (*State).applyRoleDelete)
	register(ReservationSetType, "reservation.set", 1, (*State).checkReservationSet, (*State).applyReservationSet)
	register(ReservationDeleteType, "reservation.delete", 1, (*State).checkReservationDelete, (*State).applyReservationDelete)
	register(RateLimitSetType, "ratelimit.set", 1, (*State).checkRateLimitSet, (*State).applyRateLimitSet)
	register(RateLimitDeleteType, "ratelimit.delete", 1, (*State).checkRateLimitDelete, (*State).applyRateLimitDelete)
	register(RateLimitDefaultSetType, "ratelimit_default.set", 1, (*State).checkRateLimitDefaultSet, (*State).applyRateLimitDefaultSet)
	register(RateLimitDefaultDeleteType, "ratelimit_default.delete", 1, (*State).checkRateLimitDefaultDelete, (*State).applyRateLimitDefaultDelete)
	registerAny(RateLimitConfigReplaceType, "ratelimits.replace", 1, (*State).checkRateLimitConfigReplace, (*State).applyRateLimitConfigReplace)
	register(AgentAdmitType, "agent.admit", 1, (*State).checkAgentAdmit, (*State).applyAgentAdmit)
	register(AgentRemoveType, "agent.remove", 1, (*State).checkAgentRemove, (*State).applyAgentRemove)
	register(ServerSetType, "server.set", 1, (*State).checkServerSet, (*State).applyServerSet)
	register(ServerRemoveType, "server.remove", 1, (*State).checkServerRemove, (*State).applyServerRemove)
	register(FrameworkSetType, "framework.set", 1, (*State).checkFrameworkSet, (*State).applyFrameworkSet)
	register(FrameworkRemoveType, "framework.remove", 1, (*State).checkFrameworkRemove, (*State).applyFrameworkRemove)
	register(ACLBootstrapType, "acl.bootstrap", 3, (*State).checkACLBootstrap, (*State).applyACLBootstrap)
	register(ACLPolicySetType, "acl.policy.set", 3, (*State).checkACLPolicySet, (*State).applyACLPolicySet)
	register(ACLPolicyDeleteType, "acl.policy.delete", 3, (*State).checkACLPolicyDelete, (*State).applyACLPolicyDelete)
	register(ACLTokenSetType, "acl.token.set", 3, (*State).checkACLTokenSet, (*State).applyACLTokenSet)
	register(ACLTokenDeleteType, "acl.token.delete", 3, (*State).checkACLTokenDelete, (*State).applyACLTokenDelete)
}

func (t MessageType) String() string {
	if spec, ok := registry[t]; ok {
		return spec.name
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// WriteMeta travels with every command. The leader stamps Time before it
// proposes, so Apply never reads a clock.
type WriteMeta struct {
	Time      time.Time `json:"time"`
	Principal string    `json:"principal,omitempty"`
	// IfMatch and IfNoneMatch are checked inside Apply, against the state the
	// command is applied to, so concurrent writers cannot lose an update.
	IfMatch     uint64 `json:"if_match,omitempty"`
	IfNoneMatch bool   `json:"if_none_match,omitempty"`
	Force       bool   `json:"force,omitempty"`
	// Rules is the store version whose rules judge this write (see
	// versions.go). The leader stamps it; entries written before it existed
	// have none and are judged by version 1's.
	Rules uint32 `json:"rules,omitempty"`
	// validatedBy is the store version whose input rules Check found the
	// command to pass (0: none), so that Apply need not judge it again.
	// Not in the log.
	validatedBy uint32
}

// rules returns the store version that judges the write.
func (m *WriteMeta) rules() uint32 { return max(m.Rules, 1) }

// Command is one typed write.
type Command interface {
	Type() MessageType
	meta() *WriteMeta
	// validate applies the input rules of store version rules, which need
	// nothing but the command, and normalizes it in place. It runs before a
	// write is proposed, and in Apply only for version 1 entries, which were
	// proposed unnormalized (see versions.go).
	validate(rules uint32) *api.Error
}

// Meta returns the write metadata of any command.
func Meta(c Command) *WriteMeta { return c.meta() }

type QuotaSet struct {
	WriteMeta
	Role       string        `json:"role"`
	Guarantees api.Resources `json:"guarantees"`
	Limits     api.Resources `json:"limits"`
}

type QuotaDelete struct {
	WriteMeta
	Role string `json:"role"`
}

type RoleSet struct {
	WriteMeta
	Role   string  `json:"role"`
	Weight float64 `json:"weight"`
	// LendingLimit nil is no cap, empty is lend nothing (store version 2).
	// MarshalJSON omits it only when nil (lending.go).
	LendingLimit api.Resources `json:"lending_limit"`
}

type RoleDelete struct {
	WriteMeta
	Role string `json:"role"`
}

type ReservationSet struct {
	WriteMeta
	Name      string        `json:"name"`
	Agent     string        `json:"agent"`
	Role      string        `json:"role"`
	Resources api.Resources `json:"resources"`
}

type ReservationDelete struct {
	WriteMeta
	Name string `json:"name"`
}

// RateLimitSet and RateLimitDelete name the limited principal
// "limited_principal" in the log: "principal" is WriteMeta's, the author of
// the write, and the shallower field would hide it from encoding/json.
// Label, when set (store version 3), names the limit of the principal's
// frameworks with that label instead of the principal's own; it is omitted
// when empty, so an unlabeled command keeps the bytes version 1 wrote.
type RateLimitSet struct {
	WriteMeta
	Principal string   `json:"limited_principal"`
	Label     string   `json:"label,omitempty"`
	QPS       *float64 `json:"qps"`
	Burst     int      `json:"burst"`
	Capacity  int      `json:"capacity"`
}

type RateLimitDelete struct {
	WriteMeta
	Principal string `json:"limited_principal"`
	Label     string `json:"label,omitempty"`
}

type RateLimitDefaultSet struct {
	WriteMeta
	QPS      *float64 `json:"qps"`
	Burst    int      `json:"burst"`
	Capacity int      `json:"capacity"`
}

type RateLimitDefaultDelete struct {
	WriteMeta
}

// RateLimitConfigReplace replaces every per-principal limit and the default.
type RateLimitConfigReplace struct {
	WriteMeta
	Limits  []RateLimitSet       `json:"limits"`
	Default *RateLimitDefaultSet `json:"default,omitempty"`
}

// AgentAdmit records an agent in the registry (or updates its resources when
// an agent of that name is already admitted).
type AgentAdmit struct {
	WriteMeta
	ID           string        `json:"id"`
	Name         string        `json:"name"`
	Hostname     string        `json:"hostname"`
	Resources    api.Resources `json:"resources"`
	Capabilities []string      `json:"capabilities,omitempty"`
}

type AgentRemove struct {
	WriteMeta
	ID string `json:"id"`
}

// ServerSet records the API address of a Raft server, so that followers can
// forward to the leader.
type ServerSet struct {
	WriteMeta
	ID          string `json:"id"`
	RaftAddress string `json:"raft_address"`
	APIAddress  string `json:"api_address"`
}

type ServerRemove struct {
	WriteMeta
	ID string `json:"id"`
}

// FrameworkSet records a subscribed framework (or updates it on re-subscription).
// The framework's principal is "framework_principal" in the log for the same
// reason as RateLimitSet's: "principal" is WriteMeta's, the author of the
// write, and would be hidden by the shallower field.
type FrameworkSet struct {
	WriteMeta
	ID                     string   `json:"id"`
	Name                   string   `json:"name"`
	Principal              string   `json:"framework_principal,omitempty"`
	Roles                  []string `json:"roles"`
	Capabilities           []string `json:"capabilities,omitempty"`
	FailoverTimeoutSeconds float64  `json:"failover_timeout_seconds,omitempty"`
}

type FrameworkRemove struct {
	WriteMeta
	ID string `json:"id"`
}

// ACL commands (store version 3). A token's secret never reaches the store:
// the leader hashes it (SHA-256) and proposes the hash, which the log and
// the snapshots hold and nothing the store answers (results, getters but
// ForEachACLToken, the audit trail) shows.

// ACLBootstrap creates the first management token, principal "bootstrap",
// and marks the cluster bootstrapped; a second one is refused (409).
type ACLBootstrap struct {
	WriteMeta
	Accessor   string     `json:"accessor"`
	SecretHash SecretHash `json:"secret_hash"`
}

// ACLPolicySet creates or replaces a policy. Its rules are "policy_rules"
// in the log: "rules" is WriteMeta's, the store version that judges the
// write, and the shallower field would hide it from encoding/json (in Go,
// c.Rules is the policy's; Meta(c).Rules the stamp).
type ACLPolicySet struct {
	WriteMeta
	Name        string        `json:"name"`
	Description string        `json:"description,omitempty"`
	Rules       []api.ACLRule `json:"policy_rules"`
}

// ACLPolicyDelete removes a policy and its name from every token that names
// it.
type ACLPolicyDelete struct {
	WriteMeta
	Name string `json:"name"`
}

// ACLTokenSet creates or updates a token. A new accessor needs SecretHash,
// the hash of the secret the leader generated; an update keeps the stored
// hash and ignores the command's (a dry run of a new token still needs one).
// Principal is the token's, "token_principal" in the log for the same reason
// as RateLimitSet's; empty is the accessor.
type ACLTokenSet struct {
	WriteMeta
	Accessor    string     `json:"accessor"`
	Description string     `json:"description,omitempty"`
	Policies    []string   `json:"policies"`
	Principal   string     `json:"token_principal,omitempty"`
	Management  bool       `json:"management,omitempty"`
	SecretHash  SecretHash `json:"secret_hash,omitzero"`
}

type ACLTokenDelete struct {
	WriteMeta
	Accessor string `json:"accessor"`
}

// SecretHash is the SHA-256 of a token's secret, hex in JSON.
type SecretHash [32]byte

func (h SecretHash) MarshalText() ([]byte, error) {
	out := make([]byte, hex.EncodedLen(len(h)))
	hex.Encode(out, h[:])
	return out, nil
}

func (h *SecretHash) UnmarshalText(text []byte) error {
	if hex.DecodedLen(len(text)) != len(h) {
		return fmt.Errorf("secret hash: want %d hex digits, not %d", 2*len(h), len(text))
	}
	_, err := hex.Decode(h[:], text)
	if err != nil {
		return fmt.Errorf("secret hash: %w", err)
	}
	return nil
}

// IsZero reports whether no hash is set (omitzero).
func (h SecretHash) IsZero() bool { return h == SecretHash{} }

func (c *QuotaSet) Type() MessageType               { return QuotaSetType }
func (c *QuotaDelete) Type() MessageType            { return QuotaDeleteType }
func (c *RoleSet) Type() MessageType                { return RoleSetType }
func (c *RoleDelete) Type() MessageType             { return RoleDeleteType }
func (c *ReservationSet) Type() MessageType         { return ReservationSetType }
func (c *ReservationDelete) Type() MessageType      { return ReservationDeleteType }
func (c *RateLimitSet) Type() MessageType           { return RateLimitSetType }
func (c *RateLimitDelete) Type() MessageType        { return RateLimitDeleteType }
func (c *RateLimitDefaultSet) Type() MessageType    { return RateLimitDefaultSetType }
func (c *RateLimitDefaultDelete) Type() MessageType { return RateLimitDefaultDeleteType }
func (c *RateLimitConfigReplace) Type() MessageType { return RateLimitConfigReplaceType }
func (c *AgentAdmit) Type() MessageType             { return AgentAdmitType }
func (c *AgentRemove) Type() MessageType            { return AgentRemoveType }
func (c *ServerSet) Type() MessageType              { return ServerSetType }
func (c *ServerRemove) Type() MessageType           { return ServerRemoveType }
func (c *FrameworkSet) Type() MessageType           { return FrameworkSetType }
func (c *FrameworkRemove) Type() MessageType        { return FrameworkRemoveType }
func (c *ACLBootstrap) Type() MessageType           { return ACLBootstrapType }
func (c *ACLPolicySet) Type() MessageType           { return ACLPolicySetType }
func (c *ACLPolicyDelete) Type() MessageType        { return ACLPolicyDeleteType }
func (c *ACLTokenSet) Type() MessageType            { return ACLTokenSetType }
func (c *ACLTokenDelete) Type() MessageType         { return ACLTokenDeleteType }

func (m *WriteMeta) meta() *WriteMeta { return m }

// Encode writes the type byte followed by the JSON payload.
func Encode(c Command) ([]byte, error) {
	payload, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", c.Type(), err)
	}
	return append([]byte{byte(c.Type())}, payload...), nil
}

// Decode reads a command written by Encode. An unknown type returns
// errUnknownType so the FSM can decide between skipping and panicking.
func Decode(data []byte) (Command, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("decode command: empty log entry")
	}
	t := MessageType(data[0])
	spec, ok := registry[t&^IgnoreUnknownTypeFlag]
	if !ok {
		return nil, &unknownTypeError{t: t}
	}
	c := spec.new()
	if err := json.Unmarshal(data[1:], c); err != nil {
		return nil, fmt.Errorf("decode %s: %w", t, err)
	}
	return c, nil
}

type unknownTypeError struct{ t MessageType }

func (e *unknownTypeError) Error() string {
	return fmt.Sprintf("unknown command type %d", uint8(e.t))
}
