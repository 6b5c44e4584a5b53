package master

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
)

// pacedStreams starts a pacer that waits up to wait for each group's takes,
// and n streams queued with it, each with one event.
func pacedStreams(t *testing.T, n int, wait time.Duration) (*pacer[int], []*Stream[int]) {
	t.Helper()
	p := newPacer[int]()
	p.wait = wait
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		p.run(done)
	}()
	t.Cleanup(func() {
		close(done)
		<-stopped
	})
	streams := make([]*Stream[int], n)
	for i := range streams {
		streams[i] = newStream[int](fmt.Sprint(i), "owner")
		streams[i].queueQuietly(i)
		p.add(streams[i])
	}
	return p, streams
}

func ready(s *Stream[int]) bool {
	select {
	case <-s.Ready():
		return true
	default:
		return false
	}
}

// waitReady waits until every stream of want is woken, and takes nothing.
func waitReady(t *testing.T, want []*Stream[int]) {
	t.Helper()
	for _, s := range want {
		select {
		case <-s.Ready():
		case <-time.After(10 * time.Second):
			t.Fatalf("stream %s not woken", s.ID())
		}
	}
}

// notReady checks, after a moment in which the pacer could have, that it
// woke none of streams.
func notReady(t *testing.T, streams []*Stream[int]) {
	t.Helper()
	time.Sleep(20 * time.Millisecond)
	for _, s := range streams {
		if ready(s) {
			t.Fatalf("stream %s woken before the group before it took its events", s.ID())
		}
	}
}

func TestPacerWakesAGroupAtATime(t *testing.T) {
	p, streams := pacedStreams(t, 2*wakeGroupSize+1, time.Hour)
	first, second, third := streams[:wakeGroupSize], streams[wakeGroupSize:2*wakeGroupSize], streams[2*wakeGroupSize:]
	p.start()
	waitReady(t, first)
	notReady(t, second)
	// All but one of the first group take: the next still waits.
	for _, s := range first[1:] {
		if got := s.Take(); len(got) != 1 {
			t.Fatalf("stream %s: took %v, want its one event", s.ID(), got)
		}
	}
	notReady(t, second)
	first[0].Take()
	waitReady(t, second)
	notReady(t, third)
	for _, s := range second {
		s.Take()
	}
	waitReady(t, third)
}

func TestPacerSkipsClosedStreams(t *testing.T) {
	p, streams := pacedStreams(t, wakeGroupSize+1, time.Hour)
	for _, s := range streams[:wakeGroupSize-1] {
		s.close()
	}
	p.start()
	waitReady(t, streams[wakeGroupSize-1:wakeGroupSize])
	notReady(t, streams[wakeGroupSize:])
	// The group's one open stream takes: nobody waits for the closed ones.
	streams[wakeGroupSize-1].Take()
	waitReady(t, streams[wakeGroupSize:])
}

func TestPacerQueuesAStreamOnce(t *testing.T) {
	p, streams := pacedStreams(t, 2, time.Hour)
	p.add(streams[0])
	p.add(streams[1])
	p.mu.Lock()
	queued := len(p.queue)
	p.mu.Unlock()
	if queued != 2 {
		t.Fatalf("%d streams queued, want 2: a stream added again keeps its place", queued)
	}
	p.start()
	waitReady(t, streams)
	// Woken, a stream can be queued for the next burst.
	p.add(streams[0])
	p.mu.Lock()
	queued = len(p.queue)
	p.mu.Unlock()
	if queued != 1 {
		t.Fatalf("%d streams queued after the wake-up, want 1", queued)
	}
}

func TestPacerGivesUpOnASlowGroup(t *testing.T) {
	p, streams := pacedStreams(t, wakeGroupSize+1, time.Millisecond)
	p.start()
	// Nobody takes: the second group is woken once the wait has passed.
	waitReady(t, streams)
}

// TestPacerLosesNoWakeUp: events queued to streams again and again, while
// the pacer wakes them and their readers take, all reach the readers.
func TestPacerLosesNoWakeUp(t *testing.T) {
	const rounds = 200
	p, streams := pacedStreams(t, wakeGroupSize+8, time.Millisecond)
	var taken sync.WaitGroup
	taken.Add(len(streams) * (rounds + 1)) // pacedStreams queued one each
	for _, s := range streams {
		go func() {
			for {
				select {
				case <-s.Ready():
					for range s.Take() {
						taken.Done()
					}
				case <-s.Done():
					return
				}
			}
		}()
	}
	for r := range rounds {
		for _, s := range streams {
			s.queueQuietly(r)
			p.add(s)
			runtime.Gosched() // lets the pacer and the readers in between
		}
		p.start()
	}
	all := make(chan struct{})
	go func() {
		taken.Wait()
		close(all)
	}()
	select {
	case <-all:
	case <-time.After(10 * time.Second):
		t.Fatal("events queued with the pacer were never taken: a wake-up was lost")
	}
	for _, s := range streams {
		s.close()
	}
}

// TestBurstWakesEverySession: bursts to more frameworks than a group holds
// wake every session that waits on Ready, as the HTTP handlers do: a
// cycle's OFFERS, then the RESCINDs of the offers it made once they expire.
func TestBurstWakesEverySession(t *testing.T) {
	h := newHarness(t)
	n := 2*wakeGroupSize + 1
	offered, rescinded := make(chan string, n), make(chan string, n)
	var fws []*simFramework
	for i := range n {
		fw := h.subscribe(fwInfo(fmt.Sprintf("fw-%03d", i), fmt.Sprintf("role-%03d", i)))
		fws = append(fws, fw)
		// The wake-up of SUBSCRIBED, which the harness took.
		select {
		case <-fw.stream.Ready():
		default:
		}
		go func() {
			seen := map[string]bool{}
			for {
				select {
				case <-fw.stream.Ready():
					for _, e := range fw.stream.Take() {
						if seen[e.Type] {
							continue
						}
						seen[e.Type] = true
						switch e.Type {
						case api.EventOffers:
							offered <- fw.id
						case api.EventRescind:
							rescinded <- fw.id
						}
					}
				case <-fw.stream.Done():
					return
				}
			}
		}()
	}
	for i := range n {
		h.registerAgent(fmt.Sprintf("node-%03d", i), api.Resources{"cpus": 1, "mem": 128})
	}
	h.waitCycles(1)
	wakes := func(what string, woken chan string) {
		t.Helper()
		got := map[string]bool{}
		for len(got) < n {
			select {
			case id := <-woken:
				got[id] = true
			case <-time.After(10 * time.Second):
				t.Fatalf("%d of %d sessions were woken with their %s", len(got), n, what)
			}
		}
	}
	wakes("offers", offered)
	// Suppressed, the frameworks get no new offers to wake them.
	for _, fw := range fws {
		fw.mustCall(api.Call{Type: api.CallSuppress})
	}
	h.pass(h.opts.OfferTimeout)
	wakes("rescinds", rescinded)
}

// BenchmarkPacerBurst measures how long the pacer takes to wake a burst of
// 1 000 sessions, each drained by its own goroutine as a session's handler
// drains it: the time the last session of a cycle waits for its OFFERS.
func BenchmarkPacerBurst(b *testing.B) {
	const sessions = 1000
	p := newPacer[int]()
	done := make(chan struct{})
	defer close(done)
	go p.run(done)
	streams := make([]*Stream[int], sessions)
	var taken sync.WaitGroup
	for i := range streams {
		s := newStream[int](fmt.Sprint(i), "owner")
		streams[i] = s
		go func() {
			for {
				select {
				case <-s.Ready():
					if len(s.Take()) > 0 {
						taken.Done()
					}
				case <-done:
					return
				}
			}
		}()
	}
	b.ResetTimer()
	for range b.N {
		taken.Add(sessions)
		for i, s := range streams {
			s.queueQuietly(i)
			p.add(s)
		}
		p.start()
		taken.Wait()
	}
}
