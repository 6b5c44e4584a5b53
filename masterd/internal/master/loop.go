package master

import (
	"context"
	"time"
)

// loop runs the term's periodic work: offer timeouts, agent health, framework
// failover timeouts, recovery, and an allocation cycle every allocation
// interval or soon after an event that may free or need resources.
func (m *Master) loop() {
	defer m.wg.Done()
	ticker := time.NewTicker(m.opts.AllocationInterval)
	defer ticker.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-m.done
		cancel()
	}()
	for {
		select {
		case <-m.done:
			return
		case <-ticker.C:
			expired := m.tick(time.Now())
			m.lastCycle = time.Now()
			if len(expired) > 0 {
				m.removeFrameworks(ctx, expired, "failover timeout passed")
			}
		case <-m.kick:
			// Events come in bursts (a framework declining many offers):
			// they share one cycle, and some time passes between cycles
			// (a tenth of the allocation interval, at most 100 ms) in which
			// calls have the master's lock.
			gap := min(m.opts.AllocationInterval/10, 100*time.Millisecond)
			if wait := time.Until(m.lastCycle.Add(gap)); wait > 0 {
				select {
				case <-time.After(wait):
				case <-m.done:
					return
				}
			}
			m.allocate(time.Now())
			m.lastCycle = time.Now()
		}
	}
}

// tick does the periodic checks and an allocation cycle. It returns the
// frameworks to remove, which needs Raft and so happens without m.mu.
func (m *Master) tick(now time.Time) []string {
	m.mu.Lock()
	m.expireOffers(now)
	m.checkAgents(now)
	m.checkRecovery(now)
	expired := m.expiredFrameworks(now)
	m.mu.Unlock()
	m.allocate(now)
	return expired
}

// allocate runs one allocation cycle and sends its offers, unless recovery
// holds offers back.
func (m *Master) allocate(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.recovery.active {
		return
	}
	start := time.Now()
	offers := m.alloc.Allocate(now)
	if m.opts.ObserveCycle != nil {
		m.opts.ObserveCycle(time.Since(start))
	}
	m.sendOffers(offers, now)
}
