package provider

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/allot/allot/masterd/api"
)

// listedReadLifetime is how long one list answers reads after it was sent.
// A refresh reads all of a configuration's resources within seconds; a
// provider process that lives longer lists again rather than answer from
// an old list.
const listedReadLifetime = 10 * time.Second

// readsAlone is how many reads of a kind a provider makes on its own before
// it lists: a list costs as much as the cluster has objects of the kind, so
// a configuration with a few of them in a large cluster reads them one by
// one.
const readsAlone = 8

// listedReads answers the reads a refresh makes, one per resource, of one
// kind of object from one list of them all: a plan of a thousand
// allot_rate_limit resources makes one linearizable read of the cluster
// instead of a thousand (each a round trip to the leader, which confirms
// with a quorum that it still leads). The answers are as current as the
// first read's own answer would have been. A read the list does not answer
// (an object created since it was sent) is made on its own, as is every
// read while the list is refused. Every write the provider makes drops the
// list (forget), so a read that follows the provider's own write sees it.
type listedReads[O any] struct {
	// alone is how many reads go on their own before the first list
	// (readsAlone where the provider is configured).
	alone int
	// lifetime overrides listedReadLifetime in tests.
	lifetime time.Duration

	mu    sync.Mutex
	reads int
	// gen counts forget calls: a list sent before one is not kept.
	gen     uint64
	current *listing[O]
}

// listing is one list: in flight until done is closed, then kept for the
// lifetime from when it was sent (from when it failed, for one that did).
// Its objects are handed to every read that asks for them, which only
// reads them.
type listing[O any] struct {
	done    chan struct{}
	at      time.Time
	objects map[string]O
	err     error
}

// get returns the object with id from the current list, listing when there
// is none. found is false when the list does not hold the object or was
// refused: the caller then reads it on its own. err is the list's error
// when the cluster could not be asked (noAnswer), which a read on its own
// would meet as well.
func (l *listedReads[O]) get(ctx context.Context, id string, list func(context.Context) (map[string]O, error)) (o O, found bool, err error) {
	lifetime := l.lifetime
	if lifetime == 0 {
		lifetime = listedReadLifetime
	}
	l.mu.Lock()
	l.reads++
	if l.reads <= l.alone {
		l.mu.Unlock()
		return o, false, nil
	}
	cur := l.current
	if cur == nil || (isDone(cur) && time.Since(cur.at) >= lifetime) {
		cur = &listing[O]{done: make(chan struct{}), at: time.Now()}
		l.current = cur
		go l.load(cur, l.gen, ctx, list)
	}
	l.mu.Unlock()

	// A list in flight is waited for, however long it takes: it is the
	// freshest answer there is.
	select {
	case <-cur.done:
	case <-ctx.Done():
		return o, false, ctx.Err()
	}
	if cur.err != nil {
		return o, false, cur.err
	}
	o, found = cur.objects[id]
	return o, found, nil
}

// load makes the list for cur. It runs under the context of the read that
// started it, detached from that read's end, so the reads waiting for it
// are not cut short by the first one.
func (l *listedReads[O]) load(cur *listing[O], gen uint64, ctx context.Context, list func(context.Context) (map[string]O, error)) {
	deadline, ok := ctx.Deadline()
	ctx = context.WithoutCancel(ctx)
	if ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	objects, err := list(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		cur.objects = objects
	case noAnswer(err) && !errors.Is(err, errNoVersions):
		// Only the reads that waited for it share its error: the next
		// read asks again, as a read of its own would.
		cur.err = err
		l.drop(cur)
	default:
		// Refused: the reads go one by one for the lifetime.
		cur.at = time.Now()
	}
	if gen != l.gen {
		// A write came in while the list was in flight: it may be
		// missing from it, so the reads that waited go on their own.
		cur.objects, cur.err = nil, nil
		l.drop(cur)
	}
	close(cur.done)
}

// drop makes cur no longer the current list, if it still is.
func (l *listedReads[O]) drop(cur *listing[O]) {
	if l.current == cur {
		l.current = nil
	}
}

// forget drops the list kept and any list in flight.
func (l *listedReads[O]) forget() {
	l.mu.Lock()
	l.gen++
	l.current = nil
	l.mu.Unlock()
}

func isDone[O any](cur *listing[O]) bool {
	select {
	case <-cur.done:
		return true
	default:
		return false
	}
}

// errNoVersions: the server's list carries no versions (a server from
// before they were listed), so the objects are read one by one.
var errNoVersions = errors.New("the list carries no versions")

// listRateLimits is every rate limit by its resource id, from GET
// /v1/ratelimits.
func listRateLimits(ctx context.Context, c *api.Client) (map[string]api.RateLimit, error) {
	cfg, err := c.RateLimitConfig(ctx, api.ReadOptions{})
	if err != nil {
		return nil, err
	}
	limits := make(map[string]api.RateLimit, len(cfg.Limits))
	for _, l := range cfg.Limits {
		if l.Version == 0 || l.Burst == nil || l.Capacity == nil {
			return nil, errNoVersions
		}
		limits[rateLimitID(l.Principal, l.Label)] = api.RateLimit{Principal: l.Principal, Label: l.Label,
			QPS: l.QPS, Burst: *l.Burst, Capacity: *l.Capacity, Version: l.Version}
	}
	return limits, nil
}

// listQuotas is every quota the token may read, by role.
func listQuotas(ctx context.Context, c *api.Client) (map[string]api.Quota, error) {
	quotas, err := c.Quotas(ctx, api.ReadOptions{})
	return byKey(quotas, func(q api.Quota) string { return q.Role }), err
}

// listReservations is every reservation the token may read, by name.
func listReservations(ctx context.Context, c *api.Client) (map[string]api.Reservation, error) {
	reservations, err := c.Reservations(ctx, api.ReadOptions{})
	return byKey(reservations, func(r api.Reservation) string { return r.Name }), err
}

func byKey[O any](objects []O, key func(O) string) map[string]O {
	m := make(map[string]O, len(objects))
	for _, o := range objects {
		m[key(o)] = o
	}
	return m
}
