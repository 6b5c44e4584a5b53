package master

import "sync"

// streamBuffer is how many events a stream holds for a slow reader before
// the master gives up on it. A reader that falls this far behind is treated
// as disconnected rather than let the master block or buffer without bound.
const streamBuffer = 4096

// Stream is one session's outgoing events: the HTTP handler that holds the
// connection drains Events until Done.
type Stream[E any] struct {
	id     string
	owner  string // the framework or agent id
	events chan E
	done   chan struct{}
	once   sync.Once
}

func newStream[E any](id, owner string) *Stream[E] {
	return &Stream[E]{id: id, owner: owner, events: make(chan E, streamBuffer), done: make(chan struct{})}
}

// ID is the stream's Allot-Stream-Id.
func (s *Stream[E]) ID() string { return s.id }

// Owner is the id of the framework or agent the session belongs to.
func (s *Stream[E]) Owner() string { return s.owner }

// Events yields the events to write, in order.
func (s *Stream[E]) Events() <-chan E { return s.events }

// Done is closed when the master ends the session; the handler then returns
// after writing what Events still holds.
func (s *Stream[E]) Done() <-chan struct{} { return s.done }

// send queues e; a full buffer ends the session.
func (s *Stream[E]) send(e E) {
	select {
	case <-s.done:
	default:
		select {
		case s.events <- e:
		default:
			s.close()
		}
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
