package server

import (
	"fmt"
	"net/http"
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
