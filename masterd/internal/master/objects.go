package master

import (
	"slices"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/allocator"
)

// agent is an admitted agent and its session with this leader, if any.
type agent struct {
	id, name, hostname string
	resources          api.Resources
	capabilities       []string

	stream *Stream[api.AgentEvent] // nil: not connected to this leader
	// reregistered is set once the agent registered with this leader; until
	// then its tasks are unknown here and it gets no offers.
	reregistered   bool
	lastSeen       time.Time
	disconnectedAt time.Time // zero while connected or never seen

	tasks     map[taskKey]*task
	executors map[execKey]*executor
	// goneTasks were declared TASK_GONE when the agent stayed away; if it
	// comes back with them they are killed, not handed back.
	goneTasks map[taskKey]bool
}

func (a *agent) connected() bool { return a.stream != nil }

func (a *agent) hasCapability(c string) bool { return slices.Contains(a.capabilities, c) }

// framework is a registered framework and its session, if any.
type framework struct {
	info   api.FrameworkInfo
	stream *Stream[api.Event] // nil: disconnected
	// failoverDeadline is when a disconnected framework is removed.
	failoverDeadline time.Time
	removing         bool
	suppressed       map[string]bool // roles

	tasks map[string]*task // by task id
	// batch collects a cycle's offers for one OFFERS event.
	batch []api.Offer
	// burst counts the offers sendOffers or rescindAll is about to send
	// it, so that the batch or the stream's queue is sized once. A count
	// here rather than in a map: ten thousand map operations a tick would
	// cost more than the growth saved.
	burst int
}

func (f *framework) connected() bool { return f.stream != nil }

// setSuppressed records SUPPRESS and REVIVE; no roles means all of them.
func (f *framework) setSuppressed(roles []string, suppressed bool) {
	if len(roles) == 0 {
		roles = f.info.Roles
	}
	for _, r := range roles {
		if suppressed {
			f.suppressed[r] = true
		} else {
			delete(f.suppressed, r)
		}
	}
}

// send delivers e if the framework is connected. Events for a disconnected
// framework are dropped: status updates come again from the agent until
// acknowledged, and offers are not made to it.
func (f *framework) send(e api.Event) {
	if f.stream != nil {
		f.stream.send(e)
	}
}

type taskKey struct{ framework, task string }

type execKey struct{ framework, executor string }

// task is a task this leader knows, launched through it or reported by its
// agent.
type task struct {
	frameworkID string
	agentID     string
	role        string
	executorID  string
	info        api.TaskInfo
	allocation  []allocator.Piece
	status      api.TaskStatus
	// released is set once the task's resources went back to the
	// allocator (it ended or its agent was removed).
	released bool
	// killRequested: a kill waits for the agent to register again.
	killRequested bool
	// launched is when this leader launched or adopted the task: lowering
	// a lending limit evicts the youngest first.
	launched time.Time
	// preempted, when set, is why the master had the task killed; the
	// agent's TASK_KILLED goes to the framework with it (and
	// REASON_CONTAINER_PREEMPTED) in place of the agent's own.
	preempted string
}

func (t *task) key() taskKey { return taskKey{t.frameworkID, t.info.TaskID} }

func (t *task) view() api.Task {
	return api.Task{
		TaskID: t.info.TaskID, FrameworkID: t.frameworkID, AgentID: t.agentID, Name: t.info.Name,
		Role: t.role, State: t.status.State, Reason: t.status.Reason, Message: t.status.Message,
		Resources: t.info.Resources, Limits: t.info.Limits, Revocable: isRevocable(t.allocation),
	}
}

// executor is a task group's executor; its resources are held until its last
// task ends.
type executor struct {
	frameworkID string
	agentID     string
	id          string
	role        string
	allocation  []allocator.Piece
	tasks       int // tasks not yet terminal
}

// offer is an outstanding offer.
type offer struct {
	id      string
	seq     uint64           // order of making
	alloc   *allocator.Offer // in the array the cycle's allocator returned
	expires time.Time
}

func (o *offer) view() api.Offer {
	return o.viewIn(make([]api.OfferResource, 0, len(o.alloc.Pieces)))
}

// viewIn is view with its resources appended to rs: the offers of a cycle
// share one array (see sendOffers).
func (o *offer) viewIn(rs []api.OfferResource) api.Offer {
	return api.Offer{ID: o.id, FrameworkID: o.alloc.FrameworkID, AgentID: o.alloc.AgentID,
		Hostname: o.alloc.Hostname, Resources: appendOfferResources(rs, o.alloc.Pieces)}
}

func toOfferResources(pieces []allocator.Piece) []api.OfferResource {
	return appendOfferResources(make([]api.OfferResource, 0, len(pieces)), pieces)
}

func appendOfferResources(out []api.OfferResource, pieces []allocator.Piece) []api.OfferResource {
	for _, p := range pieces {
		out = append(out, api.OfferResource{Role: p.Role, Revocable: p.Revocable, Throttleable: p.Throttleable, Scalars: p.Resources})
	}
	return out
}

func fromOfferResources(rs []api.OfferResource) []allocator.Piece {
	out := make([]allocator.Piece, 0, len(rs))
	for _, r := range rs {
		out = append(out, allocator.Piece{Role: r.Role, Revocable: r.Revocable, Throttleable: r.Throttleable, Resources: r.Scalars})
	}
	return out
}

func isRevocable(pieces []allocator.Piece) bool {
	for _, p := range pieces {
		if p.Revocable {
			return true
		}
	}
	return false
}

func sumPieces(pieces []allocator.Piece) api.Resources {
	total := api.Resources{}
	for _, p := range pieces {
		total.Add(p.Resources)
	}
	return total
}
