package server

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/allot/allot/masterd/api"
)

// forwardedHeader marks a request a follower passed on to the leader, so that
// a request never travels twice when leadership moves mid-flight.
const forwardedHeader = "X-Allot-Forwarded-By"

// unusedConnGrace is how long a connection may stay without its first
// request once the server shuts down before it is closed.
const unusedConnGrace = 200 * time.Millisecond

// closeUnusedConns makes srv's Shutdown close the connections on which no
// request has begun. net/http waits 5 s for such a connection before it
// counts it as idle (golang/go#22682), and clients leave them behind
// routinely: a transport that dialed for a request another connection then
// served keeps the new one in its pool. A follower's proxy does so when the
// forwarded request is cancelled because the leader changed, which is what
// happens when a leader hands its leadership over and stops: its Shutdown
// waited those 5 s. A connection that has been open for unusedConnGrace
// without a request is closed as an idle one is.
func closeUnusedConns(srv *http.Server) {
	var (
		mu     sync.Mutex
		unused = map[net.Conn]time.Time{}
	)
	prev := srv.ConnState
	srv.ConnState = func(c net.Conn, state http.ConnState) {
		mu.Lock()
		if state == http.StateNew {
			unused[c] = time.Now()
		} else {
			delete(unused, c)
		}
		mu.Unlock()
		if prev != nil {
			prev(c, state)
		}
	}
	srv.RegisterOnShutdown(func() {
		for {
			time.Sleep(unusedConnGrace / 4)
			mu.Lock()
			for c, since := range unused {
				if time.Since(since) >= unusedConnGrace {
					c.Close()
					delete(unused, c)
				}
			}
			left := len(unused)
			mu.Unlock()
			if left == 0 {
				return
			}
		}
	})
}

func (s *Server) writeJSON(w http.ResponseWriter, status int, index uint64, v any) {
	// A client that does not read its answer does not hold the connection.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.timeouts().write))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(api.HeaderIndex, strconv.FormatUint(index, 10))
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		s.logger.Debug("write answer", "error", err)
	}
}

func (s *Server) writeError(w http.ResponseWriter, e *api.Error) {
	if e.Code == api.CodeRateLimited && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", "1")
	}
	status := e.Status
	if status == 0 {
		status = e.HTTPStatus()
	}
	s.writeJSON(w, status, s.appliedIndex(), api.ErrorBody{Error: e})
}

// writeOptions reads If-Match / If-None-Match.
func writeOptions(r *http.Request) (ifMatch uint64, ifNoneMatch bool, e *api.Error) {
	if v := r.Header.Get("If-Match"); v != "" {
		n, err := strconv.ParseUint(strings.Trim(v, `"`), 10, 64)
		if err != nil || n == 0 {
			return 0, false, api.Errorf(api.CodeInvalidArgument, "If-Match must be an object version (a positive integer), not %q", v)
		}
		ifMatch = n
	}
	if v := r.Header.Get("If-None-Match"); v != "" {
		if v != "*" {
			return 0, false, api.Errorf(api.CodeInvalidArgument, "If-None-Match only accepts *, not %q", v)
		}
		ifNoneMatch = true
	}
	return ifMatch, ifNoneMatch, nil
}

// boolQuery reads a true/false parameter before the route's check ran (the
// middleware's); handlers use flag.
func boolQuery(r *http.Request, name string) (bool, *api.Error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	if problem := checkBool(v); problem != "" {
		return false, api.Errorf(api.CodeInvalidArgument, "query parameter %s: %s", name, problem)
	}
	return v == "true", nil
}

// statusRecorder remembers the status for metrics and logs, and closes the
// connection after an answer given before the request body was read.
type statusRecorder struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
	body        *trackedBody // nil when the request has no body
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wroteHeader && r.body != nil && !r.body.read.Load() {
		// Else net/http drains the rest of the body before it sends the
		// answer, and a client that stalls would never get it.
		r.Header().Set("Connection", "close")
	}
	r.wroteHeader = true
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(p []byte) (int, error) {
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
	return r.ResponseWriter.Write(p)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// middleware recovers panics (a 500 with a logged stack, never a crash),
// authenticates and records metrics.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		s.startRequest(rec)
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.logger.Error("panic in handler", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(p))
				s.writeError(rec, api.Errorf(api.CodeInternal, "internal error"))
			}
			s.metrics.observeRequest(r, rec.status, time.Since(start))
		}()
		// The mux would answer a non-canonical path with a redirect to another
		// object (eng//ml → eng/ml); a write must never land elsewhere.
		if p := r.URL.Path; p != "/" && path.Clean(p) != strings.TrimSuffix(p, "/") {
			s.writeError(rec, api.Errorf(api.CodeInvalidArgument, "path %q is not canonical (empty, . or .. segments)", api.EchoName(p)))
			return
		}
		if !s.isPublic(r) {
			c, e := s.authenticate(r)
			if e != nil {
				s.writeError(rec, e)
				return
			}
			r = r.WithContext(withCaller(r.Context(), c))
			// A call waits its turn on the server that serves it, not on a
			// follower that only passes it on.
			if c.id != nil && r.URL.Path != "/metrics" && !streamingPaths[r.URL.Path] && s.servesLocally(r) && !s.throttle(rec, r, c.id.Principal, "") {
				return
			}
		}
		defer s.endRequest(rec, r)
		next.ServeHTTP(rec, s.timedBody(rec, r))
	})
}
