package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/allot/allot/masterd/testcluster"
)

// The harness of TestOpenAPIDocumentMatchesServer: it finds the documented
// operation of a request by the server's own routing rules, checks the
// request against the document, sends it to a real masterd and checks the
// answer (status, headers, body, and every line of a stream).

// restOfPathExtension marks a path parameter that takes the rest of the path,
// slashes included (a role: /v1/quotas/eng/ml), as {role...} does in the
// server's route table.
const restOfPathExtension = "x-allot-rest-of-path"

// testHooksExtension marks a path served only by masterd -test-hooks.
const testHooksExtension = "x-allot-test-hooks"

// ndjson is the content type of the scheduler's and the agents' streams.
const ndjson = "application/x-ndjson"

func loadAPIDocument(t *testing.T) *openapi3.T {
	t.Helper()
	root, err := testcluster.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "docs", "api", "openapi.yaml")
	doc, err := openapi3.NewLoader().LoadFromFile(file)
	if err != nil {
		t.Fatalf("load %s: %v", file, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("%s is not a valid OpenAPI document: %v", file, err)
	}
	return doc
}

// docOperation is one documented method of one path.
type docOperation struct {
	method   string
	path     string // as documented: /v1/quotas/{role}
	pattern  string // as the server's route table writes it: /v1/quotas/{role...}
	item     *openapi3.PathItem
	op       *openapi3.Operation
	params   []string // path parameter names
	query    []string // query parameter names, sorted
	testHook bool
}

func (o docOperation) id() string { return o.method + " " + o.path }

// parameters are the operation's parameters, the path item's included.
func (o docOperation) parameters() []*openapi3.Parameter {
	var out []*openapi3.Parameter
	for _, p := range o.item.Parameters {
		out = append(out, p.Value)
	}
	for _, p := range o.op.Parameters {
		out = append(out, p.Value)
	}
	return out
}

var pathParamPattern = regexp.MustCompile(`\{([^}]+)\}`)

// documentedOperations lists every operation of the document, sorted.
func documentedOperations(t *testing.T, doc *openapi3.T) []docOperation {
	t.Helper()
	var out []docOperation
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			o := docOperation{method: method, path: path, item: item, op: op, query: []string{}}
			o.testHook, _ = item.Extensions[testHooksExtension].(bool)
			rest := map[string]bool{}
			for _, p := range o.parameters() {
				switch p.In {
				case openapi3.ParameterInQuery:
					o.query = append(o.query, p.Name)
				case openapi3.ParameterInPath:
					o.params = append(o.params, p.Name)
					rest[p.Name], _ = p.Extensions[restOfPathExtension].(bool)
				}
			}
			sort.Strings(o.query)
			o.pattern = pathParamPattern.ReplaceAllStringFunc(path, func(m string) string {
				if name := m[1 : len(m)-1]; rest[name] {
					return "{" + name + "...}"
				}
				return m
			})
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id() < out[j].id() })
	return out
}

// docRouter finds the documented operation of a request with an
// http.ServeMux, the router the server itself uses, so that a role's slashes
// and a non-canonical path are treated exactly as the server treats them.
type docRouter struct {
	doc *openapi3.T
	mux *http.ServeMux
}

type routeMatch struct {
	op     *docOperation
	params map[string]string
}

type routeMatchKey struct{}

func newDocRouter(doc *openapi3.T, ops []docOperation) *docRouter {
	r := &docRouter{doc: doc, mux: http.NewServeMux()}
	for i := range ops {
		op := &ops[i]
		r.mux.HandleFunc(op.method+" "+op.pattern, func(w http.ResponseWriter, req *http.Request) {
			m := req.Context().Value(routeMatchKey{}).(*routeMatch)
			m.op, m.params = op, map[string]string{}
			for _, name := range op.params {
				m.params[name] = req.PathValue(name)
			}
		})
	}
	return r
}

// find returns the operation that serves req, or nil when none does (an
// unknown path or method, a path the mux would redirect).
func (r *docRouter) find(req *http.Request) *routeMatch {
	m := &routeMatch{}
	r.mux.ServeHTTP(httptest.NewRecorder(), req.Clone(context.WithValue(req.Context(), routeMatchKey{}, m)))
	if m.op == nil {
		return nil
	}
	return m
}

func (r *docRouter) route(op *docOperation) *routers.Route {
	return &routers.Route{Spec: r.doc, Path: op.path, PathItem: op.item, Method: op.method, Operation: op.op}
}

// requestRule says what the document makes of a request.
type requestRule int

const (
	// docValid: the document accepts the request.
	docValid requestRule = iota
	// docInvalid: the document refuses the request too.
	docInvalid
	// docInWords: the request breaks a rule the document states in words
	// only (a duplicate key, a guarantee above its limit): no schema can
	// refuse it.
	docInWords
)

// exchange is one request and the answer it must get.
type exchange struct {
	method string
	path   string // with the query string
	body   string
	header map[string]string
	// noToken sends no Authorization header; token replaces the cluster's.
	noToken bool
	token   string
	// chunked sends the body without a Content-Length.
	chunked bool
	want    int
	request requestRule
	// unrouted names the components/responses answer of a request no
	// operation serves (NoSuchEndpoint, MethodNotAllowed, …).
	unrouted string
}

// answeredBeforeRouting are the components/responses answers a request gets
// before the server looks for its operation, whether it has one or not.
var answeredBeforeRouting = map[string]bool{"HeadersTooLarge": true, "MalformedRequest": true}

// answer is what the server answered; stream is set for a stream, whose
// body is left open.
type answer struct {
	status int
	header http.Header
	body   []byte
	resp   *http.Response
	cancel context.CancelFunc
	schema *openapi3.Schema // of one line of the stream
}

// decode decodes the answer's body into v.
func (a *answer) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("decode %s: %v", a.body, err)
	}
}

// apiHarness sends exchanges to one masterd and checks them against the
// document.
type apiHarness struct {
	t        *testing.T
	ctx      context.Context
	doc      *openapi3.T
	router   *docRouter
	base     string
	token    string
	client   *http.Client
	answered *coverage
}

// coverage records what each operation answered.
type coverage struct {
	mu       sync.Mutex
	statuses map[string]map[int]bool
}

// with is the harness reporting to t (a subtest), sharing its coverage.
func (h *apiHarness) with(t *testing.T) *apiHarness {
	c := *h
	c.t = t
	return &c
}

func newAPIHarness(t *testing.T, ctx context.Context, doc *openapi3.T, ops []docOperation, base, token string) *apiHarness {
	return &apiHarness{
		t: t, ctx: ctx, doc: doc, router: newDocRouter(doc, ops), base: base, token: token,
		// Redirects are answers to check, not to follow; streams last as
		// long as the test's context.
		client:   &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		answered: &coverage{statuses: map[string]map[int]bool{}},
	}
}

func (h *apiHarness) newRequest(ctx context.Context, ex exchange) *http.Request {
	h.t.Helper()
	var body io.Reader
	if ex.body != "" {
		body = strings.NewReader(ex.body)
	}
	req, err := http.NewRequestWithContext(ctx, ex.method, h.base+ex.path, body)
	if err != nil {
		h.t.Fatalf("%s %s: %v", ex.method, ex.path, err)
	}
	if ex.body != "" {
		req.Header.Set("Content-Type", "application/json")
		if ex.chunked {
			req.ContentLength = -1
			req.Body = io.NopCloser(strings.NewReader(ex.body))
			req.GetBody = nil
		}
	}
	switch {
	case ex.noToken:
	case ex.token != "":
		req.Header.Set("Authorization", "Bearer "+ex.token)
	default:
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	for k, v := range ex.header {
		req.Header.Set(k, v)
	}
	return req
}

// do sends ex and checks the request and the answer against the document;
// any disagreement fails the test. A stream comes back open: read it with
// openStream.
func (h *apiHarness) do(ex exchange) *answer {
	h.t.Helper()
	name := ex.method + " " + ex.path
	if len(name) > 120 {
		name = name[:120] + "…"
	}
	probe := h.newRequest(h.ctx, ex)
	var match *routeMatch
	if !answeredBeforeRouting[ex.unrouted] {
		match = h.router.find(probe)
	}
	switch {
	case match == nil && ex.unrouted == "":
		h.t.Fatalf("%s: the document has no operation for this request", name)
	case match != nil && ex.unrouted != "":
		h.t.Fatalf("%s: the document serves it with %s, not the %s answer", name, match.op.id(), ex.unrouted)
	case match != nil:
		h.checkRequest(name, probe, match, ex.request)
	}

	ctx, cancel := context.WithCancel(h.ctx)
	resp, err := h.client.Do(h.newRequest(ctx, ex))
	if err != nil {
		cancel()
		h.t.Fatalf("%s: %v", name, err)
	}
	a := &answer{status: resp.StatusCode, header: resp.Header}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == ndjson && resp.StatusCode == http.StatusOK {
		a.resp, a.cancel = resp, cancel
	} else {
		a.body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if err != nil {
			h.t.Fatalf("%s: read the answer: %v", name, err)
		}
	}
	if ex.want != 0 && a.status != ex.want { // 0: the caller judges the status
		h.t.Errorf("%s: answered %d, want %d: %s", name, a.status, ex.want, a.body)
	}
	if match == nil {
		h.checkUnroutedAnswer(name, probe, ex.unrouted, a)
		return a
	}
	h.record(match.op.id(), a.status)
	h.checkAnswer(name, probe, match, a)
	return a
}

func (h *apiHarness) record(op string, status int) {
	c := h.answered
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.statuses[op] == nil {
		c.statuses[op] = map[int]bool{}
	}
	c.statuses[op][status] = true
}

// checkRequest compares the document's verdict on req with the expected one.
func (h *apiHarness) checkRequest(name string, req *http.Request, m *routeMatch, rule requestRule) {
	h.t.Helper()
	err := h.validateRequest(req, m)
	switch {
	case rule == docValid && err != nil:
		h.t.Errorf("%s: the document refuses this request, which should be valid: %v", name, err)
	case rule == docInvalid && err == nil:
		h.t.Errorf("%s: the document accepts this request, which the server must refuse", name)
	}
}

// validateRequest applies the document to a request: kin-openapi's checks
// (security, parameters, body) and the query-string rules the document states
// (a parameter the operation does not list, or one given twice, is refused).
func (h *apiHarness) validateRequest(req *http.Request, m *routeMatch) error {
	for name, values := range req.URL.Query() {
		if !slices.Contains(m.op.query, name) {
			return fmt.Errorf("query parameter %q is not one of the operation's %v", name, m.op.query)
		}
		if len(values) > 1 {
			return fmt.Errorf("query parameter %q is given %d times", name, len(values))
		}
	}
	// ValidateRequest reads the body: give it a copy.
	clone := req.Clone(req.Context())
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return err
		}
		clone.Body = body
	}
	return openapi3filter.ValidateRequest(h.ctx, &openapi3filter.RequestValidationInput{
		Request:    clone,
		PathParams: m.params,
		Route:      h.router.route(m.op),
		Options:    &openapi3filter.Options{AuthenticationFunc: bearerPresent},
	})
}

// bearerPresent is the document's side of authentication: it can say that
// a bearer token is required, not which one is valid.
func bearerPresent(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	auth := in.RequestValidationInput.Request.Header.Get("Authorization")
	if token, ok := strings.CutPrefix(auth, "Bearer "); !ok || token == "" {
		return in.NewError(errors.New("no bearer token"))
	}
	return nil
}

// checkAnswer checks an answer against the operation's documented responses.
func (h *apiHarness) checkAnswer(name string, req *http.Request, m *routeMatch, a *answer) {
	h.t.Helper()
	responses := m.op.op.Responses
	ref := responses.Status(a.status)
	if ref == nil || ref.Value == nil {
		h.t.Errorf("%s: status %d is not documented for %s (body %s)", name, a.status, m.op.id(), a.body)
		return
	}
	if a.resp != nil {
		h.checkStreamHeaders(name, req, m, ref.Value, a)
		return
	}
	if err := h.validateResponse(req, h.router.route(m.op), a.status, ref.Value, a); err != nil {
		h.t.Errorf("%s: the answer does not match the document: %v\nstatus %d, headers %v\nbody %s", name, err, a.status, a.header, a.body)
	}
}

// checkUnroutedAnswer checks an answer no operation gives against the named
// components/responses entry.
func (h *apiHarness) checkUnroutedAnswer(name string, req *http.Request, response string, a *answer) {
	h.t.Helper()
	ref := h.doc.Components.Responses[response]
	if ref == nil || ref.Value == nil {
		h.t.Fatalf("%s: the document has no components/responses/%s", name, response)
	}
	route := &routers.Route{Spec: h.doc, Path: req.URL.Path, PathItem: &openapi3.PathItem{}, Method: req.Method, Operation: openapi3.NewOperation()}
	if err := h.validateResponse(req, route, a.status, ref.Value, a); err != nil {
		h.t.Errorf("%s: the answer does not match components/responses/%s: %v\nstatus %d, headers %v\nbody %s", name, response, err, a.status, a.header, a.body)
	}
}

// validateResponse checks status, headers and body against one documented
// response. kin-openapi skips redirects entirely (and some answers are not
// tied to an operation), so the response is checked as the only one of an
// operation, under status 200 for a redirect; the status itself was matched
// before.
func (h *apiHarness) validateResponse(req *http.Request, route *routers.Route, status int, resp *openapi3.Response, a *answer) error {
	checked := status
	if status >= 300 && status < 400 {
		checked = http.StatusOK
	}
	op := *route.Operation
	op.Responses = openapi3.NewResponses(openapi3.WithStatus(checked, &openapi3.ResponseRef{Value: resp}))
	single := *route
	single.Operation = &op
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, Route: &single},
		Status:                 checked,
		Header:                 a.header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	}
	in.SetBodyBytes(a.body)
	if len(resp.Content) == 0 && len(a.body) > 0 {
		return fmt.Errorf("the document describes no body, the server sent %q", a.body)
	}
	return openapi3filter.ValidateResponse(h.ctx, in)
}

// checkStreamHeaders checks a stream's status and headers and finds the
// schema of its lines.
func (h *apiHarness) checkStreamHeaders(name string, req *http.Request, m *routeMatch, resp *openapi3.Response, a *answer) {
	h.t.Helper()
	mt := resp.Content.Get(a.header.Get("Content-Type"))
	if mt == nil || mt.Schema == nil || mt.Schema.Value == nil {
		h.t.Fatalf("%s: the document has no schema for a %s answer with status %d", name, a.header.Get("Content-Type"), a.status)
	}
	a.schema = mt.Schema.Value
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, Route: h.router.route(m.op)},
		Status:                 a.status,
		Header:                 a.header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, ExcludeResponseBody: true},
	}
	if err := openapi3filter.ValidateResponse(h.ctx, in); err != nil {
		h.t.Errorf("%s: the stream's headers do not match the document: %v (headers %v)", name, err, a.header)
	}
}

// eventStream reads a stream's lines, checks each against the document and
// hands them over decoded as E.
type eventStream[E any] struct {
	t      *testing.T
	name   string
	id     string
	events chan E
	done   chan struct{}
	cancel context.CancelFunc

	mu    sync.Mutex
	errs  []string
	types map[string]int
}

// openStream starts reading the stream of a; close it before the test ends.
func openStream[E any](t *testing.T, name string, a *answer) *eventStream[E] {
	t.Helper()
	if a.resp == nil {
		t.Fatalf("%s: answered %d, not a stream: %s", name, a.status, a.body)
	}
	s := &eventStream[E]{t: t, name: name, id: a.header.Get("Allot-Stream-Id"), events: make(chan E, 1024),
		done: make(chan struct{}), cancel: a.cancel, types: map[string]int{}}
	go s.read(a.resp.Body, a.schema)
	return s
}

func (s *eventStream[E]) read(body io.ReadCloser, schema *openapi3.Schema) {
	defer close(s.done)
	defer close(s.events)
	defer body.Close()
	lines := bufio.NewScanner(body)
	lines.Buffer(make([]byte, 64<<10), 4<<20)
	for lines.Scan() {
		line := lines.Bytes()
		var generic any
		if err := json.Unmarshal(line, &generic); err != nil {
			s.fail("line %q is not JSON: %v", line, err)
			continue
		}
		if err := schema.VisitJSON(generic, openapi3.VisitAsResponse()); err != nil {
			s.fail("line %s does not match the document: %v", line, err)
		}
		var typed struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(line, &typed)
		s.mu.Lock()
		s.types[typed.Type]++
		s.mu.Unlock()
		var e E
		if err := json.Unmarshal(line, &e); err != nil {
			s.fail("line %s: %v", line, err)
			continue
		}
		s.events <- e
	}
}

func (s *eventStream[E]) fail(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, fmt.Sprintf(format, args...))
}

// next waits for the first event that satisfies want, skipping others.
func (s *eventStream[E]) next(ctx context.Context, what string, want func(E) bool) E {
	s.t.Helper()
	for {
		select {
		case e, ok := <-s.events:
			if !ok {
				s.t.Fatalf("%s: the stream ended while waiting for %s", s.name, what)
			}
			if want(e) {
				return e
			}
		case <-ctx.Done():
			s.t.Fatalf("%s: no %s: %v", s.name, what, ctx.Err())
		}
	}
}

// ended waits until the server ends the stream.
func (s *eventStream[E]) ended(ctx context.Context) {
	s.t.Helper()
	select {
	case <-s.done:
	case <-ctx.Done():
		s.t.Fatalf("%s: the stream did not end: %v", s.name, ctx.Err())
	}
}

// seen counts the lines of each type read so far.
func (s *eventStream[E]) seen() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.types)
}

// close ends the stream and reports every line that broke the document.
func (s *eventStream[E]) close() {
	s.t.Helper()
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.errs {
		s.t.Errorf("%s: %s", s.name, e)
	}
}

// jsonBody marshals v for an exchange's body.
func jsonBody(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// versionOf reads the "version" of an answer's object.
func versionOf(t *testing.T, a *answer) string {
	t.Helper()
	var obj struct {
		Version uint64 `json:"version"`
	}
	a.decode(t, &obj)
	return strconv.FormatUint(obj.Version, 10)
}

// errorCode reads the code of an error answer.
func errorCode(t *testing.T, a *answer) string {
	t.Helper()
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(a.body, &e); err != nil {
		t.Fatalf("decode error %s: %v", a.body, err)
	}
	return e.Error.Code
}

// bigBody is a JSON object of more than n bytes.
func bigBody(n int) string {
	return `{"limits":{"cpus":1},"padding":"` + string(bytes.Repeat([]byte("x"), n)) + `"}`
}
