package server

import (
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/ratelimit"
	"github.com/allot/allot/raftstore"
)

// limiterConfig turns the replicated rate-limit configuration into the
// limiter's, labeled limits included.
func limiterConfig(st *raftstore.State) ratelimit.Config {
	var cfg ratelimit.Config
	for _, l := range st.RateLimits() {
		cfg.Limits = append(cfg.Limits, ratelimit.Limit{Principal: l.Principal, Label: l.Label, QPS: l.QPS, Burst: l.Burst, Capacity: l.Capacity})
	}
	if d, ok := st.RateLimitDefault(); ok {
		cfg.Default = &ratelimit.Default{QPS: d.QPS, Burst: d.Burst, Capacity: d.Capacity}
	}
	return cfg
}

// refreshLimiter applies the replicated configuration to this server's
// limiter. Every server runs it as it applies a rate-limit change, so a change
// takes effect everywhere without dropping queued calls.
func (s *Server) refreshLimiter(cmd raftstore.Command, _ raftstore.Result) {
	if cmd != nil {
		switch cmd.Type() {
		case raftstore.RateLimitSetType, raftstore.RateLimitDeleteType, raftstore.RateLimitDefaultSetType,
			raftstore.RateLimitDefaultDeleteType, raftstore.RateLimitConfigReplaceType:
		default:
			return
		}
	}
	var cfg ratelimit.Config
	s.fsm.Read(func(st *raftstore.State) { cfg = limiterConfig(st) })
	if err := s.limiter.Update(cfg); err != nil && !errors.Is(err, ratelimit.ErrClosed) {
		// The FSM validated every value; a refusal here is a bug worth a loud log.
		s.logger.Error("apply rate-limit configuration", "error", err)
	}
}

// throttle makes the call wait its turn under its principal's limit, after
// its label's when the framework has a label with a limit of its own ("" for
// operator calls and frameworks without a label). It answers 429 and returns
// false when a queue is full.
func (s *Server) throttle(w http.ResponseWriter, r *http.Request, principal, label string) bool {
	err := s.limiter.Wait(r.Context(), principal, label)
	if err == nil {
		return true
	}
	var rejected *ratelimit.RejectedError
	switch {
	case errors.As(err, &rejected):
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(rejected.RetryAfter.Seconds())))))
		if rejected.Label != "" {
			s.writeError(w, api.Errorf(api.CodeRateLimited, "principal %s label %s is over its rate limit; retry after %s",
				api.EchoName(principal), api.EchoName(rejected.Label), rejected.RetryAfter))
			break
		}
		s.writeError(w, api.Errorf(api.CodeRateLimited, "principal %s is over its rate limit; retry after %s", principal, rejected.RetryAfter))
	case r.Context().Err() != nil:
		// The caller went away while queued; nobody reads an answer.
	default:
		s.writeError(w, api.Errorf(api.CodeNoLeader, "server is shutting down: %v", err))
	}
	return false
}

// servesLocally reports whether this server answers r itself rather than
// forwarding it to the leader.
func (s *Server) servesLocally(r *http.Request) bool {
	if s.node.IsLeader() {
		return true
	}
	switch r.URL.Path {
	case "/v1/health", "/v1/cluster", "/metrics":
		return true
	}
	stale, _ := boolQuery(r, "stale")
	return r.Method == http.MethodGet && stale
}
