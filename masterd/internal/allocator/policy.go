package allocator

import (
	"fmt"
	"math"

	"github.com/allot/allot/masterd/api"
)

// SetQuota sets (or replaces) a role's guarantees and limits; a resource left
// out of limits is unlimited. Guarantees must not exceed limits. The checks
// that need the cluster's context (capacity, parents against children,
// lowering a limit below consumption) are the caller's.
func (a *Allocator) SetQuota(roleName string, guarantees, limits api.Resources) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := validatePolicyRole(roleName); err != nil {
		return err
	}
	g, err := a.toVec(guarantees, "guarantees")
	if err != nil {
		return err
	}
	l, err := a.toVec(limits, "limits")
	if err != nil {
		return err
	}
	for name, limit := range limits {
		if guarantees[name] > limit {
			return fmt.Errorf("role %q: guarantee %v of %s exceeds its limit %v: %w", roleName, guarantees[name], name, limit, ErrInvalid)
		}
	}
	r := a.roleNode(roleName)
	limited := make([]bool, len(a.kindNames))
	for name := range limits {
		limited[a.kindIDs[name]] = true
	}
	hadGuarantee := r.hasGuarantee
	r.guarantee = g
	r.hasGuarantee = !g.isZero()
	r.limit = l
	r.limited = limited
	r.hasLimit = len(limits) > 0
	switch {
	case r.hasGuarantee && !hadGuarantee:
		a.guaranteedRoles++
	case !r.hasGuarantee && hadGuarantee:
		a.guaranteedRoles--
	}
	a.refreshLimitFull(r)
	// Kept in step even when the last guarantee goes, so no stale excess
	// survives it.
	a.updateRequired(r)
	return nil
}

// RemoveQuota drops a role's guarantees and limits.
func (a *Allocator) RemoveQuota(roleName string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.roles[roleName]
	if !ok {
		return
	}
	if r.hasGuarantee {
		a.guaranteedRoles--
	}
	r.hasGuarantee, r.hasLimit = false, false
	r.guarantee, r.limit, r.limited = nil, nil, nil
	r.limitFull = false
	a.updateRequired(r)
	a.gcRole(r)
}

// SetWeight sets a role's DRF weight: a role of weight 2 is served until its
// dominant share is twice that of a role of weight 1. api.DefaultWeight
// resets it.
func (a *Allocator) SetWeight(roleName string, weight float64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := validatePolicyRole(roleName); err != nil {
		return err
	}
	if !(weight > 0) || math.IsInf(weight, 0) {
		return fmt.Errorf("role %q: weight %v must be positive and finite: %w", roleName, weight, ErrInvalid)
	}
	r := a.roleNode(roleName)
	r.weight = weight
	a.sharesDirty = true
	a.gcRole(r)
	return nil
}
