package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
)

// countingList is a list of objects that counts its calls and can be held
// open until release is closed.
type countingList struct {
	calls   atomic.Int32
	release chan struct{}
	objects map[string]int
	err     error
}

// waitAsked waits until the list has been asked for once.
func (c *countingList) waitAsked() {
	for c.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
}

func (c *countingList) list(ctx context.Context) (map[string]int, error) {
	c.calls.Add(1)
	if c.release != nil {
		<-c.release
	}
	return c.objects, c.err
}

func TestListedReadsConcurrentReadsShareOneList(t *testing.T) {
	ctx := context.Background()
	var reads listedReads[int]
	l := &countingList{release: make(chan struct{}), objects: map[string]int{"a": 1, "b": 2}}
	var wg sync.WaitGroup
	got := make([]int, 10)
	found := make([]bool, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], found[i], _ = reads.get(ctx, []string{"a", "b"}[i%2], l.list)
		}()
	}
	time.Sleep(50 * time.Millisecond) // let the readers queue behind the first list
	close(l.release)
	wg.Wait()
	if n := l.calls.Load(); n != 1 {
		t.Fatalf("10 concurrent reads made %d lists, want 1", n)
	}
	for i := range 10 {
		if want := i%2 + 1; !found[i] || got[i] != want {
			t.Errorf("read %d: %d, %v; want %d, true", i, got[i], found[i], want)
		}
	}
	if _, found, err := reads.get(ctx, "c", l.list); found || err != nil {
		t.Errorf("an id the list does not hold: found %v, %v; want false, nil (read it on its own)", found, err)
	}
	if n := l.calls.Load(); n != 1 {
		t.Errorf("a read within the lifetime made a list: %d lists in all", n)
	}
}

// The first reads of a kind go on their own: a configuration with a few
// objects does not list every object of a large cluster.
func TestListedReadsFirstReadsGoAlone(t *testing.T) {
	ctx := context.Background()
	reads := listedReads[int]{alone: 3}
	l := &countingList{objects: map[string]int{"a": 1}}
	for i := range 3 {
		if _, found, err := reads.get(ctx, "a", l.list); found || err != nil || l.calls.Load() != 0 {
			t.Fatalf("read %d: found %v, %v after %d lists; want it on its own", i+1, found, err, l.calls.Load())
		}
	}
	if v, found, _ := reads.get(ctx, "a", l.list); !found || v != 1 || l.calls.Load() != 1 {
		t.Fatalf("read 4: %d, %v after %d lists; want 1 from the list", v, found, l.calls.Load())
	}
}

func TestListedReadsListAgainAfterForgetAndLifetime(t *testing.T) {
	ctx := context.Background()
	reads := listedReads[int]{lifetime: 100 * time.Millisecond}
	l := &countingList{objects: map[string]int{"a": 1}}
	reads.get(ctx, "a", l.list)
	reads.forget()
	l.objects = map[string]int{"a": 2}
	if v, _, _ := reads.get(ctx, "a", l.list); v != 2 || l.calls.Load() != 2 {
		t.Fatalf("after forget: %d from %d lists, want 2 from 2", v, l.calls.Load())
	}
	time.Sleep(150 * time.Millisecond)
	l.objects = map[string]int{"a": 3}
	if v, _, _ := reads.get(ctx, "a", l.list); v != 3 || l.calls.Load() != 3 {
		t.Fatalf("after the lifetime: %d from %d lists, want 3 from 3", v, l.calls.Load())
	}
}

// A list that takes longer than the lifetime still answers the reads that
// waited for it: they do not list again one after another.
func TestListedReadsSlowListAnswersItsWaiters(t *testing.T) {
	ctx := context.Background()
	reads := listedReads[int]{lifetime: 20 * time.Millisecond}
	l := &countingList{release: make(chan struct{}), objects: map[string]int{"a": 1}}
	var wg sync.WaitGroup
	var answered atomic.Int32
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, found, _ := reads.get(ctx, "a", l.list); found {
				answered.Add(1)
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	close(l.release)
	wg.Wait()
	if answered.Load() != 5 || l.calls.Load() != 1 {
		t.Fatalf("%d of 5 reads answered by %d lists, want 5 by 1", answered.Load(), l.calls.Load())
	}
}

// A write that lands while a list is in flight may be missing from it: that
// list answers nothing, and the next read lists again.
func TestListedReadsDropAListSentBeforeAWrite(t *testing.T) {
	ctx := context.Background()
	var reads listedReads[int]
	l := &countingList{release: make(chan struct{}), objects: map[string]int{"a": 1}}
	done := make(chan bool)
	go func() {
		_, found, _ := reads.get(ctx, "a", l.list)
		done <- found
	}()
	l.waitAsked()
	reads.forget()
	close(l.release)
	if <-done {
		t.Fatal("a list sent before a write answered a read")
	}
	l.release = nil
	l.objects = map[string]int{"a": 2}
	if v, found, _ := reads.get(ctx, "a", l.list); !found || v != 2 || l.calls.Load() != 2 {
		t.Fatalf("the next read: %d, %v from %d lists; want 2, true from 2", v, found, l.calls.Load())
	}
}

// A list the cluster refuses is not asked again by every read: they go one
// by one until the lifetime has passed. A list no server answered gives the
// reads that waited for it its error, and the next read asks again.
func TestListedReadsFailedLists(t *testing.T) {
	ctx := context.Background()
	var reads listedReads[int]
	l := &countingList{err: &api.Error{Code: api.CodePermissionDenied, Message: "no"}}
	for range 5 {
		if _, found, err := reads.get(ctx, "a", l.list); found || err != nil {
			t.Fatalf("after a refused list: found %v, %v; want false, nil (read it on its own)", found, err)
		}
	}
	if n := l.calls.Load(); n != 1 {
		t.Fatalf("5 reads after a refused list made %d lists, want 1", n)
	}

	reads = listedReads[int]{}
	down := errors.New("connection refused")
	l = &countingList{err: down}
	for i := range 2 {
		if _, _, err := reads.get(ctx, "a", l.list); !errors.Is(err, down) || l.calls.Load() != int32(i+1) {
			t.Fatalf("read %d with no server answering: %v after %d lists; want the list's error, one list each", i+1, err, l.calls.Load())
		}
	}
}

// A read whose context ends stops waiting; the list goes on for the others.
func TestListedReadsWaiterGivesUp(t *testing.T) {
	var reads listedReads[int]
	l := &countingList{release: make(chan struct{}), objects: map[string]int{"a": 1}}
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error)
	go func() {
		_, _, err := reads.get(ctx, "a", l.list)
		gaveUp <- err
	}()
	l.waitAsked()
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("a read whose context ended: %v, want context.Canceled", err)
	}
	close(l.release)
	if v, found, err := reads.get(context.Background(), "a", l.list); !found || v != 1 || err != nil || l.calls.Load() != 1 {
		t.Fatalf("the next read: %d, %v, %v from %d lists; want 1 from the same list", v, found, err, l.calls.Load())
	}
}

// countingTransport counts the requests per method and path.
type countingTransport struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.counts[req.Method+" "+req.URL.Path]++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

func (c *countingTransport) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	c.counts = map[string]int{}
	return out
}

// The refresh of many rate limits, quotas and reservations against a real
// cluster: one list per kind, answers equal to the objects' own GETs, and
// the provider's own writes seen at once.
func TestRefreshReadsFromOneList(t *testing.T) {
	ctx := context.Background()
	c := startCluster(t, 1)
	c.admitAgent(t, "listed-node", api.Resources{"cpus": 64, "mem": 65536})
	const n = 20
	for i := range n {
		qps := float64(i + 1)
		if _, err := c.client.PutRateLimit(ctx, fmt.Sprintf("p%d", i), api.RateLimitRequest{QPS: &qps}, api.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.client.PutQuota(ctx, fmt.Sprintf("r%d", i), api.QuotaRequest{Limits: api.Resources{"cpus": float64(i + 1)}}, api.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.client.PutReservation(ctx, fmt.Sprintf("v%d", i), api.ReservationRequest{Agent: "listed-node", Role: "db", Resources: api.Resources{"cpus": 1}}, api.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.client.PutLabeledRateLimit(ctx, "p0", "nightly", api.RateLimitRequest{}, api.WriteOptions{}); err != nil {
		t.Fatal(err)
	}

	counter := &countingTransport{counts: map[string]int{}}
	client, err := api.NewClient(c.Addresses(), accToken)
	if err != nil {
		t.Fatal(err)
	}
	client.HTTP.Transport = counter
	d := &providerData{client: client, timeout: time.Minute}
	d.rateLimits.alone, d.quotas.alone, d.reservations.alone = readsAlone, readsAlone, readsAlone
	rateLimits := &objectResource[rateLimitModel, api.RateLimitRequest, api.RateLimit]{kind: &rateLimitKind, data: d}
	quotas := &objectResource[quotaModel, api.QuotaRequest, api.Quota]{kind: &quotaKind, data: d}
	reservations := &objectResource[reservationModel, api.ReservationRequest, api.Reservation]{kind: &reservationKind, data: d}

	ids := []string{rateLimitID("p0", "nightly")}
	for i := range n {
		ids = append(ids, fmt.Sprintf("p%d", i))
	}
	readAll := func(name string, read func(id string) (any, error), get func(id string) (any, error), ids []string) {
		t.Helper()
		for _, id := range ids {
			listed, err := read(id)
			if err != nil {
				t.Fatalf("%s %s: %v", name, id, err)
			}
			own, err := get(id)
			if err != nil {
				t.Fatalf("%s %s: own GET: %v", name, id, err)
			}
			if !reflect.DeepEqual(listed, own) {
				t.Errorf("%s %s: from the list %+v, from its own GET %+v", name, id, listed, own)
			}
		}
	}
	readAll("rate limit",
		func(id string) (any, error) { return rateLimits.read(ctx, id) },
		func(id string) (any, error) { return rateLimitKind.get(ctx, c.client, id) }, ids)
	var roles, names []string
	for i := range n {
		roles, names = append(roles, fmt.Sprintf("r%d", i)), append(names, fmt.Sprintf("v%d", i))
	}
	readAll("quota",
		func(id string) (any, error) { return quotas.read(ctx, id) },
		func(id string) (any, error) { return quotaKind.get(ctx, c.client, id) }, roles)
	readAll("reservation",
		func(id string) (any, error) { return reservations.read(ctx, id) },
		func(id string) (any, error) { return reservationKind.get(ctx, c.client, id) }, names)
	// The first reads of each kind go on their own, the rest from one list.
	want := map[string]int{"GET /v1/ratelimits": 1, "GET /v1/quotas": 1, "GET /v1/reservations": 1}
	for i := range readsAlone {
		want["GET "+rateLimitIDPath(ids[i])]++
		want["GET /v1/quotas/"+roles[i]]++
		want["GET /v1/reservations/"+names[i]]++
	}
	if got := counter.take(); !reflect.DeepEqual(got, want) {
		t.Fatalf("%d rate limits, quotas and reservations read with requests %v, want %v", n, got, want)
	}

	// An object created after the list is read on its own.
	qps := 5.0
	if _, err := c.client.PutRateLimit(ctx, "late", api.RateLimitRequest{QPS: &qps}, api.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if rl, err := rateLimits.read(ctx, "late"); err != nil || rl.QPS == nil || *rl.QPS != 5 {
		t.Fatalf("a rate limit created after the list: %+v, %v", rl, err)
	}
	if _, err := rateLimits.read(ctx, "nobody"); !api.IsNotFound(err) {
		t.Fatalf("a rate limit that does not exist: %v, want not found", err)
	}

	// The provider's own write is seen by the next read.
	before, _ := rateLimits.read(ctx, "p1")
	qps = 99
	written, err := rateLimits.put(ctx, "p1", api.RateLimitRequest{QPS: &qps}, api.WriteOptions{IfMatch: before.Version})
	if err != nil {
		t.Fatal(err)
	}
	if after, err := rateLimits.read(ctx, "p1"); err != nil || after.Version != written.Version || *after.QPS != 99 {
		t.Fatalf("read after the provider's own write: %+v, %v; want version %d, qps 99", after, err, written.Version)
	}
	counter.take()
	readAll("rate limit after a write",
		func(id string) (any, error) { return rateLimits.read(ctx, id) },
		func(id string) (any, error) { return rateLimitKind.get(ctx, c.client, id) }, ids)
	if got := counter.take()["GET /v1/ratelimits"]; got != 0 {
		t.Errorf("reads after the write listed %d more times, want 0 (the read after it listed)", got)
	}
}

// A server from before lists carried versions: its list answers nothing,
// and every rate limit is read on its own.
func TestRateLimitListWithoutVersionsIsNotUsed(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"limits": [{"principal": "spark", "qps": 1, "burst": 1, "capacity": 10}]}`)
	}))
	defer server.Close()
	client, err := api.NewClient([]string{server.URL}, "")
	if err != nil {
		t.Fatal(err)
	}
	if limits, err := listRateLimits(context.Background(), client); !errors.Is(err, errNoVersions) {
		t.Fatalf("a list without versions: %v, %v; want errNoVersions", limits, err)
	}
}
