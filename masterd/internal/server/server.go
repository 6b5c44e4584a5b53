// Package server is masterd: the HTTP API in front of the Raft store, the
// forwarding of writes to the leader, and the leader-only loops.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/master"
	"github.com/allot/allot/masterd/internal/ratelimit"
	"github.com/allot/allot/masterd/internal/tlsutil"
	"github.com/allot/allot/raftstore"
)

// Config is masterd's configuration, from its flags.
type Config struct {
	ID       string
	DataDir  string
	HTTPAddr string
	RaftAddr string
	// Bootstrap makes a server with no state a one-member cluster.
	Bootstrap bool
	// Join lists servers to ask for membership when this one has no state.
	Join []string
	// Replace lets the join take over the id of a member that is at another
	// address and no longer answers the leader (see api.AddServerRequest).
	Replace bool
	// Dev runs a single in-memory server.
	Dev bool
	// TLS, when it names a certificate, makes the API HTTPS and Raft mutual
	// TLS (not in -dev, whose Raft is in memory).
	TLS tlsutil.Config

	// OperatorToken, when set, is a management token with principal
	// "operator" (and, with ACLs off, the one token every call needs).
	OperatorToken string
	// ACL turns access control on for this server (it is also on whenever
	// the replicated state says the cluster was bootstrapped).
	ACL bool
	// RateLimits seeds the configuration of a cluster this server bootstraps.
	RateLimits *api.RateLimitConfig

	AllocationInterval time.Duration
	OfferTimeout       time.Duration
	AgentPingTimeout   time.Duration
	// AgentRemovalTimeout is how long a disconnected agent's tasks stay
	// unreachable before they are gone.
	AgentRemovalTimeout time.Duration
	RecoveryAgentRatio  float64
	RecoveryTimeout     time.Duration
	// HeartbeatInterval is how often scheduler streams get a HEARTBEAT.
	HeartbeatInterval time.Duration

	// TestHooks enables PUT /v1/test/agents/{name}, which admits an agent
	// without a running agentd.
	TestHooks bool
	// SnapshotThreshold is how many log entries trigger a snapshot (0 = Raft's default).
	SnapshotThreshold uint64
	// SnapshotInterval is how often the threshold is checked (0 = Raft's default).
	SnapshotInterval time.Duration
	// RaftTiming sets Raft's timeouts (zero fields: raftstore.DefaultTiming).
	RaftTiming raftstore.Timing
	// RaftLogStore is the kind of Raft log in DataDir (raftstore.LogStoreBolt
	// when empty, or raftstore.LogStoreWAL).
	RaftLogStore string

	Logger hclog.Logger

	// limiterClock replaces the rate limiter's clock; tests set it so that
	// a flood through HTTP is served at exact instants.
	limiterClock ratelimit.Clock
	// httpTimeouts replaces defaultHTTPTimeouts where set (tests).
	httpTimeouts httpTimeouts
}

// Server is one masterd.
type Server struct {
	cfg      Config
	logger   hclog.Logger
	node     *raftstore.Node
	fsm      *raftstore.FSM
	listener net.Listener
	http     *http.Server
	metrics  *metrics
	live     liveState
	engine   *engine
	limiter  *ratelimit.Limiter
	apiAddr  string
	// clientTLS is what this server's calls to other servers go over (nil:
	// plaintext).
	clientTLS *tls.Config
	// acl is what the request path authenticates against (auth.go).
	acl aclStore
	// sessions are the open scheduler and agent streams and the tokens
	// that opened them (sessions.go).
	sessions sessions
	// public are the paths of the endpoints that need no token.
	public map[string]bool

	proxyMu sync.Mutex
	proxies map[string]*httputil.ReverseProxy

	// restoring is held while a backup is restored: one at a time.
	restoring sync.Mutex
	// termEnd is closed when the leadership term that started the
	// leader's background loops ends (onLeadership runs one call at a
	// time, so it needs no lock).
	termEnd chan struct{}

	stop chan struct{}
	bg   sync.WaitGroup
	// fatal carries an error that ends Serve, such as a refused join.
	fatal chan error
}

// New opens the Raft store and binds the HTTP listener; Serve starts serving.
func New(cfg Config) (*Server, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.New(&hclog.LoggerOptions{Name: "masterd"})
	}
	if cfg.Dev {
		if cfg.ID == "" {
			cfg.ID = "dev"
		}
		cfg.RaftAddr = "dev"
		cfg.Bootstrap = true
	}
	if cfg.HeartbeatInterval <= 0 {
		// What SUBSCRIBED announces must be what the stream keeps to.
		cfg.HeartbeatInterval = 15 * time.Second
	}
	if cfg.ID == "" {
		return nil, errors.New("-id is required (or -dev)")
	}
	if !cfg.Dev && (cfg.DataDir == "" || cfg.RaftAddr == "") {
		return nil, errors.New("-data-dir and -raft are required (or -dev)")
	}
	var tlsMaterial *tlsutil.Material
	if cfg.TLS.Enabled() {
		m, err := tlsutil.Load(cfg.TLS)
		if err != nil {
			return nil, err
		}
		if !cfg.Dev {
			if err := m.CheckServer(); err != nil {
				return nil, err
			}
		}
		tlsMaterial = m
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	scheme := "http://"
	var clientTLS *tls.Config
	if tlsMaterial != nil {
		ln = httpsListener{Listener: ln, config: tlsMaterial.HTTPSServer()}
		scheme, clientTLS = "https://", tlsMaterial.Client()
	}
	var stream *tlsutil.StreamLayer
	if tlsMaterial != nil && !cfg.Dev {
		if stream, err = tlsutil.NewStreamLayer(cfg.RaftAddr, tlsMaterial, logger.Named("raft-tls")); err != nil {
			ln.Close()
			return nil, err
		}
	}
	s := &Server{
		cfg:       cfg,
		logger:    logger,
		listener:  ln,
		apiAddr:   scheme + ln.Addr().String(),
		clientTLS: clientTLS,
		proxies:   map[string]*httputil.ReverseProxy{},
		stop:      make(chan struct{}),
		fatal:     make(chan error, 1),
	}
	node, err := raftstore.Open(raftstore.Config{
		ID:                cfg.ID,
		DataDir:           cfg.DataDir,
		RaftAddr:          cfg.RaftAddr,
		InMemory:          cfg.Dev,
		Logger:            logger,
		SnapshotThreshold: cfg.SnapshotThreshold,
		SnapshotInterval:  cfg.SnapshotInterval,
		Timing:            cfg.RaftTiming,
		LogStore:          cfg.RaftLogStore,
		OnLeadership:      s.onLeadership,
		StreamLayer:       streamLayer(stream),
	})
	if err != nil {
		if stream != nil {
			stream.Close()
		}
		ln.Close()
		return nil, err
	}
	s.node = node
	s.fsm = node.FSM()
	var limiterOpts []ratelimit.Option
	if cfg.limiterClock != nil {
		limiterOpts = append(limiterOpts, ratelimit.WithClock(cfg.limiterClock))
	}
	if s.limiter, err = ratelimit.New(ratelimit.Config{}, limiterOpts...); err != nil {
		node.Shutdown()
		ln.Close()
		return nil, err
	}
	s.metrics = newMetrics(s)
	s.engine = newEngine(raftStore{node}, master.Options{
		AllocationInterval:  cfg.AllocationInterval,
		OfferTimeout:        cfg.OfferTimeout,
		AgentPingTimeout:    cfg.AgentPingTimeout,
		AgentRemovalTimeout: cfg.AgentRemovalTimeout,
		RecoveryAgentRatio:  cfg.RecoveryAgentRatio,
		RecoveryTimeout:     cfg.RecoveryTimeout,
		HeartbeatInterval:   cfg.HeartbeatInterval,
		Logger:              logger.Named("master"),
		ObserveCycle:        func(d time.Duration) { s.metrics.cycles.Observe(d.Seconds()) },
	})
	s.live = s.engine
	s.fsm.OnApply(func(cmd raftstore.Command, res raftstore.Result) {
		s.refreshLimiter(cmd, res)
		s.refreshACL(cmd, res)
		s.engine.applied(cmd, res)
	})
	s.refreshLimiter(nil, raftstore.Result{}) // whatever Open already applied
	s.refreshACL(nil, raftstore.Result{})
	s.http = s.newHTTPServer(s.middleware(s.routes()))
	return s, nil
}

// APIAddress is the URL this server answers at.
func (s *Server) APIAddress() string { return s.apiAddr }

// Serve bootstraps or joins as configured and serves HTTP until Shutdown.
func (s *Server) Serve() error {
	fresh := !s.node.HasExistingState()
	switch {
	case !fresh:
		s.logger.Info("found existing raft state; -bootstrap and -join are not needed", "id", s.cfg.ID)
	case s.cfg.Bootstrap:
		if err := s.node.Bootstrap(); err != nil {
			return err
		}
	case len(s.cfg.Join) > 0:
		s.bg.Add(1)
		go s.join()
	default:
		s.logger.Warn("no raft state and neither -bootstrap nor -join: waiting to be added to a cluster")
	}
	err := s.http.Serve(jsonErrorListener{Listener: s.listener, index: s.appliedIndex})
	select {
	case ferr := <-s.fatal:
		return ferr
	default:
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// fail ends Serve with err.
func (s *Server) fail(err error) {
	select {
	case s.fatal <- err:
		s.http.Close()
	default:
	}
}

// Shutdown stops serving and leaves the Raft store closed but intact.
func (s *Server) Shutdown(ctx context.Context) error {
	close(s.stop)
	s.limiter.Close()
	// Ends every scheduler and agent stream, which http.Shutdown would
	// otherwise wait for.
	s.engine.close()
	herr := s.http.Shutdown(ctx)
	s.bg.Wait()
	nerr := s.node.Shutdown()
	return errors.Join(herr, nerr)
}

// join asks the servers in -join to add this one, each in turn, until one
// does. Every failed attempt is logged with the address and the error, a
// refusal (a conflict, a bad token) ends the server, and Shutdown interrupts
// an attempt at once.
func (s *Server) join() {
	defer s.bg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	self := api.AddServerRequest{ID: s.cfg.ID, RaftAddress: s.node.RaftAddress(), APIAddress: s.apiAddr, Replace: s.cfg.Replace}
	s.logger.Info("joining the cluster", "via", strings.Join(s.cfg.Join, ","), "replace", s.cfg.Replace)
	backoff := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		for _, addr := range s.cfg.Join {
			err := s.joinVia(ctx, addr, self)
			if err == nil {
				s.logger.Info("joined the cluster", "via", addr)
				return
			}
			if ctx.Err() != nil {
				return
			}
			if refused(err) {
				s.logger.Error("join refused", "via", addr, "error", err)
				s.fail(fmt.Errorf("join via %s: %w", addr, err))
				return
			}
			s.logger.Warn("join attempt failed; retrying", "via", addr, "attempt", attempt, "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// joinAttemptTimeout bounds one attempt, so that an address that swallows
// packets is reported and the next one tried.
const joinAttemptTimeout = 10 * time.Second

// joinVia makes one attempt through one server: the client's own retries
// would hide each failure behind a 30 s silence.
func (s *Server) joinVia(ctx context.Context, addr string, self api.AddServerRequest) error {
	client, err := api.NewClient([]string{addr}, s.cfg.OperatorToken)
	if err != nil {
		return err
	}
	client.RetryFor = 0
	if s.clientTLS != nil {
		client.SetTLS(s.clientTLS)
	}
	ctx, cancel := context.WithTimeout(ctx, joinAttemptTimeout)
	defer cancel()
	_, err = client.Do(ctx, api.Request{Method: http.MethodPost, Path: "/v1/cluster/servers", Body: self,
		Headers: http.Header{headerStoreVersion: {strconv.FormatUint(uint64(raftstore.StoreVersion), 10)}}}, nil)
	return err
}

// refused reports whether a join failed for a reason that retrying cannot
// fix: the request itself, the token, or a conflict with a member.
func refused(err error) bool {
	switch api.ErrorCode(err) {
	case api.CodeInvalidArgument, api.CodeUnauthenticated, api.CodePermissionDenied, api.CodeConflict, api.CodeNotFound:
		return true
	}
	return false
}

// onLeadership runs when this server starts or stops leading.
func (s *Server) onLeadership(leading bool) {
	s.metrics.setLeader(leading)
	if s.termEnd != nil {
		close(s.termEnd)
		s.termEnd = nil
	}
	if !leading {
		s.engine.stop()
		s.logger.Info("lost leadership")
		return
	}
	select {
	case <-s.stop:
		return // shutting down: Shutdown may already wait on s.bg
	default:
	}
	s.engine.lead()
	s.termEnd = make(chan struct{})
	s.bg.Add(2)
	go func() {
		defer s.bg.Done()
		s.registerSelf()
	}()
	go s.watchServerVersions(s.termEnd)
}

// registerSelf records this server's API address so followers can forward to
// it, and seeds the rate-limit configuration of a new cluster.
func (s *Server) registerSelf() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var (
		known, seed bool
		now         = time.Now().UTC()
	)
	s.fsm.Read(func(st *raftstore.State) {
		rec, ok := st.Server(s.cfg.ID)
		known = ok && rec.APIAddress == s.apiAddr && rec.RaftAddress == s.node.RaftAddress()
		_, hasDefault := st.RateLimitDefault()
		seed = s.cfg.RateLimits != nil && len(st.RateLimits()) == 0 && !hasDefault && len(st.Audit(0, 0)) == 0
	})
	if !known {
		cmd := &raftstore.ServerSet{WriteMeta: raftstore.WriteMeta{Time: now, Principal: "masterd"},
			ID: s.cfg.ID, RaftAddress: s.node.RaftAddress(), APIAddress: s.apiAddr}
		if _, err := s.node.Apply(ctx, cmd); err != nil {
			s.logger.Warn("record own API address", "error", err)
		}
	}
	if seed {
		cmd, e := rateLimitConfigCommand(*s.cfg.RateLimits)
		if e != nil {
			s.logger.Error("-rate-limits file rejected", "error", e)
			return
		}
		cmd.WriteMeta = raftstore.WriteMeta{Time: now, Principal: "masterd"}
		if res, err := s.node.Apply(ctx, cmd); err != nil || res.Err != nil {
			s.logger.Error("seed rate limits", "error", err, "rejected", res.Err)
		} else {
			s.logger.Info("seeded rate limits from -rate-limits", "principals", len(cmd.Limits))
		}
	}
}

func (s *Server) appliedIndex() uint64 {
	var idx uint64
	s.fsm.Read(func(st *raftstore.State) { idx = st.Index() })
	return idx
}

// leaderAPIAddress is the leader's API URL as recorded in the state.
func (s *Server) leaderAPIAddress() (string, bool) {
	id, _ := s.node.Leader()
	if id == "" {
		return "", false
	}
	var addr string
	s.fsm.Read(func(st *raftstore.State) {
		if rec, ok := st.Server(id); ok {
			addr = rec.APIAddress
		}
	})
	return addr, addr != ""
}

// forward passes the request to the leader, or answers no_leader when there
// is none to pass it to.
func (s *Server) forward(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(forwardedHeader) != "" {
		s.writeError(w, api.Errorf(api.CodeNoLeader, "leadership moved while the request was forwarded; retry"))
		return
	}
	addr, ok := s.leaderAPIAddress()
	if !ok {
		s.writeError(w, s.noLeader(w))
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go s.cancelOnLeaderChange(ctx, cancel)
	s.proxy(addr).ServeHTTP(w, r.WithContext(ctx))
}

// leaderWatchInterval is how often a forwarded request checks that the
// leader it went to is still this server's leader.
const leaderWatchInterval = 100 * time.Millisecond

// cancelOnLeaderChange cancels a forwarded request once this server stops
// following the leader it was sent to. A leader cut off by a partition
// never answers on a kept-alive connection whose packets are dropped, and
// nothing else would end the wait: this server's own Raft notices the loss
// within its heartbeat timeout, and the caller then gets its 503 no_leader
// (a write possibly applied, as any 503 to a write is) instead of a hang.
func (s *Server) cancelOnLeaderChange(ctx context.Context, cancel context.CancelFunc) {
	leader, _ := s.node.Leader()
	tick := time.NewTicker(leaderWatchInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if now, _ := s.node.Leader(); now != leader {
				cancel()
				return
			}
		}
	}
}

func (s *Server) proxy(addr string) *httputil.ReverseProxy {
	s.proxyMu.Lock()
	defer s.proxyMu.Unlock()
	if p, ok := s.proxies[addr]; ok {
		return p
	}
	target, _ := url.Parse(addr)
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.Out.Header.Set(forwardedHeader, s.cfg.ID)
		},
		Transport:     s.internalTransport(),
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				// cancelOnLeaderChange, or the caller gave up.
				s.writeError(w, api.Errorf(api.CodeNoLeader, "this server stopped following the leader at %s while the request was with it "+
					"(a partition or an election); retry: a write may or may not have been applied", addr))
				return
			}
			s.writeError(w, api.Errorf(api.CodeNoLeader, "leader at %s did not answer: %v; retry", addr, err))
		},
	}
	s.proxies[addr] = p
	return p
}
