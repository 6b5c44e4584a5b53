package allocator

import (
	"fmt"
	"slices"
)

type framework struct {
	// records first: every grant appends to it, and the rest of the
	// framework is seldom read in a cycle.
	records       []*allocation
	id, principal string
	slot          int
	rank          int // of id among the frameworks' ids; see nameRanks
	// registered is false for a framework known only from tasks an agent
	// reported before the framework re-subscribed after a failover.
	registered   bool
	active       bool
	capabilities []string
	revocable    bool

	roles            []*fwRole
	eligibleRoles    int
	revEligibleRoles int
	loans            []*loan
	filters          map[*agent]*filter
}

// fwRole is a framework's membership in one role: its allocation there and
// its place in the role's DRF order.
type fwRole struct {
	// What DRF reads of every framework it looks at comes first; rank and
	// slot are the framework's, copied here so that looking at a
	// framework in a role's order is one cache line, not two.
	share      float64 // the key in role.frameworks, changed through rekeyFramework
	rank       int     // fw.rank
	slot       int     // fw.slot
	eligible   bool
	subscribed bool
	suppressed bool

	fw   *framework
	role *role

	allocated vec
	records   int

	// revEligible: eligible, and the framework takes revocable resources.
	revEligible  bool
	revAllocated vec     // revocable, offered and in use
	revShare     float64 // the key in role.revFrameworks
	loans        int
}

func (fw *framework) roleEntry(r *role) *fwRole {
	for _, fr := range fw.roles {
		if fr.role == r {
			return fr
		}
	}
	return nil
}

func (a *Allocator) newFramework(id string) *framework {
	fw := &framework{id: id}
	if n := len(a.freeSlots); n > 0 {
		fw.slot = a.freeSlots[n-1]
		a.freeSlots = a.freeSlots[:n-1]
		a.slots[fw.slot] = fw
	} else {
		fw.slot = len(a.slots)
		a.slots = append(a.slots, fw)
	}
	a.frameworks[id] = fw
	a.frameworkRanks.add(fw)
	return fw
}

func (a *Allocator) newFwRole(fw *framework, r *role) *fwRole {
	fr := &fwRole{fw: fw, role: r, rank: fw.rank, slot: fw.slot}
	r.frameworks = append(r.frameworks, fr)
	place(r.frameworks, len(r.frameworks)-1, fwLess)
	fw.roles = append(fw.roles, fr)
	return fr
}

// dropFwRoleIfUnused forgets a membership that neither subscribes nor holds
// allocations.
func (a *Allocator) dropFwRoleIfUnused(fr *fwRole) {
	if fr.subscribed || fr.records > 0 || fr.loans > 0 {
		return
	}
	r, fw := fr.role, fr.fw
	i := find(r.frameworks, fr, fwLess)
	r.frameworks = slices.Delete(r.frameworks, i, i+1)
	fw.roles = slices.DeleteFunc(fw.roles, func(x *fwRole) bool { return x == fr })
	a.gcRole(r)
}

func validateFramework(f Framework) error {
	if f.ID == "" {
		return fmt.Errorf("framework id is empty: %w", ErrInvalid)
	}
	for _, r := range f.Roles {
		if err := validateRoleName(r); err != nil {
			return fmt.Errorf("framework %q: %w", f.ID, err)
		}
	}
	for _, r := range f.SuppressedRoles {
		if !slices.Contains(f.Roles, r) {
			return fmt.Errorf("framework %q: suppressed role %q is not one of its roles: %w", f.ID, r, ErrInvalid)
		}
	}
	return nil
}

// AddFramework adds a subscribed, active framework.
func (a *Allocator) AddFramework(f Framework) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := validateFramework(f); err != nil {
		return err
	}
	fw, ok := a.frameworks[f.ID]
	if ok && fw.registered {
		return fmt.Errorf("framework %q: %w", f.ID, ErrAlreadyExists)
	}
	if !ok {
		fw = a.newFramework(f.ID)
	}
	fw.registered = true
	fw.active = true
	a.applyFramework(fw, f)
	return nil
}

// UpdateFramework changes a framework's principal, roles, suppressed roles and
// capabilities, as a re-subscription does.
func (a *Allocator) UpdateFramework(f Framework) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := validateFramework(f); err != nil {
		return err
	}
	fw, ok := a.frameworks[f.ID]
	if !ok || !fw.registered {
		return fmt.Errorf("framework %q: %w", f.ID, ErrUnknownFramework)
	}
	a.applyFramework(fw, f)
	return nil
}

func (a *Allocator) applyFramework(fw *framework, f Framework) {
	fw.principal = f.Principal
	fw.capabilities = slices.Clone(f.Capabilities)
	fw.revocable = slices.Contains(f.Capabilities, CapabilityRevocableResources)
	for _, fr := range slices.Clone(fw.roles) {
		fr.subscribed = slices.Contains(f.Roles, fr.role.name)
		fr.suppressed = slices.Contains(f.SuppressedRoles, fr.role.name)
		a.setEligible(fr)
		a.dropFwRoleIfUnused(fr)
	}
	for _, name := range f.Roles {
		r := a.roleNode(name)
		if fw.roleEntry(r) != nil {
			continue
		}
		fr := a.newFwRole(fw, r)
		fr.subscribed = true
		fr.suppressed = slices.Contains(f.SuppressedRoles, name)
		a.setEligible(fr)
	}
}

// RemoveFramework forgets a framework and frees everything allocated to it;
// the caller has rescinded its offers and killed its tasks.
func (a *Allocator) RemoveFramework(id string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	fw, ok := a.frameworks[id]
	if !ok {
		return fmt.Errorf("framework %q: %w", id, ErrUnknownFramework)
	}
	for len(fw.records) > 0 {
		a.dropRecord(fw.records[len(fw.records)-1])
	}
	for len(fw.loans) > 0 {
		a.dropLoan(fw.loans[len(fw.loans)-1])
	}
	a.clearFilters(fw)
	fw.registered = false
	for _, fr := range slices.Clone(fw.roles) {
		fr.subscribed = false
		a.setEligible(fr)
		a.dropFwRoleIfUnused(fr)
	}
	a.slots[fw.slot] = nil
	a.freeSlots = append(a.freeSlots, fw.slot)
	delete(a.frameworks, id)
	a.frameworkRanks.remove(fw)
	return nil
}

// ActivateFramework resumes offers to a reconnected framework.
func (a *Allocator) ActivateFramework(id string) error {
	return a.setFrameworkActive(id, true)
}

// DeactivateFramework stops offers to a disconnected framework and drops its
// filters, as Mesos does; its allocations stay.
func (a *Allocator) DeactivateFramework(id string) error {
	return a.setFrameworkActive(id, false)
}

func (a *Allocator) setFrameworkActive(id string, active bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	fw, ok := a.frameworks[id]
	if !ok || !fw.registered {
		return fmt.Errorf("framework %q: %w", id, ErrUnknownFramework)
	}
	fw.active = active
	if !active {
		a.clearFilters(fw)
	}
	for _, fr := range fw.roles {
		a.setEligible(fr)
	}
	return nil
}

// Suppress stops offers to a framework for the given roles (all of its roles
// when none are given) until it revives them.
func (a *Allocator) Suppress(id string, roles []string) error {
	return a.setSuppressed(id, roles, true)
}

// Revive resumes offers for the given roles (all when none are given) and
// drops every filter the framework set, as Mesos's REVIVE does.
func (a *Allocator) Revive(id string, roles []string) error {
	return a.setSuppressed(id, roles, false)
}

func (a *Allocator) setSuppressed(id string, roles []string, suppressed bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	fw, ok := a.frameworks[id]
	if !ok || !fw.registered {
		return fmt.Errorf("framework %q: %w", id, ErrUnknownFramework)
	}
	var targets []*fwRole
	for _, name := range roles {
		var fr *fwRole
		if r, ok := a.roles[name]; ok {
			fr = fw.roleEntry(r)
		}
		if fr == nil || !fr.subscribed {
			return fmt.Errorf("framework %q is not subscribed to role %q: %w", id, name, ErrInvalid)
		}
		targets = append(targets, fr)
	}
	if len(roles) == 0 {
		for _, fr := range fw.roles {
			if fr.subscribed {
				targets = append(targets, fr)
			}
		}
	}
	for _, fr := range targets {
		fr.suppressed = suppressed
		a.setEligible(fr)
	}
	if !suppressed {
		a.clearFilters(fw)
	}
	return nil
}
