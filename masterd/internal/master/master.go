// Package master is the leader's live state: the agents connected to it, the
// frameworks subscribed to it, their tasks and outstanding offers, and the
// allocation loop that turns the allocator's decisions into offers.
//
// None of it is replicated (as in Mesos): a new leader starts empty and learns
// tasks from agents re-registering and frameworks re-subscribing. What is
// replicated — the agent and framework registries, quotas, weights and
// reservations — reaches the Master through Applied and through the Store it
// reads.
//
// Concurrency: one mutex (m.mu) guards everything here; the allocator has its
// own, taken inside m.mu. An allocation cycle holds m.mu throughout, so Raft
// never waits for it: Applied only queues the applied command, and a follower
// goroutine follows it under m.mu. The follower takes m.mu, then tries the
// state's read lock and lets m.mu go rather than wait for it (others read the
// state and then take m.mu). Writes to Raft are made without m.mu held; the
// master's own writes wait for the follower to catch up before they go on.
package master

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"github.com/hashicorp/go-hclog"
	"strconv"
	"sync"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/allocator"
	"github.com/allot/allot/masterd/internal/ratelimit"
	"github.com/allot/allot/raftstore"
)

// Store is the replicated state as the master needs it.
type Store interface {
	// Read runs fn with the state read-locked.
	Read(fn func(st *raftstore.State))
	// TryRead runs fn with the state read-locked if that needs no wait
	// (no write holds or waits for the lock), and reports whether it did.
	TryRead(fn func(st *raftstore.State)) bool
	// Apply replicates cmd and returns once this server applied it.
	Apply(ctx context.Context, cmd raftstore.Command) (raftstore.Result, error)
}

// Options configure a Master. Zero values take the defaults of masterd's
// flags.
type Options struct {
	AllocationInterval time.Duration // -allocation-interval, 1s
	OfferTimeout       time.Duration // -offer-timeout, 30s
	AgentPingTimeout   time.Duration // -agent-ping-timeout, 15s
	// AgentRemovalTimeout is how long a disconnected agent's tasks stay
	// TASK_UNREACHABLE before they are TASK_GONE (-agent-removal-timeout, 10m).
	AgentRemovalTimeout time.Duration
	// RecoveryAgentRatio is -recovery-agent-ratio (0.8 in masterd); 0 sends
	// offers at once.
	RecoveryAgentRatio float64
	RecoveryTimeout    time.Duration // -recovery-timeout, 10m
	// HeartbeatInterval is how often frameworks get a HEARTBEAT event (15s).
	HeartbeatInterval time.Duration
	// DefaultRefuseSeconds filters an agent after a DECLINE or after the
	// unused part of an ACCEPT, when the call names no filter (5s, as Mesos).
	DefaultRefuseSeconds float64
	// ObserveCycle, if set, is told how long each allocation cycle took,
	// as Clock measures it.
	ObserveCycle func(time.Duration)
	Logger       hclog.Logger
	// Seed fixes the allocator's agent order (tests).
	Seed uint64
	// Clock is the time source of every timeout, interval and timestamp of
	// the term; nil is the machine's clock. Tests inject a fakeclock.Clock
	// so that timeouts pass when the test says, not after real waits.
	Clock ratelimit.Clock
}

func (o *Options) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.AllocationInterval, time.Second)
	def(&o.OfferTimeout, 30*time.Second)
	def(&o.AgentPingTimeout, 15*time.Second)
	def(&o.AgentRemovalTimeout, 10*time.Minute)
	def(&o.RecoveryTimeout, 10*time.Minute)
	def(&o.HeartbeatInterval, 15*time.Second)
	if o.DefaultRefuseSeconds <= 0 {
		o.DefaultRefuseSeconds = 5
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Clock == nil {
		o.Clock = ratelimit.RealClock{}
	}
}

// Master is one leadership term's live state. Start it when this server
// becomes leader and Close it when leadership is lost; a new term gets a new
// Master.
type Master struct {
	opts  Options
	store Store
	log   hclog.Logger
	clock ratelimit.Clock
	// idPrefix makes offer and stream ids of this term unique across
	// terms, so a framework cannot use an offer of an earlier leader.
	idPrefix string
	started  time.Time

	mu         sync.Mutex
	closed     bool
	alloc      *allocator.Allocator
	agents     map[string]*agent     // admitted agents, by id
	agentNames map[string]*agent     // the same, by name
	frameworks map[string]*framework // registered frameworks, by id
	offers     map[string]*offer
	byAgent    map[string][]*offer // nil until needed (see agentOffers)
	// offerFrameworks is sendOffers' and rescindAll's list of each offer's
	// framework, kept for the next tick rather than made for each.
	offerFrameworks []*framework
	completed       []*task // ended tasks, newest last
	nextID          uint64
	recovery        recovery
	// reservations is what the allocator was last told of each agent's
	// reservations, so that a change rescinds that agent's offers.
	reservations map[string]map[string]api.Resources
	// reservationAgents is the agent (name) each reservation is on, so that
	// a change syncs the agent it leaves as well as the one it is on.
	reservationAgents map[string]string
	// lendingLimits is each role's lending limit as last synced (absent:
	// none), for the tasks agents report after it was set.
	lendingLimits map[string]api.Resources

	// applied is what the FSM applied and the live state does not follow
	// yet (sync.go).
	applied appliedQueue

	// consumption is what Consumption answers while the loop calls the
	// allocator in bulk.
	consumption consumptionBefore

	// sessionWakes wakes the framework sessions of a burst (see pacer).
	sessionWakes *pacer[api.Event]

	kick      chan struct{}
	ticks     *ticker
	lastCycle time.Time // when the last allocation cycle ended (loop only)
	done      chan struct{}
	wg        sync.WaitGroup
}

// New builds the live state of a new leadership term from the replicated
// state and starts its loops.
func New(store Store, opts Options) *Master {
	opts.defaults()
	m := &Master{
		opts:              opts,
		store:             store,
		log:               opts.Logger,
		clock:             opts.Clock,
		idPrefix:          randomID(4),
		started:           opts.Clock.Now(),
		alloc:             allocator.New(allocator.Options{Seed: opts.Seed}),
		agents:            map[string]*agent{},
		agentNames:        map[string]*agent{},
		frameworks:        map[string]*framework{},
		offers:            map[string]*offer{},
		reservations:      map[string]map[string]api.Resources{},
		reservationAgents: map[string]string{},
		lendingLimits:     map[string]api.Resources{},
		sessionWakes:      newPacer[api.Event](),
		kick:              make(chan struct{}, 1),
		done:              make(chan struct{}),
	}
	m.applied.ready = make(chan struct{}, 1)
	m.applied.advanced = make(chan struct{})
	store.Read(func(st *raftstore.State) {
		m.mu.Lock()
		defer m.mu.Unlock()
		// What is applied from now on reaches Applied.
		m.applied.index = st.Index()
		m.syncAgents(st)
		for _, q := range st.Quotas() {
			m.syncQuota(st, q.Role)
		}
		for _, p := range st.RolePolicies() {
			m.syncRolePolicy(st, p.Role)
		}
		for _, f := range st.Frameworks() {
			m.recoverFramework(f, m.started)
		}
		m.startRecovery(st)
	})
	// Started here rather than in the loop, so that the first tick is one
	// interval after m.started whenever the loop's goroutine gets to run.
	m.ticks = newTicker(m.clock, opts.AllocationInterval)
	m.wg.Add(3)
	go m.loop()
	go m.follow()
	go func() {
		defer m.wg.Done()
		m.sessionWakes.run(m.done)
	}()
	return m
}

// Close ends the term: every stream is closed (frameworks and agents
// reconnect to the next leader) and the loops stop.
func (m *Master) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.applied.mu.Lock()
	m.applied.closed, m.applied.queue = true, nil
	m.applied.mu.Unlock()
	for _, fw := range m.frameworks {
		if fw.stream != nil {
			fw.stream.close()
		}
	}
	for _, ag := range m.agents {
		if ag.stream != nil {
			ag.stream.close()
		}
	}
	m.mu.Unlock()
	close(m.done)
	m.wg.Wait()
}

// trigger asks the loop for an allocation cycle soon.
func (m *Master) trigger() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// newID makes "kind-prefix-n": one per offer of a cycle, so cheaply.
func (m *Master) newID(kind string) string {
	m.nextID++
	var buf [48]byte // on the stack: the id is the one allocation
	b := append(append(append(append(buf[:0], kind...), '-'), m.idPrefix...), '-')
	return string(strconv.AppendUint(b, m.nextID, 10))
}

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	return hex.EncodeToString(b)
}
