package server

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/allot/allot/masterd/api"
)

// maxBodyBytes is the largest request body any endpoint accepts.
const maxBodyBytes = 1 << 20

// forwardedHeader marks a request a follower passed on to the leader, so that
// a request never travels twice when leadership moves mid-flight.
const forwardedHeader = "X-Allot-Forwarded-By"

func (s *Server) writeJSON(w http.ResponseWriter, status int, index uint64, v any) {
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
	s.writeJSON(w, e.HTTPStatus(), s.appliedIndex(), api.ErrorBody{Error: e})
}

// decodeBody decodes a JSON request body strictly: unknown fields, trailing
// data, an empty body and bodies over maxBodyBytes are refused.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) *api.Error {
	if r.ContentLength > maxBodyBytes {
		return api.Errorf(api.CodePayloadTooLarge, "request body is %d bytes, more than the %d allowed", r.ContentLength, maxBodyBytes)
	}
	body := http.MaxBytesReader(w, r.Body, maxBodyBytes)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return decodeError(err)
		}
		return api.Errorf(api.CodeInvalidArgument, "request body has data after the JSON object")
	}
	return nil
}

func decodeError(err error) *api.Error {
	var (
		tooLarge  *http.MaxBytesError
		syntax    *json.SyntaxError
		typeError *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &tooLarge):
		return api.Errorf(api.CodePayloadTooLarge, "request body is larger than the %d bytes allowed", maxBodyBytes)
	case errors.Is(err, io.EOF):
		return api.Errorf(api.CodeInvalidArgument, "request body is empty: a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return api.Errorf(api.CodeInvalidArgument, "request body ends in the middle of the JSON object")
	case errors.As(err, &syntax):
		return api.Errorf(api.CodeInvalidArgument, "request body is not valid JSON at byte %d: %v", syntax.Offset, err)
	case errors.As(err, &typeError):
		field := typeError.Field
		if field == "" {
			field = "request body"
		}
		return api.Errorf(api.CodeInvalidArgument, "%s: value %s is not a valid %s", field, typeError.Value, typeError.Type)
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field") {
		return api.Errorf(api.CodeInvalidArgument, "request body has an %s", strings.TrimPrefix(msg, "json: "))
	}
	return api.Errorf(api.CodeInvalidArgument, "request body: %s", strings.TrimPrefix(msg, "json: "))
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

func boolQuery(r *http.Request, name string) (bool, *api.Error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, api.Errorf(api.CodeInvalidArgument, "query parameter %s must be true or false, not %q", name, v)
	}
	return b, nil
}

// authenticate checks the operator token; it returns the caller's principal.
func (s *Server) authenticate(r *http.Request) (string, *api.Error) {
	if s.cfg.OperatorToken == "" {
		return "anonymous", nil
	}
	auth := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || token == "" {
		return "", api.Errorf(api.CodeUnauthenticated, "this server requires Authorization: Bearer <token>")
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.OperatorToken)) != 1 {
		return "", api.Errorf(api.CodeUnauthenticated, "the bearer token is not valid")
	}
	return "operator", nil
}

// statusRecorder remembers the status for metrics and logs.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
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
			s.writeError(rec, api.Errorf(api.CodeInvalidArgument, "path %q is not canonical (empty, . or .. segments)", p))
			return
		}
		if r.URL.Path != "/v1/health" {
			principal, e := s.authenticate(r)
			if e != nil {
				s.writeError(rec, e)
				return
			}
			r = r.WithContext(withPrincipal(r.Context(), principal))
			// A call waits its turn on the server that serves it, not on a
			// follower that only passes it on.
			if r.URL.Path != "/metrics" && !streamingPaths[r.URL.Path] && s.servesLocally(r) && !s.throttle(rec, r, principal) {
				return
			}
		}
		next.ServeHTTP(rec, r)
	})
}
