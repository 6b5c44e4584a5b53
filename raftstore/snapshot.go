package raftstore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/allot/allot/masterd/api"
)

// A snapshot is the state written in its own stored types, not the API's, so
// that a field added to a response never changes what is on disk. Its format
// follows the store version (see versions.go): format 2 adds the rules
// version, drops the reservations' derived status and writes an empty
// lending limit (lend nothing) as {}; format 3 adds the ACL state and rate
// limits' labels. A server writes the format of the newest store version
// whose write it has applied (format 1 until a version 2 write, format 2
// until a version 3 write), so that a server still on an older version can
// read any snapshot it is sent during a rolling upgrade. The golden files in
// testdata/ pin every format.
const (
	snapshotFormatV1 = 1
	snapshotFormatV2 = 2
	snapshotFormatV3 = 3
)

type snapshotDoc struct {
	Format int `json:"format"`
	// RulesVersion is State.rulesVersion (format 2).
	RulesVersion     uint32                  `json:"rules_version,omitempty"`
	Index            uint64                  `json:"index"`
	Quotas           []storedQuota           `json:"quotas"`
	Roles            []storedRole            `json:"roles"`
	Reservations     []storedReservation     `json:"reservations"`
	RateLimits       []storedRateLimit       `json:"rate_limits"`
	RateLimitDefault *storedRateLimitDefault `json:"rate_limit_default"`
	Agents           []storedAgent           `json:"agents"`
	// Frameworks is omitted when empty so that snapshots written before the
	// framework registry existed still read, and still compare equal.
	Frameworks []storedFramework `json:"frameworks,omitempty"`
	Servers    []storedServer    `json:"servers"`
	// The ACL state (format 3), omitted while empty.
	ACLBootstrapped bool               `json:"acl_bootstrapped,omitempty"`
	ACLPolicies     []storedACLPolicy  `json:"acl_policies,omitempty"`
	ACLTokens       []storedACLToken   `json:"acl_tokens,omitempty"`
	Audit           []storedAuditEntry `json:"audit"`
}

type storedACLPolicy struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Rules       []storedACLRule `json:"rules"`
	Version     uint64          `json:"version"`
}

type storedACLRule struct {
	Object string   `json:"object"`
	Access string   `json:"access"`
	Roles  []string `json:"roles,omitempty"`
}

// storedACLToken is a token and the SHA-256 of its secret (hex); the
// secret itself is never stored.
type storedACLToken struct {
	Accessor    string     `json:"accessor"`
	Description string     `json:"description"`
	Policies    []string   `json:"policies"`
	Principal   string     `json:"principal"`
	Management  bool       `json:"management"`
	SecretHash  SecretHash `json:"secret_hash"`
	Version     uint64     `json:"version"`
}

type storedQuota struct {
	Role       string        `json:"role"`
	Guarantees api.Resources `json:"guarantees"`
	Limits     api.Resources `json:"limits"`
	Version    uint64        `json:"version"`
}

type storedRole struct {
	Role   string  `json:"role"`
	Weight float64 `json:"weight"`
	// LendingLimit nil (no cap) is omitted (MarshalJSON, lending.go);
	// empty (lend nothing) is written {}, which only format 2 holds.
	LendingLimit api.Resources `json:"lending_limit"`
	Version      uint64        `json:"version"`
}

type storedReservation struct {
	Name      string        `json:"name"`
	Agent     string        `json:"agent"`
	Role      string        `json:"role"`
	Resources api.Resources `json:"resources"`
	Version   uint64        `json:"version"`
	// Status is derived from the agents when read; format 1 wrote it, and
	// it is ignored when read.
	Status string `json:"status,omitempty"`
}

type storedRateLimit struct {
	Principal string `json:"principal"`
	// Label is empty in snapshots of format 2 and older.
	Label    string   `json:"label,omitempty"`
	QPS      *float64 `json:"qps"`
	Burst    int      `json:"burst"`
	Capacity int      `json:"capacity"`
	Version  uint64   `json:"version"`
}

type storedRateLimitDefault struct {
	QPS      *float64 `json:"qps"`
	Burst    int      `json:"burst"`
	Capacity int      `json:"capacity"`
	Version  uint64   `json:"version"`
}

type storedAgent struct {
	ID           string        `json:"id"`
	Name         string        `json:"name"`
	Hostname     string        `json:"hostname"`
	Resources    api.Resources `json:"resources"`
	Capabilities []string      `json:"capabilities,omitempty"`
	AdmittedAt   time.Time     `json:"admitted_at"`
	Version      uint64        `json:"version"`
}

type storedFramework struct {
	ID                     string    `json:"id"`
	Name                   string    `json:"name"`
	Principal              string    `json:"principal,omitempty"`
	Roles                  []string  `json:"roles"`
	Capabilities           []string  `json:"capabilities,omitempty"`
	FailoverTimeoutSeconds float64   `json:"failover_timeout_seconds,omitempty"`
	RegisteredAt           time.Time `json:"registered_at"`
	Version                uint64    `json:"version"`
}

type storedServer struct {
	ID          string `json:"id"`
	RaftAddress string `json:"raft_address"`
	APIAddress  string `json:"api_address"`
	Version     uint64 `json:"version"`
}

type storedAuditEntry struct {
	Index     uint64          `json:"index"`
	Time      time.Time       `json:"time"`
	Principal string          `json:"principal"`
	Action    string          `json:"action"`
	Object    string          `json:"object"`
	Before    json.RawMessage `json:"before"`
	After     json.RawMessage `json:"after"`
}

// snapshotFormat is the format a state of rules version rules is written
// in: the newest a server that took part in it can read.
func snapshotFormat(rules uint32) int {
	switch {
	case rules >= 3:
		return snapshotFormatV3
	case rules >= 2:
		return snapshotFormatV2
	}
	return snapshotFormatV1
}

// WriteSnapshot writes s as indented, sorted JSON.
func WriteSnapshot(w io.Writer, s *State) error {
	doc := newSnapshotDoc(s)
	bw := bufio.NewWriter(w)
	if err := encodeDoc(bw, &doc); err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	return nil
}

// newSnapshotDoc is s in its stored types.
func newSnapshotDoc(s *State) snapshotDoc {
	format := snapshotFormat(s.RulesVersion())
	// Empty lists are written as [], as format 1 always did.
	doc := snapshotDoc{Format: format, Index: s.index, Quotas: []storedQuota{}, Roles: []storedRole{},
		Reservations: []storedReservation{}, RateLimits: []storedRateLimit{}, Agents: []storedAgent{},
		Servers: []storedServer{}}
	if s.audit != nil {
		doc.Audit = make([]storedAuditEntry, 0, len(s.audit))
	}
	if format >= snapshotFormatV2 {
		doc.RulesVersion = s.rulesVersion
	}
	for _, q := range s.Quotas() {
		doc.Quotas = append(doc.Quotas, storedQuota(q))
	}
	for _, r := range s.RolePolicies() {
		doc.Roles = append(doc.Roles, storedRole(r))
	}
	for _, r := range s.Reservations() {
		if format >= snapshotFormatV2 {
			r.Status = ""
		}
		doc.Reservations = append(doc.Reservations, storedReservation(r))
	}
	for _, l := range s.RateLimits() {
		doc.RateLimits = append(doc.RateLimits, storedRateLimit(l))
	}
	if d := s.rateLimitDefault; d != nil {
		doc.RateLimitDefault = (*storedRateLimitDefault)(d)
	}
	for _, a := range s.Agents() {
		doc.Agents = append(doc.Agents, storedAgent(a))
	}
	for _, f := range s.Frameworks() {
		doc.Frameworks = append(doc.Frameworks, storedFramework(f))
	}
	for _, srv := range s.Servers() {
		doc.Servers = append(doc.Servers, storedServer(srv))
	}
	// A state below version 3 has no ACL state: only version 3 writes make
	// it.
	doc.ACLBootstrapped = s.aclBootstrapped
	for _, p := range s.ACLPolicies() {
		sp := storedACLPolicy{Name: p.Name, Description: p.Description, Rules: make([]storedACLRule, 0, len(p.Rules)), Version: p.Version}
		for _, r := range p.Rules {
			sp.Rules = append(sp.Rules, storedACLRule(r))
		}
		doc.ACLPolicies = append(doc.ACLPolicies, sp)
	}
	s.ForEachACLToken(func(t api.ACLToken, hash [32]byte) {
		doc.ACLTokens = append(doc.ACLTokens, storedACLToken{Accessor: t.Accessor, Description: t.Description,
			Policies: t.Policies, Principal: t.Principal, Management: t.Management, SecretHash: hash, Version: t.Version})
	})
	for _, e := range s.audit {
		doc.Audit = append(doc.Audit, storedAuditEntry(e))
	}
	return doc
}

// encodeDoc writes doc as a json.Encoder with SetIndent("", " ") does, but
// one list element at a time: the longest lists (the audit trail, the
// agents) are never held encoded whole, and a backup goes out as it is
// encoded. The golden snapshots hold it to the encoder's bytes.
func encodeDoc(w *bufio.Writer, doc *snapshotDoc) error {
	v := reflect.ValueOf(doc).Elem()
	w.WriteByte('{')
	for i, written := 0, 0; i < v.NumField(); i++ {
		name, opts, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		value := v.Field(i)
		if opts == "omitempty" && value.IsZero() || opts == "omitempty" && value.Kind() == reflect.Slice && value.Len() == 0 {
			continue
		}
		if written++; written > 1 {
			w.WriteByte(',')
		}
		w.WriteString("\n \"" + name + "\": ")
		if value.Kind() != reflect.Slice || value.Len() == 0 {
			data, err := json.MarshalIndent(value.Interface(), " ", " ")
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			w.Write(data)
			continue
		}
		w.WriteByte('[')
		for j := range value.Len() {
			data, err := json.MarshalIndent(value.Index(j).Interface(), "  ", " ")
			if err != nil {
				return fmt.Errorf("%s[%d]: %w", name, j, err)
			}
			if j > 0 {
				w.WriteByte(',')
			}
			w.WriteString("\n  ")
			w.Write(data)
		}
		w.WriteString("\n ]")
	}
	_, err := w.WriteString("\n}\n")
	return err
}

// ReadSnapshot reads what WriteSnapshot wrote, in either format, into a
// fresh State.
func ReadSnapshot(r io.Reader) (*State, error) {
	var doc snapshotDoc
	dec := json.NewDecoder(bufio.NewReader(r))
	dec.DisallowUnknownFields()
	err := dec.Decode(&doc)
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	switch {
	case doc.Format < snapshotFormatV1 || doc.Format > snapshotFormatV3:
		return nil, fmt.Errorf("read snapshot: format %d, this server reads %d to %d (a newer release wrote it?)",
			doc.Format, snapshotFormatV1, snapshotFormatV3)
	case doc.Format < snapshotFormatV3 && (doc.ACLBootstrapped || len(doc.ACLPolicies) > 0 || len(doc.ACLTokens) > 0 ||
		slices.ContainsFunc(doc.RateLimits, func(l storedRateLimit) bool { return l.Label != "" })):
		return nil, fmt.Errorf("read snapshot: format %d holds ACL state or labeled rate limits, which only format 3 has", doc.Format)
	case doc.RulesVersion > StoreVersion:
		return nil, fmt.Errorf("read snapshot: written under store version %d, this server runs %d: upgrade it",
			doc.RulesVersion, StoreVersion)
	}
	s := NewState()
	s.index = doc.Index
	s.rulesVersion = doc.RulesVersion
	for _, q := range doc.Quotas {
		s.putQuota(api.Quota(q))
	}
	for _, r := range doc.Roles {
		if doc.Format < snapshotFormatV2 {
			r.LendingLimit = emptyLendingLimitIsNone(r.LendingLimit)
		}
		s.roles[r.Role] = RolePolicy(r)
	}
	for _, r := range doc.Reservations {
		r.Status = "" // derived when read: see reservationStatuses
		s.reservations[r.Name] = api.Reservation(r)
	}
	for _, l := range doc.RateLimits {
		s.rateLimits[rateLimitKey{l.Principal, l.Label}] = api.RateLimit(l)
	}
	if d := doc.RateLimitDefault; d != nil {
		s.rateLimitDefault = (*api.RateLimitDefault)(d)
	}
	for _, a := range doc.Agents {
		s.agents[a.ID] = AgentRecord(a)
		s.agentIDs[a.Name] = a.ID
	}
	for _, f := range doc.Frameworks {
		s.frameworks[f.ID] = FrameworkRecord(f)
	}
	for _, srv := range doc.Servers {
		s.servers[srv.ID] = ServerRecord(srv)
	}
	s.aclBootstrapped = doc.ACLBootstrapped
	for _, p := range doc.ACLPolicies {
		policy := api.ACLPolicy{Name: p.Name, Description: p.Description, Rules: make([]api.ACLRule, 0, len(p.Rules)), Version: p.Version}
		for _, r := range p.Rules {
			policy.Rules = append(policy.Rules, api.ACLRule(r))
		}
		s.aclPolicies[p.Name] = policy
	}
	for _, t := range doc.ACLTokens {
		policies := t.Policies
		if policies == nil {
			policies = []string{}
		}
		s.aclTokens[t.Accessor] = aclToken{hash: t.SecretHash, token: api.ACLToken{Accessor: t.Accessor, Description: t.Description,
			Policies: policies, Principal: t.Principal, Management: t.Management, Version: t.Version}}
	}
	// The decoder keeps the snapshot's indentation inside raw JSON; compact it
	// so a restored trail holds the same bytes as one built from the log.
	for _, e := range doc.Audit {
		if e.Before, err = compactJSON(e.Before); err == nil {
			e.After, err = compactJSON(e.After)
		}
		if err != nil {
			return nil, fmt.Errorf("read snapshot: audit entry %d: %w", e.Index, err)
		}
		s.audit = append(s.audit, api.AuditEntry(e))
	}
	return s, nil
}

func compactJSON(raw json.RawMessage) (json.RawMessage, error) {
	if raw == nil {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
