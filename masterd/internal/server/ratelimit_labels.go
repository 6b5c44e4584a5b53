package server

import (
	"net/http"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

// Labeled rate limits: /v1/ratelimits/{principal}/labels/{label} throttles
// only the principal's frameworks with that label; the principal's own limit
// (or the aggregate default) still caps them with its other frameworks. The
// endpoints behave as the principal's: the same validation, If-Match,
// If-None-Match, dry runs and effects.

// labeledRateLimitKey reads and validates the path's principal and label.
func labeledRateLimitKey(r *http.Request) (principal, label string, e *api.Error) {
	principal, label = r.PathValue("principal"), r.PathValue("label")
	if e := validName("principal", principal); e != nil {
		return "", "", e
	}
	if e := validName("label", label); e != nil {
		return "", "", e
	}
	return principal, label, nil
}

func (s *Server) getLabeledRateLimit(w http.ResponseWriter, r *http.Request) {
	principal, label, e := labeledRateLimitKey(r)
	if e != nil {
		s.writeError(w, e)
		return
	}
	s.read(w, r, func(st *raftstore.State) (any, *api.Error) {
		l, ok := st.LabeledRateLimit(principal, label)
		if !ok {
			return nil, api.Errorf(api.CodeNotFound, "principal %s has no rate limit for label %s", principal, label)
		}
		return l, nil
	})
}

func (s *Server) putLabeledRateLimit(w http.ResponseWriter, r *http.Request) {
	principal, label, e := labeledRateLimitKey(r)
	if e != nil {
		s.writeError(w, e)
		return
	}
	var req api.RateLimitRequest
	if e := decodeBody(w, r, &req); e != nil {
		s.writeError(w, e)
		return
	}
	qps, burst, capacity := raftstore.FillRateLimitDefaults(req.QPS, req.Burst, req.Capacity)
	s.commit(w, r, &raftstore.RateLimitSet{Principal: principal, Label: label, QPS: qps, Burst: burst, Capacity: capacity})
}

func (s *Server) deleteLabeledRateLimit(w http.ResponseWriter, r *http.Request) {
	principal, label, e := labeledRateLimitKey(r)
	if e != nil {
		s.writeError(w, e)
		return
	}
	s.commit(w, r, &raftstore.RateLimitDelete{Principal: principal, Label: label})
}
