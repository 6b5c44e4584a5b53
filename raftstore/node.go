package raftstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/allot/allot/masterd/api"
)

// ErrNotLeader means the write or read must go to the leader (or wait for one).
var ErrNotLeader = errors.New("this server is not the leader")

// ErrTransferring means this server is handing its leadership to another
// (TransferLeadership): the write was refused before Raft took it, so it
// was not applied and may be sent again to the new leader.
var ErrTransferring = fmt.Errorf("%w: it is handing its leadership to another server", ErrNotLeader)

// Config describes one Raft server.
type Config struct {
	ID string
	// DataDir holds the Raft log (raft.db, or wal/) and the snapshots.
	// Ignored when InMemory.
	DataDir string
	// LogStore is the kind of Raft log on disk: LogStoreBolt (the default
	// when empty) or LogStoreWAL; see logstore.go.
	LogStore string
	// Timing sets Raft's timeouts; zero fields take DefaultTiming's.
	Timing Timing
	// RaftAddr is the TCP address to listen on and advertise.
	RaftAddr string
	// InMemory keeps everything in memory (masterd -dev and tests).
	InMemory bool
	// Transport overrides the TCP transport (in-memory cluster tests).
	Transport raft.Transport
	// StreamLayer, when set, carries Raft instead of plain TCP (masterd's
	// mutual TLS); it listens already, RaftAddr is ignored, and the node
	// closes it.
	StreamLayer raft.StreamLayer
	Logger      hclog.Logger
	// SnapshotThreshold is how many log entries trigger a snapshot (0 = 8192).
	SnapshotThreshold uint64
	// SnapshotInterval is how often the threshold is checked (0 = 120 s).
	SnapshotInterval time.Duration
	// OnLeadership is called with true once this server leads and has applied
	// everything committed before it won (just before Ready turns true), and
	// with false when it stops leading.
	OnLeadership func(leading bool)
}

// Node is a Raft server with the allot FSM.
type Node struct {
	cfg       Config
	logger    hclog.Logger
	raft      *raft.Raft
	fsm       *FSM
	transport raft.Transport
	hasState  bool
	// disk notices a full data dir (nil in memory): see diskfull.go.
	disk    *diskGuard
	closers []func() error

	// ready is true while this server leads and has passed its first barrier
	// since winning: only then does its FSM reflect every acknowledged write.
	ready    atomic.Bool
	versions serverVersions
	// membership serializes stamping with joining: a write holds it (read
	// side) from computing the version it is stamped with until Raft has
	// its entry, a join (write side) from checking the joiner's version
	// until the configuration holds the joiner. So no write is stamped
	// with a version computed before a join that lowers it, and no server
	// joins below a version already stamped.
	membership sync.RWMutex
	hooks      testHooks
	notifyCh   chan bool
	// reassertCh asks monitorLeadership to start the leadership term
	// again (after a restore); it answers on the channel sent.
	reassertCh chan chan error
	stop       chan struct{}
	// reads lets concurrent linearizable reads share leadership checks.
	reads *readBatch

	// peers is the leader's view of its followers' heartbeats; observer
	// feeds it until peersStop, closed once Raft has stopped.
	peers     peerHealth
	observer  *raft.Observer
	peersStop chan struct{}

	// transferDone holds a channel, closed when it ends, while
	// TransferLeadership runs (nil otherwise): every write checks it, so
	// it is an atomic, not a lock.
	transferDone atomic.Pointer[chan struct{}]

	shutdownOnce sync.Once
	shutdownErr  error
	done         sync.WaitGroup
}

// soloTimeout is every Raft timeout of a server alone for good (-dev);
// applyTimeout bounds a write's wait for Raft.
const (
	soloTimeout  = 20 * time.Millisecond
	applyTimeout = 10 * time.Second
)

// maxAppendEntries is the most entries the leader writes to its log, and
// sends a follower, at once: under many concurrent writes, a bigger batch
// shares one fsync among more of them (hashicorp/raft's default is 64; its
// ceiling 1024).
const maxAppendEntries = 256

// networkTransportConfig is the Raft transport's configuration over a
// network (the TCP transport sets Stream itself).
//
// Pipelined replication is off (MaxRPCsInFlight 1): hashicorp/raft's
// pipeline deadlocks when a follower answers an append with a failure (its
// disk full, say) while a write is ready to send: the decoder stops, the
// next send waits for it for ever, and the leader replicates nothing more
// to that follower, while its heartbeats keep it from calling an election
// (hashicorp/raft#612; TestFullDisk caught it). Without the pipeline each
// append still carries every entry waiting, up to maxAppendEntries.
func networkTransportConfig(stream raft.StreamLayer, logger hclog.Logger) *raft.NetworkTransportConfig {
	return &raft.NetworkTransportConfig{
		Stream: stream, MaxPool: 3, Timeout: 10 * time.Second, Logger: logger.Named("transport"),
		MaxRPCsInFlight: 1,
	}
}

// Open starts the Raft server. It does not bootstrap: call Bootstrap.
func Open(cfg Config) (*Node, error) {
	if cfg.ID == "" {
		return nil, errors.New("raft: server id is required")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	n := &Node{cfg: cfg, logger: logger, notifyCh: make(chan bool, 16), reassertCh: make(chan chan error), stop: make(chan struct{})}
	n.reads = &readBatch{verify: n.verifyRound}
	n.fsm = NewFSM(logger.Named("fsm"))

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = logger.Named("raft")
	timing := cfg.Timing.orDefault()
	if err := timing.Check(); err != nil {
		return nil, err
	}
	rc.HeartbeatTimeout = timing.HeartbeatTimeout
	rc.ElectionTimeout = timing.ElectionTimeout
	rc.LeaderLeaseTimeout = timing.LeaderLeaseTimeout
	// Writes queue for the leader's loop in a buffered channel, which it
	// drains into one batch (one log append, one fsync) per round.
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = maxAppendEntries
	if cfg.InMemory && cfg.Transport == nil {
		// A server alone for good (masterd -dev): nobody to wait for, so
		// it elects itself at once instead of after a heartbeat timeout.
		rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = soloTimeout, soloTimeout, soloTimeout
	}
	rc.NotifyCh = n.notifyCh
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
		rc.TrailingLogs = min(rc.TrailingLogs, cfg.SnapshotThreshold)
	}
	if cfg.SnapshotInterval > 0 {
		rc.SnapshotInterval = cfg.SnapshotInterval
	}

	var (
		logs   raft.LogStore
		stable raft.StableStore
		snaps  raft.SnapshotStore
	)
	if cfg.InMemory {
		store := raft.NewInmemStore()
		logs, stable, snaps = store, store, raft.NewInmemSnapshotStore()
	} else {
		// A start refused for its flags leaves nothing in the data dir.
		kind, err := logStoreKind(cfg.LogStore)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("create data dir %s: %w", cfg.DataDir, err)
		}
		unlock, err := lockDataDir(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		n.closers = append(n.closers, unlock) // closed last
		// A damaged file is refused before Raft reads it (see verify.go).
		snapshotIndex, err := checkSnapshots(cfg.DataDir)
		if err != nil {
			n.close()
			return nil, err
		}
		store, err := openLogStore(cfg.DataDir, kind, snapshotIndex, logger)
		if err != nil {
			n.close()
			return nil, err
		}
		n.closers = append(n.closers, store.close)
		n.disk = newDiskGuard(cfg.DataDir, logger)
		cache, err := raft.NewLogCache(512, guardedLogStore{LogStore: store.logs, guard: n.disk})
		if err != nil {
			n.close()
			return nil, fmt.Errorf("log cache: %w", err)
		}
		logs, stable = cache, store.stable
		fileSnaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 2, logger.Named("snapshot"))
		if err != nil {
			n.close()
			return nil, fmt.Errorf("snapshot store in %s: %w", cfg.DataDir, err)
		}
		snaps = fileSnaps
	}

	hasState, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		n.close()
		return nil, fmt.Errorf("read raft state: %w", err)
	}
	n.hasState = hasState

	n.transport = cfg.Transport
	if n.transport == nil {
		switch {
		case cfg.InMemory:
			_, n.transport = raft.NewInmemTransport(raft.ServerAddress(cfg.RaftAddr))
		case cfg.StreamLayer != nil:
			network := raft.NewNetworkTransportWithConfig(networkTransportConfig(cfg.StreamLayer, logger))
			n.transport = network
			n.closers = append(n.closers, network.Close)
		default:
			addr, err := net.ResolveTCPAddr("tcp", cfg.RaftAddr)
			if err != nil {
				n.close()
				return nil, fmt.Errorf("raft address %s: %w", cfg.RaftAddr, err)
			}
			tcp, err := raft.NewTCPTransportWithConfig(cfg.RaftAddr, addr, networkTransportConfig(nil, logger))
			if err != nil {
				n.close()
				return nil, fmt.Errorf("listen on raft address %s: %w", cfg.RaftAddr, err)
			}
			n.transport = tcp
			n.closers = append(n.closers, tcp.Close)
		}
	}

	transport := n.transport
	if n.disk != nil {
		transport = guardedTransport{Transport: n.transport, guard: n.disk}
	}
	r, err := raft.NewRaft(rc, n.fsm, logs, stable, snaps, transport)
	if err != nil {
		n.close()
		return nil, fmt.Errorf("start raft: %w", err)
	}
	n.raft = r
	observations := make(chan raft.Observation, 64)
	n.observer = raft.NewObserver(observations, true, isPeerHealthObservation)
	n.peersStop = make(chan struct{})
	r.RegisterObserver(n.observer)
	n.done.Add(2)
	go n.watchPeers(observations, n.peersStop)
	go n.monitorLeadership()
	return n, nil
}

// HasExistingState reports whether the server found Raft state when it opened:
// such a server must neither bootstrap nor join again.
func (n *Node) HasExistingState() bool { return n.hasState }

// Bootstrap makes this server a one-member cluster, unless it has state.
func (n *Node) Bootstrap() error {
	if n.hasState {
		return nil
	}
	cfg := raft.Configuration{Servers: []raft.Server{{
		ID: raft.ServerID(n.cfg.ID), Address: n.transport.LocalAddr(), Suffrage: raft.Voter,
	}}}
	if err := n.raft.BootstrapCluster(cfg).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("bootstrap: %w", err)
	}
	return nil
}

// DiskFull reports whether this server failed to append to its Raft log for
// lack of space and its data dir has had no room since.
func (n *Node) DiskFull() bool { return n.disk.Full() }

// FSM returns the state machine, for reads.
func (n *Node) FSM() *FSM { return n.fsm }

// Raft exposes the raft instance for stats.
func (n *Node) Raft() *raft.Raft { return n.raft }

// ID is this server's id.
func (n *Node) ID() string { return n.cfg.ID }

// RaftAddress is the address other servers reach this one at.
func (n *Node) RaftAddress() string { return string(n.transport.LocalAddr()) }

// IsLeader reports whether this server leads (it may not be ready yet).
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Ready reports whether this server leads and has applied every committed write.
func (n *Node) Ready() bool { return n.ready.Load() && n.IsLeader() }

// Leader returns the current leader's id and Raft address, empty when unknown.
func (n *Node) Leader() (id, raftAddr string) {
	addr, lid := n.raft.LeaderWithID()
	return string(lid), string(addr)
}

// LastContact is when this server last heard from the leader.
func (n *Node) LastContact() time.Time { return n.raft.LastContact() }

// WaitReady waits until this server leads and is ready; it fails at once with
// ErrNotLeader on a follower.
func (n *Node) WaitReady(ctx context.Context) error {
	for {
		if !n.IsLeader() {
			return ErrNotLeader
		}
		if n.ready.Load() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for leader barrier: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// VerifyRead makes a linearizable read safe: this server is still the leader
// (a quorum confirms it) and has applied every write acknowledged before.
func (n *Node) VerifyRead(ctx context.Context) error {
	if err := n.WaitReady(ctx); err != nil {
		return err
	}
	return n.verifyLeadership(ctx)
}

// Apply proposes c and waits until it is committed and applied. A business
// rejection comes back as Result.Err; err is for failures to replicate. The
// command is stamped with the cluster's store version, and refused when its
// type, or its content, is newer than a server of the cluster can read.
func (n *Node) Apply(ctx context.Context, c Command) (Result, error) {
	f, e, err := n.propose(ctx, c)
	if e != nil {
		return Result{Err: e}, nil
	}
	if err != nil {
		return Result{}, err
	}
	if err := n.waitFuture(ctx, f); err != nil {
		if errors.Is(err, raft.ErrLeadershipTransferInProgress) {
			return Result{}, ErrTransferring
		}
		if notLeading(err) {
			return Result{}, fmt.Errorf("%w: %v", ErrNotLeader, err)
		}
		return Result{}, fmt.Errorf("apply %s: %w", c.Type(), err)
	}
	res, ok := f.Response().(Result)
	if !ok {
		return Result{}, fmt.Errorf("apply %s: unexpected response %T", c.Type(), f.Response())
	}
	return res, nil
}

// notLeading reports whether a Raft error says that this server is not,
// or no longer, the leader: the call may succeed on the one that is.
func notLeading(err error) bool {
	return errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
		errors.Is(err, raft.ErrLeadershipTransferInProgress) || errors.Is(err, raft.ErrRaftShutdown)
}

// CheckVersion refuses, as Apply does, a command the cluster's store
// version cannot take yet (its type, or its content, is newer than a server
// can read). A dry run asks it, so that it answers what the write would.
func (n *Node) CheckVersion(c Command) *api.Error {
	return refuseNewer(c, n.ClusterStoreVersion())
}

// propose judges c by the cluster's store version, stamps it and hands it
// to Raft, all while no join is under way (see Node.membership).
func (n *Node) propose(ctx context.Context, c Command) (raft.ApplyFuture, *api.Error, error) {
	if !n.membership.TryRLock() {
		if n.hooks.writeWaits != nil {
			n.hooks.writeWaits()
		}
		n.membership.RLock()
	}
	defer n.membership.RUnlock()
	version := n.ClusterStoreVersion()
	if e := refuseNewer(c, version); e != nil {
		return nil, e, nil
	}
	// Replicas no longer judge input: whoever proposes, it is judged here
	// (unless Check just did, by the same rules).
	if c.meta().validatedBy != version {
		if e := c.validate(version); e != nil {
			return nil, e, nil
		}
	}
	c.meta().Rules = 0 // version 1 entries carry no stamp, as before versions existed
	if version >= 2 {
		c.meta().Rules = version
	}
	data, err := Encode(c)
	if err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("apply %s: %w", c.Type(), err)
	}
	timeout := applyTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	return n.raft.Apply(data, timeout), nil, nil
}

// testHooks let the package's tests act at the points where a write and a
// join race; nil outside tests.
type testHooks struct {
	// afterJoinCheck runs in AddVoter once the joiner's version passed,
	// before the configuration changes.
	afterJoinCheck func()
	// writeWaits runs in Apply when the write must wait for a join.
	writeWaits func()
}

// ForgetServerVersions drops what was heard of other servers' versions: a
// new term asks again, and a server may have been downgraded meanwhile.
func (n *Node) ForgetServerVersions() {
	n.versions.mu.Lock()
	n.versions.heard = nil
	n.versions.mu.Unlock()
}

// SetServerVersion records the store version a server of the cluster runs.
func (n *Node) SetServerVersion(id string, version uint32) { n.versions.set(id, version) }

// ServerVersion is the store version a server runs, as last heard (1 when
// it has not been heard from).
func (n *Node) ServerVersion(id string) uint32 {
	if id == n.cfg.ID {
		return StoreVersion
	}
	return n.versions.get(id)
}

// ClusterStoreVersion is the store version writes are stamped with: the
// lowest among the servers of the Raft configuration, but never below a
// version already committed (RulesVersion).
func (n *Node) ClusterStoreVersion() uint32 {
	v := StoreVersion
	for _, srv := range n.raft.GetConfiguration().Configuration().Servers {
		v = min(v, n.ServerVersion(string(srv.ID)))
	}
	n.fsm.Read(func(s *State) { v = max(v, s.RulesVersion()) })
	return v
}

// Servers returns the Raft configuration.
func (n *Node) Servers() ([]raft.Server, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("raft configuration: %w", err)
	}
	return f.Configuration().Servers, nil
}

// AddVoter adds a voting server that runs store version version; adding
// one already present at the same address is a no-op. A server below the
// version writes are stamped with is refused with a *JoinVersionError:
// writes wait meanwhile, so none is stamped with a version the joiner
// cannot read (see Node.membership). A server that joined is taken to run
// the version it joined with until the leader's poll hears otherwise: a
// new cluster whose servers just joined takes writes of its version at
// once, not after the next poll (they were refused with 409 meanwhile).
func (n *Node) AddVoter(id, addr string, version uint32) error {
	n.membership.Lock()
	defer n.membership.Unlock()
	if cluster := n.ClusterStoreVersion(); version < cluster {
		return &JoinVersionError{ID: id, Version: version, Cluster: cluster}
	}
	if n.hooks.afterJoinCheck != nil {
		n.hooks.afterJoinCheck()
	}
	servers, err := n.Servers()
	if err != nil {
		return err
	}
	for _, s := range servers {
		if string(s.ID) == id && string(s.Address) == addr && s.Suffrage == raft.Voter {
			n.versions.set(id, version)
			return nil
		}
	}
	if err := n.waitFuture(context.Background(), n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, applyTimeout)); err != nil {
		if errors.Is(err, raft.ErrNotLeader) {
			return ErrNotLeader
		}
		return fmt.Errorf("add voter %s at %s: %w", id, addr, err)
	}
	n.versions.set(id, version)
	return nil
}

// RemoveServer removes a server from the Raft configuration.
func (n *Node) RemoveServer(id string) error {
	if err := n.waitFuture(context.Background(), n.raft.RemoveServer(raft.ServerID(id), 0, applyTimeout)); err != nil {
		if errors.Is(err, raft.ErrNotLeader) {
			return ErrNotLeader
		}
		return fmt.Errorf("remove server %s: %w", id, err)
	}
	return nil
}

// waitFuture waits for f, but not past ctx or this server's shutdown: Raft
// never answers a command future whose entry was committed but not yet
// applied when it shut down (hashicorp/raft#498), and neither Apply's callers
// nor Shutdown (which waits for the leader barrier) may hang on one.
func (n *Node) waitFuture(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-n.stop:
		return raft.ErrRaftShutdown
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Snapshot takes a snapshot now.
func (n *Node) Snapshot() error {
	if err := n.raft.Snapshot().Error(); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}

// leadershipTransferAttempts is how often TransferLeadership tries: a
// transfer fails when the chosen follower does not catch up within an
// election timeout (Consul's and Nomad's leadershipTransfer try 3 times).
const leadershipTransferAttempts = 3

// TransferLeadership hands the leadership to the most up-to-date follower
// and returns once that one leads, so that a leader that is about to stop
// leaves no gap of an election timeout in the cluster's writes. On a
// follower (or a server alone) it does nothing. Writes to this server fail
// with ErrNotLeader meanwhile (the client retries on the new leader).
func (n *Node) TransferLeadership(ctx context.Context) error {
	done := make(chan struct{})
	n.transferDone.Store(&done)
	defer func() {
		n.transferDone.Store(nil)
		close(done)
	}()
	var err error
	for attempt := 1; attempt <= leadershipTransferAttempts; attempt++ {
		if !n.IsLeader() {
			return nil
		}
		if servers, serr := n.Servers(); serr == nil && voters(servers) < 2 {
			return nil
		}
		err = n.waitFuture(ctx, n.raft.LeadershipTransfer())
		if err == nil {
			n.logger.Info("leadership transferred", "leader", n.leaderID(), "attempt", attempt)
			return nil
		}
		if ctx.Err() != nil || errors.Is(err, raft.ErrRaftShutdown) {
			break
		}
		n.logger.Warn("leadership transfer failed; retrying", "attempt", attempt, "of", leadershipTransferAttempts, "error", err)
	}
	return fmt.Errorf("transfer leadership: %w", err)
}

// Transferring reports whether TransferLeadership runs.
func (n *Node) Transferring() bool { return n.transferDone.Load() != nil }

// AwaitTransfer waits, when TransferLeadership runs, until it has ended and
// this server knows the leader (it hears of the new one with its first
// heartbeat), so that a request it holds meanwhile can be forwarded there
// instead of failing. It returns at once when no transfer runs, and when
// ctx ends.
func (n *Node) AwaitTransfer(ctx context.Context) {
	done := n.transferDone.Load()
	if done == nil {
		return
	}
	select {
	case <-*done:
	case <-ctx.Done():
		return
	case <-n.stop:
		return
	}
	for !n.IsLeader() && n.leaderID() == "" {
		select {
		case <-ctx.Done():
			return
		case <-n.stop:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (n *Node) leaderID() string {
	id, _ := n.Leader()
	return id
}

func voters(servers []raft.Server) int {
	count := 0
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			count++
		}
	}
	return count
}

// Shutdown stops the server and closes its stores.
// A second call waits for the first and returns its result.
func (n *Node) Shutdown() error {
	n.shutdownOnce.Do(func() {
		close(n.stop)
		n.shutdownErr = n.raft.Shutdown().Error()
		n.raft.DeregisterObserver(n.observer)
		close(n.peersStop)
		n.done.Wait()
		if cerr := n.close(); n.shutdownErr == nil {
			n.shutdownErr = cerr
		}
	})
	return n.shutdownErr
}

func (n *Node) close() error {
	var errs []error
	for i := len(n.closers) - 1; i >= 0; i-- {
		if err := n.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	n.closers = nil
	return errors.Join(errs...)
}

// monitorLeadership turns Raft's leadership notifications into OnLeadership
// calls, inserting a barrier after each win so the FSM has caught up before
// the server reads its state as the leader.
func (n *Node) monitorLeadership() {
	defer n.done.Done()
	var (
		stopLeading chan struct{}
		leading     sync.WaitGroup
	)
	revoke := func() {
		if stopLeading == nil {
			return
		}
		close(stopLeading)
		leading.Wait()
		stopLeading = nil
		if n.ready.Swap(false) && n.cfg.OnLeadership != nil {
			n.cfg.OnLeadership(false)
		}
	}
	lead := func() {
		stopLeading = make(chan struct{})
		leading.Add(1)
		go func(stop chan struct{}) {
			defer leading.Done()
			n.establish(stop)
		}(stopLeading)
	}
	for {
		select {
		case <-n.stop:
			revoke()
			return
		case isLeader := <-n.notifyCh:
			revoke()
			if isLeader {
				lead()
			}
		case done := <-n.reassertCh:
			// A term that ended meanwhile is not started again: the
			// notification that ended it is handled as usual.
			if stopLeading == nil || !n.IsLeader() {
				done <- ErrNotLeader
				continue
			}
			n.logger.Info("starting the leadership term again on the restored state")
			revoke()
			lead()
			done <- nil
		}
	}
}

func (n *Node) establish(stop chan struct{}) {
	for {
		err := n.waitFuture(context.Background(), n.raft.Barrier(applyTimeout))
		if err == nil {
			break
		}
		n.logger.Warn("leader barrier failed", "error", err)
		if !n.IsLeader() {
			return
		}
		select {
		case <-stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	// The callback runs before the server counts as ready, so that what it
	// sets up for the leader is in place before the first request uses it.
	if n.cfg.OnLeadership != nil {
		n.cfg.OnLeadership(true)
	}
	n.ready.Store(true)
	n.logger.Info("leading", "index", n.raft.AppliedIndex())
}
