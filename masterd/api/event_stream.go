package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// eventStream reads a session's events, one JSON value per line, into a
// channel. The channel closes when the stream ends; err then says why.
type eventStream[E any] struct {
	url  string // later calls of the session go here
	base string // the base URL of the server holding the stream
	id   string

	events chan E
	done   chan struct{}
	ctx    context.Context
	cancel context.CancelCauseFunc
	err    error // written before done closes

	idleMu sync.Mutex
	idle   time.Duration
	armed  bool
	timer  *time.Timer
}

// eventBuffer lets the reader run a little ahead of a busy consumer; beyond
// it the reader waits and TCP pushes back on the server.
const eventBuffer = 64

// readEvents starts reading the stream; onEnd, when not nil, runs when it
// ends, before anyone can see it ended.
func readEvents[E any](o *openedStream, onEnd func()) *eventStream[E] {
	s := &eventStream[E]{
		url:    o.url,
		base:   o.base,
		id:     o.id,
		events: make(chan E, eventBuffer),
		done:   make(chan struct{}),
		ctx:    o.ctx,
		cancel: o.cancel,
	}
	go s.read(o.body, onEnd)
	return s
}

func (s *eventStream[E]) read(body io.ReadCloser, onEnd func()) {
	// done closes before events: whoever sees events closed finds err set.
	defer close(s.events)
	defer close(s.done)
	defer body.Close()
	if onEnd != nil {
		defer onEnd()
	}
	dec := json.NewDecoder(body)
	for {
		s.arm()
		var e E
		err := dec.Decode(&e)
		s.disarm()
		if err != nil {
			s.err = s.endCause(err)
			s.cancel(s.err)
			return
		}
		select {
		case s.events <- e:
		case <-s.ctx.Done():
			s.err = context.Cause(s.ctx)
			return
		}
	}
}

// endCause tells why reading failed: a cancellation (close, the session's
// context, the idle timer) wins over the read error it caused.
func (s *eventStream[E]) endCause(err error) error {
	if cause := context.Cause(s.ctx); cause != nil {
		return cause
	}
	if errors.Is(err, io.EOF) {
		return ErrStreamEnded
	}
	return fmt.Errorf("read event stream: %w", err)
}

// setIdle makes the stream end with ErrStreamIdle when no event arrives for
// d; d <= 0 waits forever. It takes effect at once, also while a read waits.
func (s *eventStream[E]) setIdle(d time.Duration) {
	s.idleMu.Lock()
	defer s.idleMu.Unlock()
	s.idle = d
	if s.armed {
		s.stopTimer()
		s.startTimer()
	}
}

func (s *eventStream[E]) arm() {
	s.idleMu.Lock()
	defer s.idleMu.Unlock()
	s.armed = true
	s.startTimer()
}

// disarm stops the idle timer while an event is handed over: a slow
// consumer is not a dead server.
func (s *eventStream[E]) disarm() {
	s.idleMu.Lock()
	defer s.idleMu.Unlock()
	s.armed = false
	s.stopTimer()
}

func (s *eventStream[E]) startTimer() {
	if s.idle <= 0 {
		return
	}
	idle := s.idle
	s.timer = time.AfterFunc(idle, func() {
		s.cancel(fmt.Errorf("%w: no event for %s", ErrStreamIdle, idle))
	})
}

func (s *eventStream[E]) stopTimer() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}

// Err is why the stream ended, or nil while it runs.
func (s *eventStream[E]) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// close ends the stream with cause and waits for the reader to stop.
func (s *eventStream[E]) close(cause error) {
	s.cancel(cause)
	<-s.done
}
