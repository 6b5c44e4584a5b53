package master

import (
	"slices"
	"sync"
	"sync/atomic"
)

// maxQueued is how many events a stream holds for a slow reader before the
// master gives up on it. A reader that falls this far behind is treated as
// disconnected rather than let the master block or buffer without bound. The
// queue grows only as needed: an idle session costs nothing, and a burst
// (reconciling thousands of tasks) fits.
const maxQueued = 1 << 16

// Stream is one session's outgoing events: the HTTP handler that holds the
// connection takes them in batches until Done.
type Stream[E any] struct {
	id     string
	owner  string // the framework or agent id
	notify chan struct{}
	done   chan struct{}
	once   sync.Once

	mu     sync.Mutex
	queue  []E
	events chan E // made by Events, for readers that want one at a time

	pacing atomic.Bool               // queued with a pacer, not yet woken
	group  atomic.Pointer[wakeGroup] // the pacer's group, until it takes
}

func newStream[E any](id, owner string) *Stream[E] {
	return &Stream[E]{id: id, owner: owner, notify: make(chan struct{}, 1), done: make(chan struct{})}
}

// ID is the stream's Allot-Stream-Id.
func (s *Stream[E]) ID() string { return s.id }

// Owner is the id of the framework or agent the session belongs to.
func (s *Stream[E]) Owner() string { return s.owner }

// Ready receives when events are queued.
func (s *Stream[E]) Ready() <-chan struct{} { return s.notify }

// Take removes and returns the queued events, oldest first.
func (s *Stream[E]) Take() []E {
	// The pacer's group first, so that the take the group counts holds
	// what was queued before the group woke this stream.
	g := s.group.Swap(nil)
	s.mu.Lock()
	q := s.queue
	s.queue = nil
	s.mu.Unlock()
	if g != nil {
		g.took()
	}
	return q
}

// Done is closed when the master ends the session; the handler then writes
// what Take still returns and returns.
func (s *Stream[E]) Done() <-chan struct{} { return s.done }

// Events yields the events one at a time on a channel, for in-process
// readers that only drain a stream; it is closed when the session ends, and
// events still queued then are dropped. Use either Events or Ready and Take,
// not both.
func (s *Stream[E]) Events() <-chan E {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.events == nil {
		s.events = make(chan E)
		go s.pump()
	}
	return s.events
}

func (s *Stream[E]) pump() {
	defer close(s.events) // the only sender
	for {
		for _, e := range s.Take() {
			select {
			case s.events <- e:
			case <-s.done:
				return
			}
		}
		select {
		case <-s.notify:
		case <-s.done:
			return
		}
	}
}

// send queues e and wakes the reader; a full queue ends the session.
func (s *Stream[E]) send(e E) {
	if s.queueQuietly(e) {
		s.wake()
	}
}

// queueQuietly queues e without waking the reader, and reports whether it
// did; a full queue ends the session. A burst of events to many streams (a
// tick taking back ten thousand offers) then wakes each reader once, with
// wake, rather than once per event: each wake-up makes a goroutine
// runnable, and thousands of them delay every other goroutine of the
// leader, Raft's and the write handlers' included.
func (s *Stream[E]) queueQuietly(e E) bool {
	if s.closed() {
		return false
	}
	s.mu.Lock()
	full := len(s.queue) >= maxQueued
	if !full {
		s.queue = append(s.queue, e)
	}
	s.mu.Unlock()
	if full {
		s.close()
	}
	return !full
}

// reserve makes room in the queue for n more events, so that a burst queued
// one at a time grows it once; a closed stream queues nothing more.
func (s *Stream[E]) reserve(n int) {
	if s.closed() {
		return
	}
	s.mu.Lock()
	s.queue = slices.Grow(s.queue, max(0, min(n, maxQueued-len(s.queue))))
	s.mu.Unlock()
}

// wake tells the reader that events are queued.
func (s *Stream[E]) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *Stream[E]) close() { s.once.Do(func() { close(s.done) }) }

func (s *Stream[E]) closed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}
