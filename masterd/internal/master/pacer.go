package master

import (
	"sync"
	"sync/atomic"
	"time"
)

// Waking the sessions of a burst a group at a time.
//
// A cycle sends OFFERS to every framework it offered to, and a tick that
// takes back the offers of the cycle before sends each of them RESCINDs:
// with a thousand frameworks, a thousand session goroutines become runnable
// at once. The Go runtime reads the network only when a processor runs out
// of runnable goroutines (or every 10 ms from its monitor), so while the
// sessions of a burst run, no request that arrives is read: a policy write
// waits for the whole burst, a millisecond or more on two cores, on top of
// its own time.
//
// The pacer wakes the sessions of a burst wakeGroupSize at a time (a burst
// to a group or fewer is woken at once: see wakeBurst). A group is done
// when its last session has taken its events: that session wakes the
// pacer, which runs once the session has written them and yielded its
// processor. The pacer then pauses before the next group, and the
// processor polls the network before it runs anything else. The events
// themselves are queued at once, in order; only the wake-up waits, about
// 11 ms for the last of a thousand frameworks (BenchmarkPacerBurst), which
// is small beside an allocation interval.
const (
	// wakeGroupSize is how many sessions the pacer wakes before it lets
	// requests in.
	wakeGroupSize = 64
	// groupWait bounds the wait for a group's sessions to take their
	// events: one that is slow to (a reader blocked on a slow client) holds
	// up the rest for no longer.
	groupWait = 2 * time.Millisecond
	// wakePause is the pause after each group. It only has to outlast the
	// runtime's next look for work, so that the look finds the network
	// rather than the pacer; where nothing else waits, the runtime's timer
	// granularity makes it up to a millisecond.
	wakePause = 10 * time.Microsecond
)

// pacer wakes streams a group at a time, from its own goroutine (run).
type pacer[E any] struct {
	kick chan struct{}
	wait time.Duration // groupWait; tests set their own

	mu    sync.Mutex
	queue []*Stream[E] // to wake, oldest first; each at most once
}

func newPacer[E any]() *pacer[E] {
	return &pacer[E]{kick: make(chan struct{}, 1), wait: groupWait}
}

// add queues s to be woken; a stream already queued keeps its place.
func (p *pacer[E]) add(s *Stream[E]) {
	if s.pacing.Swap(true) {
		return
	}
	p.mu.Lock()
	p.queue = append(p.queue, s)
	p.mu.Unlock()
}

// start has run wake the streams add queued.
func (p *pacer[E]) start() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// run wakes the queued streams until done is closed.
func (p *pacer[E]) run(done <-chan struct{}) {
	pause := time.NewTimer(p.wait)
	pause.Stop()
	defer pause.Stop()
	for {
		select {
		case <-done:
			return
		case <-p.kick:
		}
		for batch := p.take(); len(batch) > 0; batch = p.take() {
			for len(batch) > 0 {
				n := min(len(batch), wakeGroupSize)
				g := p.wake(batch[:n])
				batch = batch[n:]
				// Until the group has taken its events, or no longer.
				pause.Reset(p.wait)
				select {
				case <-done:
					return
				case <-g.taken:
				case <-pause.C:
				}
				// The pause that lets requests in.
				pause.Reset(wakePause)
				select {
				case <-done:
					return
				case <-pause.C:
				}
			}
		}
	}
}

// take empties the queue and returns what it held.
func (p *pacer[E]) take() []*Stream[E] {
	p.mu.Lock()
	defer p.mu.Unlock()
	batch := p.queue
	p.queue = nil
	return batch
}

// wake wakes the streams of a group and returns the group.
func (p *pacer[E]) wake(streams []*Stream[E]) *wakeGroup {
	g := &wakeGroup{taken: make(chan struct{})}
	g.left.Store(int32(len(streams)))
	for _, s := range streams {
		// Before the wake-up, so that an add after it queues s again: the
		// events it queued may come after the take the wake-up leads to.
		s.pacing.Store(false)
		if s.closed() {
			g.took() // nobody may take
			continue
		}
		s.group.Store(g)
		s.wake()
	}
	return g
}

// wakeGroup counts the streams of a group that have yet to take their
// events.
type wakeGroup struct {
	left  atomic.Int32
	taken chan struct{} // closed when left reaches 0
}

func (g *wakeGroup) took() {
	if g.left.Add(-1) == 0 {
		close(g.taken)
	}
}
