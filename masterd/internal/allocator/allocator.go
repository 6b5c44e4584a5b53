// Package allocator decides which framework is offered which agent's
// resources. It is allot's counterpart of Mesos's hierarchical allocator:
// quota guarantees are served first and laid away as headroom, then weighted
// DRF shares out the rest, per role and then per framework, without letting any
// role or ancestor pass its quota limit; reserved resources go only to their
// role's subtree and count toward its quota. What agents' estimators report
// unused, and reservations left idle, are lent as revocable resources to the
// frameworks that take them.
//
// The package does no I/O and reads no clock: the leader feeds it events,
// calls Allocate once per allocation cycle with the current time and sends the
// offers it returns. Offered resources count as allocated until the leader
// hands them back with Recover (declined, rescinded, expired, or the unused
// part of an accepted offer) or moves them to running tasks with Launch, which
// in turn come back with Release when the tasks end.
//
// # Quota
//
// A role's consumption is what it and its descendants are allocated
// (offered or in use) plus their reservations nothing is allocated from. A
// role's limit caps that consumption; a cycle never offers past the limit of
// the role or any ancestor. A guarantee not yet met is owed from unreserved
// resources: a subtree needs the larger of its own unmet guarantee and the sum
// of what its children need, and the cluster needs the sum over top-level
// roles. That much of the unreserved resources free on connected agents is
// held back as headroom: an allocation that lowers what is owed (one to a role
// whose path has owed, unmet guarantee in excess of its children's needs)
// costs nothing against it, any other comes out of the surplus beyond it.
//
// # One cycle
//
// Agents with something allocatable free are visited in a shuffled order.
// Stage one serves only roles whose allocation lowers what guarantees are
// owed, and gives the kinds a guarantee names only up to what is owed.
// Stage two walks the role tree in weighted DRF order (siblings by dominant
// share of their subtree divided by weight, a role's own frameworks as one
// more sibling) and the frameworks of a role by dominant share, and offers
// each agent to the first framework that can take something and has not
// filtered the agent; what is left goes on to the next. An agent whose only
// free resources are idle reservations nobody eligible can take is passed
// over.
//
// Stage three offers revocable resources, after the first two so that it
// lends only what they left (seed option 1): the agents with something to
// lend are visited in a shuffled order of their own, and each one's usage
// slack goes, whole, to the first framework in the revocable DRF order that
// takes revocable resources and has not filtered the agent; then its
// lendable reservations go to the first such framework outside the lender's
// subtree, what is left to the next. The revocable DRF order is the same
// walk over revocable shares: the role tree by revocable subtree share and
// weight, a role's frameworks by revocable share, each list holding only
// what may take revocable resources. Slack and lent reservations are
// separate offers, both apart from the regular ones.
//
// # Revocable resources
//
// Two kinds are lent (see revocable.go): the usage slack an agent's
// estimator reports (throttleable; pieces with Role "*"), and what is
// reserved for a role and not allocated to its subtree (pieces with Role set
// to the lender), within the role's lending limit, a cap on what it lends
// across the cluster. Revocable allocations are kept in books of their own:
// they never count toward quota, guarantees, headroom or the regular shares,
// and lend what stays the lender's, so a lender is offered its reservation
// as if nothing were lent. When it takes it (or the slack falls, a limit is
// lowered, a reservation shrinks), Overlent reports what is lent beyond what
// can be, RescindRevocable picks the outstanding offers that cover it, and
// the agent evicts what tasks hold beyond; the books tolerate that until the
// tasks are released.
//
// Sorted orders are kept up to date as allocations change, by binary search
// and one copy per change; counters of eligible frameworks, guarantee excess
// and full limits per subtree let a walk skip what cannot take anything, the
// set of agents with free resources lets an idle cycle skip the cluster, and
// the set of agents with something to lend, with a count of frameworks
// taking revocable resources, lets the third stage skip itself.
package allocator

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/allot/allot/masterd/api"
)

// CapabilityRevocableResources is the framework capability that lets a
// framework receive revocable offers.
const CapabilityRevocableResources = "REVOCABLE_RESOURCES"

// Errors callers tell apart with errors.Is.
var (
	ErrUnknownAgent     = errors.New("unknown agent")
	ErrUnknownFramework = errors.New("unknown framework")
	ErrAlreadyExists    = errors.New("already exists")
	ErrInvalid          = errors.New("invalid argument")
	// ErrNotAllocated means resources were handed back that the allocator
	// does not hold for that framework, agent, role and reservation.
	ErrNotAllocated = errors.New("resources not allocated")
	// ErrInsufficient means resources reported in use do not fit the agent.
	ErrInsufficient = errors.New("not enough free resources on the agent")
)

// Options configure an Allocator.
type Options struct {
	// MinAllocatable lists resource sets of which an offer must hold at least
	// one; nil means Mesos's default, cpus 0.01 or mem 32. An empty, non-nil
	// list accepts any offer with something in it.
	MinAllocatable []api.Resources
	// Seed drives the order agents are visited in, which Mesos shuffles every
	// cycle so the same agents do not always go to the same frameworks. A fixed
	// seed replays a cycle exactly.
	Seed uint64
}

// DefaultMinAllocatable is used when Options.MinAllocatable is nil.
var DefaultMinAllocatable = []api.Resources{{"cpus": 0.01}, {"mem": 32}}

// Framework describes a subscribed framework.
type Framework struct {
	ID        string
	Principal string
	// Roles the framework receives offers for: "*" or role names.
	Roles []string
	// SuppressedRoles start suppressed (SUBSCRIBE's suppressed roles).
	SuppressedRoles []string
	Capabilities    []string
}

// Piece is one part of an offer or an allocation: resources from one pool.
type Piece struct {
	// Role is "*" for unreserved resources (and usage slack), else the role
	// of the reservation the resources come from: for a revocable piece, the
	// lender.
	Role      string
	Revocable bool
	// Throttleable marks revocable usage slack (an agent estimator's), as
	// against a lent reservation; see api.OfferResource.
	Throttleable bool
	// Resources of an offer's piece may be shared with other offers of the
	// same amount, in this cycle and later ones: read them, copy them to
	// change them.
	Resources api.Resources
}

// Offer bundles one agent's resources for one framework and one of its roles.
type Offer struct {
	FrameworkID string
	AgentID     string
	Hostname    string
	// Role is the role the resources are allocated to: they count toward its
	// shares and quota (revocable ones toward its revocable shares only).
	// Hand them back with the same role.
	Role   string
	Pieces []Piece
	// held is what a cycle took for a regular offer, so that RecoverOffer
	// hands it back without looking anything up; nil for revocable offers.
	held *heldOffer
}

// heldOffer is the allocation record each piece of a regular offer was
// added to, with its amount.
type heldOffer struct {
	ag     *agent
	fr     *fwRole
	pieces []heldPiece
}

type heldPiece struct {
	rec    *allocation
	pool   *role
	amount vec
}

// Allocator is safe for concurrent use; a cycle holds its lock throughout, so
// queries made meanwhile wait for the cycle to end.
type Allocator struct {
	mu sync.Mutex

	minAllocatable []vec // nil: any positive amount
	rng            *rand.Rand

	kindIDs   map[string]int
	kindNames []string

	root  *role
	roles map[string]*role
	// guaranteedRoles counts roles with a guarantee; while it is zero there
	// is no headroom to keep and the cycle skips that arithmetic.
	guaranteedRoles int

	agents     map[string]*agent
	frameworks map[string]*framework
	// Ranks of the frameworks' ids and the roles' names, which break ties
	// in DRF orders.
	frameworkRanks nameRanks[*framework]
	roleRanks      nameRanks[*role]
	slots          []*framework
	freeSlots      []int

	total    vec // every agent's total, the denominator of DRF shares
	invTotal []float64
	// freeUnreserved is the unreserved, unallocated resources of active
	// agents: what is available to satisfy unmet guarantees.
	freeUnreserved vec
	// freeAgents are the active agents with an allocatable amount free, so a
	// cycle with nothing to offer does not look at every agent.
	freeAgents []*agent
	// deferFree: the regular stages are running, in which agents only leave
	// freeAgents. Each leaves a hole (nil), counted in freeHoles, and the
	// holes are closed once the stages are done: moving the last agent
	// into the place of each that leaves would touch a random agent, cold
	// in the cache, at every grant.
	deferFree bool
	freeHoles int

	// eligible marks frameworks that may receive offers in at least one role.
	eligible      bitset
	eligibleCount int
	// revEligible marks those of them that take revocable resources; while
	// there are none the revocable stage is skipped.
	revEligible      bitset
	revEligibleCount int
	// revAgents are the active agents with something to lend (usage slack,
	// or an idle reservation of a role that may lend), so the revocable
	// stage does not look at every agent.
	revAgents []*agent
	// lendingAgents are the agents with revocable allocations, the only
	// ones Overlent needs to look at.
	lendingAgents []*agent

	filters     filterHeap
	sharesDirty bool

	// Records are allocated in slabs and reused once forgotten; see
	// newRecord.
	recordSlab  []allocation
	freeRecords []*allocation

	// Scratch space of the cycle, kept to avoid allocating per agent.
	cycle      uint64
	stamp      uint64
	candidates []*agent
	// reservedFree: the agent being served has free reservations someone
	// can take, which a role at its quota limit may still be offered.
	reservedFree bool
	revCands     []*agent
	// deferLendable: the revocable stage is serving an agent and refreshes
	// its place in revAgents when done.
	deferLendable bool
	pools         []draft
	npools        int
	revKind       offerKind
	spare         vec
	slackFree     vec
	candSlack     vec
	candLend      vec
	path          []*role
	rooms         []vec
	drafts        []draft
	ndrafts       int
	avail         vec
	sum           vec
	room          vec
	delta         vec
	out           offerBuilder
}

// New returns an empty allocator.
func New(opts Options) *Allocator {
	a := &Allocator{
		kindIDs:    map[string]int{},
		roles:      map[string]*role{},
		agents:     map[string]*agent{},
		frameworks: map[string]*framework{},
		rng:        rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),

		frameworkRanks: newFrameworkRanks(),
		roleRanks:      newRoleRanks(),
	}
	a.root = &role{weight: api.DefaultWeight}
	min := opts.MinAllocatable
	if min == nil {
		min = DefaultMinAllocatable
	}
	if len(min) > 0 {
		for i, set := range min {
			v, err := a.toVec(set, fmt.Sprintf("min allocatable %d", i))
			if err != nil {
				// A programming error in the caller's static options.
				panic(err)
			}
			a.minAllocatable = append(a.minAllocatable, v)
		}
	}
	return a
}

func validateRoleName(role string) error {
	if role == api.DefaultRole {
		return nil
	}
	if err := api.ValidateRole(role); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// validatePolicyRole checks a role that carries quota, weight or a
// reservation, which "*" cannot.
func validatePolicyRole(role string) error {
	if err := api.ValidateRole(role); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}
