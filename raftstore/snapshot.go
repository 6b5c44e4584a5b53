package raftstore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/allot/allot/masterd/api"
)

// snapshotFormat is bumped whenever the snapshot layout changes; the golden
// file in testdata/ fails the tests when it changes by accident.
const snapshotFormat = 1

type snapshotV1 struct {
	Format           int                   `json:"format"`
	Index            uint64                `json:"index"`
	Quotas           []api.Quota           `json:"quotas"`
	Roles            []RolePolicy          `json:"roles"`
	Reservations     []api.Reservation     `json:"reservations"`
	RateLimits       []api.RateLimit       `json:"rate_limits"`
	RateLimitDefault *api.RateLimitDefault `json:"rate_limit_default"`
	Agents           []AgentRecord         `json:"agents"`
	// Frameworks is omitted when empty so that snapshots written before the
	// framework registry existed still read, and still compare equal.
	Frameworks []FrameworkRecord `json:"frameworks,omitempty"`
	Servers    []ServerRecord    `json:"servers"`
	Audit      []api.AuditEntry  `json:"audit"`
}

// WriteSnapshot writes s as indented, sorted JSON.
func WriteSnapshot(w io.Writer, s *State) error {
	snap := snapshotV1{
		Format:           snapshotFormat,
		Index:            s.index,
		Quotas:           s.Quotas(),
		Roles:            s.RolePolicies(),
		Reservations:     s.Reservations(),
		RateLimits:       s.RateLimits(),
		RateLimitDefault: s.rateLimitDefault,
		Agents:           s.Agents(),
		Frameworks:       s.Frameworks(),
		Servers:          s.Servers(),
		Audit:            s.audit,
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetIndent("", " ")
	if err := enc.Encode(&snap); err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	return nil
}

// ReadSnapshot reads what WriteSnapshot wrote into a fresh State.
func ReadSnapshot(r io.Reader) (*State, error) {
	var snap snapshotV1
	dec := json.NewDecoder(bufio.NewReader(r))
	dec.DisallowUnknownFields()
	err := dec.Decode(&snap)
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	if snap.Format != snapshotFormat {
		return nil, fmt.Errorf("read snapshot: format %d, this server reads %d", snap.Format, snapshotFormat)
	}
	s := NewState()
	s.index = snap.Index
	for _, q := range snap.Quotas {
		s.putQuota(q)
	}
	for _, r := range snap.Roles {
		s.roles[r.Role] = r
	}
	for _, r := range snap.Reservations {
		r.Status = "" // derived when read: see reservationStatuses
		s.reservations[r.Name] = r
	}
	for _, l := range snap.RateLimits {
		s.rateLimits[l.Principal] = l
	}
	s.rateLimitDefault = snap.RateLimitDefault
	for _, a := range snap.Agents {
		s.agents[a.ID] = a
		s.agentIDs[a.Name] = a.ID
	}
	for _, f := range snap.Frameworks {
		s.frameworks[f.ID] = f
	}
	for _, srv := range snap.Servers {
		s.servers[srv.ID] = srv
	}
	// The decoder keeps the snapshot's indentation inside raw JSON; compact it
	// so a restored trail holds the same bytes as one built from the log.
	for i := range snap.Audit {
		e := &snap.Audit[i]
		if e.Before, err = compactJSON(e.Before); err == nil {
			e.After, err = compactJSON(e.After)
		}
		if err != nil {
			return nil, fmt.Errorf("read snapshot: audit entry %d: %w", e.Index, err)
		}
	}
	s.audit = snap.Audit
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
