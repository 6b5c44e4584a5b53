package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/ratelimit"
	"github.com/allot/allot/masterd/internal/ratelimit/fakeclock"
)

// The flood of the rate-limit issue, sent over real HTTP to the scheduler
// API. The principal's limit is qps 50 with capacity 100, so its bucket holds
// the default burst of ceil(50) = 50 tokens and 100 calls may wait. The
// limiter's clock is a fake one that stands still during the flood, so no
// token refills while the calls arrive. Of 1 000 calls:
//
//   - the first 50 (the burst) pass at once and answer 202;
//   - the next 100 (the capacity) wait in the queue, then answer 202, one per
//     interval of 1/50 s as the test moves the clock, in arrival order;
//   - the remaining 850 find the queue full and answer 429 rate_limited with
//     a Retry-After.
const (
	floodPrincipal = "flood"
	floodCalls     = 1000
	floodQPS       = 50
	floodInterval  = time.Second / floodQPS
	floodBurst     = floodQPS // the default burst, ceil(qps)
	floodCapacity  = 100
	floodServed    = floodBurst + floodCapacity
	floodRejected  = floodCalls - floodServed
	// floodSubscribes counts the SUBSCRIBE of the flooding framework: it is
	// throttled by the same principal, made before the limit was set, and
	// counted as one call received and processed.
	floodSubscribes = 1
	// floodRetryAfter is the header of a rejection: the head of the queue
	// leaves one interval later, which rounds up to a whole second.
	floodRetryAfter = "1"
	// floodHangGuard only keeps a broken server from hanging the run; no
	// assertion depends on it.
	floodHangGuard = 30 * time.Second
)

func TestSchedulerFloodThroughHTTP(t *testing.T) {
	// One at a time: each call is decided by the limiter (passed, queued or
	// rejected) before the next one is sent, while the queued ones stay in
	// flight, so the arrival order is known and the queue's order checked.
	t.Run("arrivals one at a time", func(t *testing.T) { testSchedulerFlood(t, true) })
	// All at once: the 1 000 calls race into the limiter together; the mix
	// and the spacing are exact all the same, the order is unknown.
	t.Run("arrivals all at once", func(t *testing.T) { testSchedulerFlood(t, false) })
}

func testSchedulerFlood(t *testing.T, oneAtATime bool) {
	r := newFloodRig(t)
	base := r.decided()
	if base != floodSubscribes {
		t.Fatalf("before the flood the limiter decided %d calls of %s, want the %d SUBSCRIBE", base, floodPrincipal, floodSubscribes)
	}

	if oneAtATime {
		for i := range floodCalls {
			r.fire(i)
			r.waitDecided(base + uint64(i+1))
		}
	} else {
		start := make(chan struct{})
		for i := range floodCalls {
			r.fireAfter(start, i)
		}
		close(start)
		r.waitDecided(base + floodCalls)
	}

	// Everything but the queued calls has answered, at the instant the
	// flood started.
	var passed, rejected []int
	for range floodCalls - floodCapacity {
		res := r.next()
		switch res.status {
		case http.StatusAccepted:
			passed = append(passed, res.index)
		case http.StatusTooManyRequests:
			rejected = append(rejected, res.index)
			if res.retryAfter != floodRetryAfter || res.code != api.CodeRateLimited {
				t.Errorf("call %d: 429 with Retry-After %q and code %q, want %q and %q",
					res.index, res.retryAfter, res.code, floodRetryAfter, api.CodeRateLimited)
			}
		default:
			t.Fatalf("call %d: %d %s, want 202 or 429", res.index, res.status, res.code)
		}
		if res.at != 0 {
			t.Errorf("call %d answered at %v by the limiter's clock, want at once", res.index, res.at)
		}
	}
	if len(passed) != floodBurst || len(rejected) != floodRejected {
		t.Fatalf("during the flood %d calls passed and %d were rejected, want %d and %d",
			len(passed), len(rejected), floodBurst, floodRejected)
	}
	if oneAtATime {
		slices.Sort(passed)
		slices.Sort(rejected)
		if !slices.Equal(passed, floodIndexes(0, floodBurst)) {
			t.Errorf("passed at once: %v, want the first %d calls", passed, floodBurst)
		}
		if !slices.Equal(rejected, floodIndexes(floodServed, floodCalls)) {
			t.Errorf("rejected: %d calls from %d, want calls %d..%d", len(rejected), rejected[0], floodServed, floodCalls-1)
		}
	}
	r.expectCounts(floodBurst, floodCapacity)

	// The queue drains one call per interval: moving the clock one interval
	// runs the limiter's timer, which must release exactly one call, the
	// oldest.
	queued := floodIndexes(0, floodCalls)
	queued = slices.DeleteFunc(queued, func(i int) bool { return slices.Contains(passed, i) || slices.Contains(rejected, i) })
	var servedAt []time.Duration
	var servedOrder []int
	for k := range floodCapacity {
		r.clock.Advance(floodInterval)
		if depth := r.stats().QueueDepth; depth != floodCapacity-k-1 {
			t.Fatalf("after %d intervals %d calls wait, want %d: exactly one call per interval", k+1, depth, floodCapacity-k-1)
		}
		res := r.next()
		if res.status != http.StatusAccepted {
			t.Fatalf("queued call %d: %d %s, want 202", res.index, res.status, res.code)
		}
		if oneAtATime && res.index != floodBurst+k {
			t.Fatalf("served call %d after %d intervals, want call %d: the queue is served in arrival order", res.index, k+1, floodBurst+k)
		}
		servedAt = append(servedAt, res.at)
		servedOrder = append(servedOrder, res.index)
	}
	// Served calls are spaced by exactly the interval, from the instant the
	// burst passed.
	previous := time.Duration(0)
	for k, at := range servedAt {
		if gap := at - previous; gap != floodInterval {
			t.Errorf("queued call %d served %v after the one before, want %v", servedOrder[k], gap, floodInterval)
		}
		previous = at
	}
	slices.Sort(servedOrder)
	if !slices.Equal(servedOrder, queued) {
		t.Errorf("served from the queue: %v, want %v", servedOrder, queued)
	}
	r.expectCounts(floodServed, 0)
	if n := r.clock.Pending(); n != 0 {
		t.Errorf("%d limiter timers left with an empty queue", n)
	}
}

// floodRig is a dev server whose limiter runs on a fake clock, with one
// framework subscribed under floodPrincipal.
type floodRig struct {
	t        *testing.T
	s        *Server
	clock    *fakeclock.Clock
	client   *http.Client
	fwID     string
	streamID string
	results  chan floodResult
}

// floodResult is one call's answer, and when it came by the limiter's clock.
type floodResult struct {
	index      int
	status     int
	retryAfter string
	code       string
	at         time.Duration
}

func newFloodRig(t *testing.T) *floodRig {
	clock := fakeclock.New()
	s := startDev(t, func(c *Config) { c.limiterClock = clock })
	fw := openStream[api.Event](t, s, api.SchedulerPath, api.Call{Type: api.CallSubscribe, Subscribe: &api.Subscribe{
		FrameworkInfo: api.FrameworkInfo{Name: "flood", Principal: floodPrincipal, Roles: []string{"*"}}}})
	fwID := fw.next(t, "SUBSCRIBED", func(e api.Event) bool { return e.Type == api.EventSubscribed }).Subscribed.FrameworkID
	mustCall(t, s, "PUT", "/v1/ratelimits/"+floodPrincipal, fmt.Sprintf(`{"qps": %d, "capacity": %d}`, floodQPS, floodCapacity))

	// Every call of the flood may be in flight at once: each needs its own
	// connection, and may keep it for the next.
	transport := &http.Transport{MaxIdleConnsPerHost: floodCalls, IdleConnTimeout: time.Minute}
	t.Cleanup(transport.CloseIdleConnections)
	return &floodRig{t: t, s: s, clock: clock, client: &http.Client{Transport: transport},
		fwID: fwID, streamID: fw.id, results: make(chan floodResult, floodCalls)}
}

// fire sends call index, a REVIVE, in the background.
func (r *floodRig) fire(index int) {
	go func() { r.results <- r.revive(index) }()
}

// fireAfter sends call index once start is closed.
func (r *floodRig) fireAfter(start <-chan struct{}, index int) {
	go func() {
		<-start
		r.results <- r.revive(index)
	}()
}

func (r *floodRig) revive(index int) floodResult {
	body, _ := json.Marshal(api.Call{FrameworkID: r.fwID, Type: api.CallRevive})
	req, _ := http.NewRequest("POST", r.s.APIAddress()+api.SchedulerPath, bytes.NewReader(body))
	req.Header.Set(api.HeaderStreamID, r.streamID)
	resp, err := r.client.Do(req)
	if err != nil {
		// Not t.Fatal: this is not the test's goroutine.
		return floodResult{index: index, code: err.Error()}
	}
	defer resp.Body.Close()
	res := floodResult{index: index, status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), at: r.clock.Elapsed()}
	var e api.ErrorBody
	if json.NewDecoder(resp.Body).Decode(&e) == nil && e.Error != nil {
		res.code = e.Error.Code
	}
	return res
}

// next returns the next answer to arrive.
func (r *floodRig) next() floodResult {
	r.t.Helper()
	select {
	case res := <-r.results:
		return res
	case <-time.After(floodHangGuard):
		r.t.Fatalf("no call answered; limiter: %+v", r.stats())
		return floodResult{}
	}
}

func (r *floodRig) stats() ratelimit.Stats {
	for _, st := range r.s.limiter.Stats() {
		if st.Principal == floodPrincipal {
			return st
		}
	}
	return ratelimit.Stats{Principal: floodPrincipal}
}

// decided counts the principal's calls the limiter let through, queued or
// rejected.
func (r *floodRig) decided() uint64 {
	st := r.stats()
	return st.Processed + st.Rejected + uint64(st.QueueDepth)
}

func (r *floodRig) waitDecided(n uint64) {
	r.t.Helper()
	deadline := time.Now().Add(floodHangGuard)
	for r.decided() < n {
		if time.Now().After(deadline) {
			r.t.Fatalf("the limiter decided %d calls, want %d; limiter: %+v", r.decided(), n, r.stats())
		}
		time.Sleep(20 * time.Microsecond)
	}
	if got := r.decided(); got != n {
		r.t.Fatalf("the limiter decided %d calls, want %d", got, n)
	}
}

// expectCounts checks the limiter's counters and /metrics once processed
// calls of the flood went on and depth wait.
func (r *floodRig) expectCounts(processed, depth int) {
	r.t.Helper()
	want := ratelimit.Stats{Principal: floodPrincipal, Received: floodSubscribes + floodCalls,
		Processed: uint64(floodSubscribes + processed), Rejected: floodRejected, QueueDepth: depth}
	if got := r.stats(); got != want {
		r.t.Errorf("limiter counters %+v, want %+v", got, want)
	}
	resp, err := r.client.Get(r.s.APIAddress() + "/metrics")
	if err != nil {
		r.t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		r.t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	for _, line := range []string{
		fmt.Sprintf(`allot_framework_messages_received_total{label="",principal=%q} %d`, floodPrincipal, want.Received),
		fmt.Sprintf(`allot_framework_messages_processed_total{label="",principal=%q} %d`, floodPrincipal, want.Processed),
		fmt.Sprintf(`allot_ratelimit_rejected_total{label="",principal=%q} %d`, floodPrincipal, want.Rejected),
		fmt.Sprintf(`allot_ratelimit_queue_depth{label="",principal=%q} %d`, floodPrincipal, want.QueueDepth),
	} {
		if !strings.Contains(string(body), "\n"+line+"\n") {
			r.t.Errorf("/metrics lacks the line %s", line)
		}
	}
}

func floodIndexes(from, to int) []int {
	out := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}
