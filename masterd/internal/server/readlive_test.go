package server

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/allot/allot/masterd/internal/master"
)

// blockingLive is the master's live state, except that RoleUsage and
// AgentUsage wait until the test releases them, as they wait for the
// master's lock through an allocation cycle.
type blockingLive struct {
	liveState
	entered chan struct{}
	release chan struct{}
}

// wait tells the test, the first time, that a list waits, and waits.
func (b *blockingLive) wait() {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
}

func (b *blockingLive) RoleUsage(role string) master.RoleUsage {
	b.wait()
	return b.liveState.RoleUsage(role)
}

func (b *blockingLive) AgentUsage(id string) master.AgentUsage {
	b.wait()
	return b.liveState.AgentUsage(id)
}

// TestListsReadLiveFiguresOutsideTheState: GET /v1/roles and /v1/agents
// wait for the master's live figures without holding the replicated state,
// so a write applied meanwhile does not wait behind them.
func TestListsReadLiveFiguresOutsideTheState(t *testing.T) {
	s := startDev(t)
	mustCall(t, s, "PUT", "/v1/test/agents/node-1", `{"hostname":"h1","resources":{"cpus":8,"mem":4096}}`)
	mustCall(t, s, "PUT", "/v1/quotas/eng", `{"guarantees":{"cpus":2},"limits":{"cpus":4}}`)
	live := &blockingLive{liveState: s.live, entered: make(chan struct{}, 1), release: make(chan struct{})}
	s.live = live

	for i, path := range []string{"/v1/roles", "/v1/agents"} {
		listed := make(chan answer, 1)
		go func() { listed <- call(t, s, "GET", path, "") }()
		<-live.entered // the list waits for the live figures
		wrote := make(chan answer, 1)
		go func() {
			wrote <- call(t, s, "PUT", "/v1/quotas/ops", fmt.Sprintf(`{"guarantees":{"cpus":1},"limits":{"cpus":%d}}`, 2+i))
		}()
		select {
		case a := <-wrote:
			if a.status != http.StatusOK {
				t.Fatalf("write while GET %s waits: %d %s", path, a.status, a.body)
			}
		case <-time.After(30 * time.Second):
			// Deadlock detection, not a timing: before, the write waited
			// for the state's lock, which the list held until released.
			close(live.release)
			t.Fatalf("a write waited 30 s behind GET %s", path)
		}
		close(live.release)
		a := <-listed
		if a.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, a.status, a.body)
		}
		select {
		case <-live.entered:
		default:
		}
		live.release = make(chan struct{})
	}
	s.live = live.liveState
}

// recordingLive is the master's live state, recording which of its calls
// the handlers make, in order.
type recordingLive struct {
	liveState
	mu    sync.Mutex
	calls []string
}

func (r *recordingLive) record(call string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call)
}

func (r *recordingLive) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	calls := r.calls
	r.calls = nil
	return calls
}

func (r *recordingLive) FollowedEarlyAcks() {
	r.record("followed")
	r.liveState.FollowedEarlyAcks()
}

func (r *recordingLive) LiveRoles() []string {
	r.record("live roles")
	return r.liveState.LiveRoles()
}

func (r *recordingLive) RoleUsage(role string) master.RoleUsage {
	r.record("usage")
	return r.liveState.RoleUsage(role)
}

func (r *recordingLive) AgentUsage(id string) master.AgentUsage {
	r.record("usage")
	return r.liveState.AgentUsage(id)
}

// TestLiveReadsFollowTheWritesBeforeThem: a quota write is acknowledged
// before the master follows it, so a read of live figures (not stale) and
// the leader's live views first wait for the master to follow the quota
// writes before them; a read of the replicated state alone does not wait
// for the master.
func TestLiveReadsFollowTheWritesBeforeThem(t *testing.T) {
	s := startDev(t)
	mustCall(t, s, "PUT", "/v1/test/agents/node-1", `{"hostname":"h1","resources":{"cpus":8,"mem":4096}}`)
	mustCall(t, s, "PUT", "/v1/quotas/eng", `{"guarantees":{"cpus":2},"limits":{"cpus":4}}`)
	live := &recordingLive{liveState: s.live}
	s.live = live
	defer func() { s.live = live.liveState }()

	for _, path := range []string{"/v1/roles", "/v1/roles/eng", "/v1/agents", "/v1/agents/node-1"} {
		mustCall(t, s, "GET", path, "")
		calls := live.take()
		if len(calls) < 2 || calls[0] != "followed" {
			t.Errorf("GET %s asked the live state %v, want to wait for the master to follow first, then the figures", path, calls)
		}
		// A stale read promises nothing of the kind.
		mustCall(t, s, "GET", path+"?stale=true", "")
		if calls := live.take(); slices.Contains(calls, "followed") {
			t.Errorf("GET %s?stale=true asked the live state %v, want no wait", path, calls)
		}
	}
	// The leader's live views (offers, frameworks, tasks) wait as well: the
	// offers a guarantee rescinds are gone from what its writer reads.
	for _, path := range []string{"/v1/offers", "/v1/frameworks", "/v1/tasks"} {
		mustCall(t, s, "GET", path, "")
		if calls := live.take(); !slices.Equal(calls, []string{"followed"}) {
			t.Errorf("GET %s asked the live state %v, want to wait for the master to follow", path, calls)
		}
	}
	mustCall(t, s, "GET", "/v1/cluster", "")
	if calls := live.take(); !slices.Equal(calls, []string{"followed"}) {
		t.Errorf("GET /v1/cluster asked the live state %v, want to wait for the master to follow", calls)
	}
	mustCall(t, s, "GET", "/v1/quotas/eng", "")
	if calls := live.take(); len(calls) != 0 {
		t.Errorf("GET /v1/quotas/eng asked the live state %v, want nothing", calls)
	}
}
