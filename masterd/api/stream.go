package api

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The scheduler API and the agent protocol share one shape: a POST that opens
// a session answers a stream of JSON events, one per line, and every later
// call is its own POST to the server holding that stream. This file holds
// what both clients share: opening the stream (following the 307 of a
// follower, riding out elections), reading it, and sending calls on it.

// StreamContentType is the media type of an event stream.
const StreamContentType = "application/x-ndjson"

// Why a session's event stream ended (see Err of the sessions).
var (
	// ErrStreamEnded: the server closed the stream (leadership moved, the
	// server stopped, or it dropped the session).
	ErrStreamEnded = errors.New("event stream ended by the server")
	// ErrSessionClosed: the caller closed the session.
	ErrSessionClosed = errors.New("session closed")
	// ErrStreamIdle: nothing arrived on the stream for longer than allowed,
	// so the client gave the connection up as broken.
	ErrStreamIdle = errors.New("event stream idle")
)

const (
	// maxRedirects bounds the 307 hops of one attempt: more means the
	// servers disagree about the leader, which an election settles.
	maxRedirects = 5
	// defaultOpenTimeout bounds how long a server may take to answer an
	// opening request with headers: a paused server accepts connections and
	// never answers, and the client must move on to the next address.
	defaultOpenTimeout = 15 * time.Second
	// Backoff between rounds over every address while no server can take the
	// session (no leader, all unreachable).
	minOpenBackoff = 50 * time.Millisecond
	maxOpenBackoff = time.Second
	// maxErrorBody bounds how much of an error answer is read.
	maxErrorBody = 1 << 20
	// detailRetryAfter is where a 429's Retry-After lands in Error.Details.
	detailRetryAfter = "retry_after_seconds"
)

var errOpenTimeout = errors.New("no answer in time")

// streamHTTP sends the requests of both protocols. It follows no redirect by
// itself: the opener follows 307s so that it knows which server holds the
// stream and can bound the hops; and it has no overall timeout, since a
// stream lasts as long as its session.
var streamHTTP = &http.Client{
	Transport: func() *http.Transport {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Simulated agents keep many sessions open to the same servers.
		t.MaxIdleConnsPerHost = 64
		return t
	}(),
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// streamClient opens sessions on a masterd cluster and sends their calls.
type streamClient struct {
	addresses   []string
	token       string
	http        *http.Client
	openTimeout time.Duration
	// retrying, when set, hears why an opening round failed, once per
	// round of failing rounds that doubles (1st, 2nd, 4th, 8th …): a client
	// that cannot reach any server says so without flooding its log.
	retrying func(rounds int, err error)

	mu sync.Mutex
	// next is the address an opening round starts with; it moves past
	// servers that failed.
	next int
	// preferred is the base URL of the server that held the last stream (the
	// leader then); the next session tries it first.
	preferred string
}

func newStreamClient(addresses []string, token string) (*streamClient, error) {
	// NewClient validates and normalises the addresses the same way for
	// every client of the cluster.
	base, err := NewClient(addresses, token)
	if err != nil {
		return nil, err
	}
	return &streamClient{
		addresses:   base.addresses,
		token:       base.token,
		http:        streamHTTP,
		openTimeout: defaultOpenTimeout,
	}, nil
}

// openedStream is the answer to a session-opening request: the stream's body
// and where it came from.
type openedStream struct {
	url    string // the URL that answered 200; later calls go there
	base   string // that server's base URL
	id     string // Allot-Stream-Id
	body   io.ReadCloser
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// open POSTs call to path until a server answers with a stream. It follows
// 307s to the leader and retries unreachable servers and 503s on the other
// addresses with backoff until ctx ends; any other error answer is returned
// as an *Error. The stream lives until ctx ends or it is cancelled.
func (c *streamClient) open(ctx context.Context, path string, call any) (*openedStream, error) {
	body, err := json.Marshal(call)
	if err != nil {
		return nil, fmt.Errorf("encode %s call: %w", path, err)
	}
	backoff := minOpenBackoff
	var lastErr error
	for rounds := 0; ; rounds++ {
		if rounds > 0 && c.retrying != nil && rounds&(rounds-1) == 0 {
			c.retrying(rounds, lastErr)
		}
		for _, base := range c.targets() {
			s, retry, err := c.openAt(ctx, base, path, body)
			if err == nil {
				c.mu.Lock()
				c.preferred = s.base
				c.mu.Unlock()
				return s, nil
			}
			if ctx.Err() != nil {
				// Say what kept the session from opening, not only that
				// time ran out.
				return nil, giveUp(ctx, path, cmp.Or(lastErr, err))
			}
			if !retry {
				return nil, err
			}
			lastErr = err
			c.passOver(base)
		}
		select {
		case <-ctx.Done():
			return nil, giveUp(ctx, path, lastErr)
		case <-time.After(jittered(backoff)):
		}
		backoff = min(2*backoff, maxOpenBackoff)
	}
}

func giveUp(ctx context.Context, path string, lastErr error) error {
	return fmt.Errorf("open %s: %w (last error: %v)", path, ctx.Err(), lastErr)
}

// targets lists the base URLs of one opening round: the server that held the
// last stream first, then every address from next on.
func (c *streamClient) targets() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.addresses)+1)
	if c.preferred != "" {
		out = append(out, c.preferred)
	}
	for i := range c.addresses {
		if a := c.addresses[(c.next+i)%len(c.addresses)]; a != c.preferred {
			out = append(out, a)
		}
	}
	return out
}

// passOver makes the next round start after base, which just failed.
func (c *streamClient) passOver(base string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if base == c.preferred {
		c.preferred = ""
		return
	}
	if c.addresses[c.next] == base {
		c.next = (c.next + 1) % len(c.addresses)
	}
}

// forget drops the preference for the server of a session that ended: it may
// be gone, and a follower redirects anyway.
func (c *streamClient) forget(base string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.preferred == base {
		c.preferred = ""
	}
}

// openAt tries one server, following its redirects. retry says whether
// another server (or the same later) may do better.
func (c *streamClient) openAt(ctx context.Context, base, path string, body []byte) (s *openedStream, retry bool, err error) {
	url := base + path
	for hop := 0; ; hop++ {
		actx, cancel := context.WithCancelCause(ctx)
		req, err := c.newPost(actx, url, body, "")
		if err != nil {
			cancel(nil)
			return nil, false, err
		}
		req.Header.Set("Accept", StreamContentType)
		timer := time.AfterFunc(c.openTimeout, func() { cancel(errOpenTimeout) })
		resp, err := c.http.Do(req)
		timedOut := !timer.Stop()
		if err != nil || timedOut {
			if resp != nil {
				resp.Body.Close()
			}
			cancel(nil)
			if ctx.Err() != nil {
				return nil, false, fmt.Errorf("POST %s: %w", url, ctx.Err())
			}
			if timedOut {
				return nil, true, fmt.Errorf("POST %s: no answer within %s", url, c.openTimeout)
			}
			return nil, true, fmt.Errorf("POST %s: %w", url, err)
		}
		switch resp.StatusCode {
		case http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
			loc := resp.Header.Get("Location")
			drainAndClose(resp.Body)
			cancel(nil)
			if loc == "" {
				return nil, true, fmt.Errorf("POST %s: %d without Location", url, resp.StatusCode)
			}
			next, err := req.URL.Parse(loc)
			if err != nil {
				return nil, true, fmt.Errorf("POST %s: bad Location %q: %w", url, loc, err)
			}
			if hop >= maxRedirects {
				return nil, true, fmt.Errorf("POST %s: more than %d redirects (last to %s)", base+path, maxRedirects, next)
			}
			url = next.String()
			continue
		case http.StatusOK:
			s, err := acceptStream(resp, url, path)
			if err != nil {
				resp.Body.Close()
				cancel(nil)
				return nil, false, err
			}
			s.ctx, s.cancel = actx, cancel
			return s, false, nil
		default:
			data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
			resp.Body.Close()
			cancel(nil)
			// 503 is an election (no_leader) or a server going away: another
			// server, or this one a moment later, will take the session.
			return nil, resp.StatusCode == http.StatusServiceUnavailable, decodeCallError(resp, data)
		}
	}
}

// acceptStream checks a 200 answer to an opening request.
func acceptStream(resp *http.Response, url, path string) (*openedStream, error) {
	ct, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || ct != StreamContentType {
		return nil, fmt.Errorf("POST %s: answer is %q, want %s", url, resp.Header.Get("Content-Type"), StreamContentType)
	}
	id := resp.Header.Get(HeaderStreamID)
	if id == "" {
		return nil, fmt.Errorf("POST %s: answer has no %s header", url, HeaderStreamID)
	}
	base := url
	if i := strings.LastIndex(url, path); i >= 0 && i+len(path) == len(url) {
		base = url[:i]
	}
	return &openedStream{url: url, base: base, id: id, body: resp.Body}, nil
}

func (c *streamClient) newPost(ctx context.Context, url string, body []byte, streamID string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if streamID != "" {
		req.Header.Set(HeaderStreamID, streamID)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// call sends one call of a session to the server holding its stream. A
// non-2xx answer becomes an *Error; nothing is retried, since only that
// server knows the stream.
func (c *streamClient) call(ctx context.Context, url, streamID string, call any) error {
	body, err := json.Marshal(call)
	if err != nil {
		return fmt.Errorf("encode call: %w", err)
	}
	req, err := c.newPost(ctx, url, body, streamID)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		drainAndClose(resp.Body)
		return nil
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return decodeCallError(resp, data)
}

// decodeCallError is decodeError plus the Retry-After of a 429, kept in
// Details (see RetryAfter).
func decodeCallError(resp *http.Response, data []byte) *Error {
	e := decodeError(resp.StatusCode, data)
	if secs, err := strconv.ParseFloat(resp.Header.Get("Retry-After"), 64); err == nil && secs >= 0 {
		if e.Details == nil {
			e.Details = map[string]any{}
		}
		if _, ok := e.Details[detailRetryAfter]; !ok {
			e.Details[detailRetryAfter] = secs
		}
	}
	return e
}

// RetryAfter returns how long the server asked the caller to wait (the
// Retry-After of a 429 answer to a streaming-protocol call), or 0.
func RetryAfter(err error) time.Duration {
	var apiErr *Error
	if !errors.As(err, &apiErr) {
		return 0
	}
	if secs, ok := apiErr.Details[detailRetryAfter].(float64); ok && secs > 0 {
		return time.Duration(secs * float64(time.Second))
	}
	return 0
}

func drainAndClose(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, maxErrorBody))
	body.Close()
}

// jittered spreads d over [d/2, d] so that many clients that lost the same
// server do not come back in step.
func jittered(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}
