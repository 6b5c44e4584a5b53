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

// listedReads answers the reads a refresh makes, one per resource, of one
// kind of object from one list of them all: a plan of a thousand
// allot_rate_limit resources makes one linearizable read of the cluster
// instead of a thousand (each a round trip to the leader, which confirms
// with a quorum that it still leads). The answers are as current as the
// first read's own answer would have been. A read the list cannot answer
// (an object created since it was sent, or one the token may read but not
// list) is made on its own, as is every read while no list could be made.
// Every write the provider makes drops the list (forget), so a read that
// follows the provider's own write sees it.
type listedReads[O any] struct {
	mu sync.Mutex
	// gen counts forget calls: a list sent before one is not kept.
	gen uint64
	// loading is closed when the list in flight has answered.
	loading chan struct{}
	// sent is when the kept list, or the last one that failed, was sent;
	// objects is nil after a failure.
	sent    time.Time
	objects map[string]O
	// lifetime overrides listedReadLifetime in tests.
	lifetime time.Duration
}

// get returns the object with id from a list sent less than the lifetime
// ago, listing when there is none; false when the list does not hold it or
// none could be made.
func (l *listedReads[O]) get(ctx context.Context, id string, list func(context.Context) (map[string]O, error)) (O, bool) {
	var none O
	lifetime := l.lifetime
	if lifetime == 0 {
		lifetime = listedReadLifetime
	}
	for {
		l.mu.Lock()
		if !l.sent.IsZero() && time.Since(l.sent) < lifetime {
			o, ok := l.objects[id]
			l.mu.Unlock()
			return o, ok
		}
		if wait := l.loading; wait != nil {
			l.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return none, false
			}
		}
		done, gen := make(chan struct{}), l.gen
		l.loading = done
		l.mu.Unlock()

		sent := time.Now()
		objects, err := list(ctx)
		if err != nil {
			objects = nil
		}

		l.mu.Lock()
		l.loading = nil
		close(done)
		kept := gen == l.gen
		if kept {
			l.sent, l.objects = sent, objects
		}
		l.mu.Unlock()
		if !kept {
			return none, false
		}
		o, ok := objects[id]
		return o, ok
	}
}

// forget drops the list kept and any list in flight.
func (l *listedReads[O]) forget() {
	l.mu.Lock()
	l.gen++
	l.sent, l.objects = time.Time{}, nil
	l.mu.Unlock()
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
