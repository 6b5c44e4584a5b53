package master

import "testing"

// A burst reserved first is queued without the queue growing again; a
// closed stream reserves nothing; a full queue still ends the session.
func TestStreamReserve(t *testing.T) {
	s := newStream[int]("s", "f")
	s.reserve(100)
	room := cap(s.queue)
	if room < 100 {
		t.Fatalf("room for %d events after reserving 100", room)
	}
	for i := range 100 {
		if !s.queueQuietly(i) {
			t.Fatalf("event %d refused", i)
		}
	}
	if cap(s.queue) != room {
		t.Errorf("queue grew from %d to %d within the reserved burst", room, cap(s.queue))
	}
	if got := s.Take(); len(got) != 100 || got[0] != 0 || got[99] != 99 {
		t.Errorf("took %d events, want 0..99 in order", len(got))
	}

	s.reserve(2 * maxQueued)
	if cap(s.queue) > maxQueued {
		t.Errorf("reserved room for %d events, more than a stream may hold (%d)", cap(s.queue), maxQueued)
	}
	for i := range maxQueued {
		s.queueQuietly(i)
	}
	if s.queueQuietly(0) || !s.closed() {
		t.Error("a full queue took another event and stayed open")
	}

	closed := newStream[int]("c", "f")
	closed.close()
	closed.reserve(100)
	if cap(closed.queue) != 0 {
		t.Errorf("a closed stream reserved room for %d events", cap(closed.queue))
	}
}
