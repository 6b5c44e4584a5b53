package raftstore

import (
	"encoding/json"

	"github.com/allot/allot/masterd/api"
)

// A lending limit is nil for no cap and empty for lend nothing (store
// version 2), and the log, the audit trail and snapshots must keep the two
// apart. The json tag omitzero cannot do it on api.Resources: encoding/json
// asks a value's IsZero method, and api.Resources' is true for {} and for
// {"cpus": 0} as well, so both would be dropped. Omitting only nil, as
// omitempty did for every value but {}, keeps the bytes version 1 wrote.

// resourcesOrNone is api.Resources without its IsZero method: with
// omitzero, a field of this type is omitted only when it is nil.
type resourcesOrNone map[string]float64

// MarshalJSON writes the command as its fields say, LendingLimit omitted
// only when nil.
func (c RoleSet) MarshalJSON() ([]byte, error) {
	type fields RoleSet // the same fields, without this method
	return json.Marshal(struct {
		fields
		LendingLimit resourcesOrNone `json:"lending_limit,omitzero"`
	}{fields(c), resourcesOrNone(c.LendingLimit)})
}

// MarshalJSON writes the policy (in the audit trail) as its fields say,
// LendingLimit omitted only when nil. Version is repeated after it so that
// the fields keep the order version 1 wrote (encoding/json puts the
// embedded fields first). A generic helper cannot do the three at once: Go
// does not embed a type parameter.
func (p RolePolicy) MarshalJSON() ([]byte, error) {
	type fields RolePolicy
	return json.Marshal(struct {
		fields
		LendingLimit resourcesOrNone `json:"lending_limit,omitzero"`
		Version      uint64          `json:"version"`
	}{fields(p), resourcesOrNone(p.LendingLimit), p.Version})
}

// MarshalJSON writes the stored role as its fields say, LendingLimit
// omitted only when nil.
func (r storedRole) MarshalJSON() ([]byte, error) {
	type fields storedRole
	return json.Marshal(struct {
		fields
		LendingLimit resourcesOrNone `json:"lending_limit,omitzero"`
		Version      uint64          `json:"version"`
	}{fields(r), resourcesOrNone(r.LendingLimit), r.Version})
}

// emptyLendingLimitIsNone is version 1's reading of a lending limit: its
// log encoding dropped an empty one, so every version 1 server stored none.
func emptyLendingLimitIsNone(limit api.Resources) api.Resources {
	if len(limit) == 0 {
		return nil
	}
	return limit
}
