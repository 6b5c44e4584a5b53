package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// convergeWait bounds how long the servers may take to apply the same
// entries once the faults are healed.
const convergeWait = 30 * time.Second

// serverState is what one server serves from its own state: each key's
// value and version, and the Raft index it had applied.
type serverState struct {
	applied uint64
	keys    []string // "key=qps@version" per key, or "key absent"
}

// converge waits until every server serves the same state from its own
// copy (?stale=true, so each answers for itself, not through the leader)
// at the same applied index, and reports what differed if they never do.
func converge(ctx context.Context, c *testcluster.Cluster, keys []string) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, convergeWait)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	var last string
	for {
		states := make([]serverState, c.N())
		var err error
		for i := range c.N() {
			if states[i], err = stateOf(ctx, client, c.Address(i), keys); err != nil {
				break
			}
		}
		if err == nil {
			same := true
			for _, s := range states[1:] {
				same = same && s.applied == states[0].applied && slices.Equal(s.keys, states[0].keys)
			}
			if same {
				return true, ""
			}
			last = fmt.Sprintf("%+v", states)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return false, fmt.Sprintf("%v: %s", errDiverged, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func stateOf(ctx context.Context, client *http.Client, addr string, keys []string) (serverState, error) {
	var st serverState
	for _, key := range keys {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, addr+"/v1/ratelimits/"+key+"?stale=true", nil)
		resp, err := client.Do(req)
		if err != nil {
			return st, fmt.Errorf("stale read of %s from %s: %w", key, addr, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return st, fmt.Errorf("stale read of %s from %s: %w", key, addr, err)
		}
		applied, _ := strconv.ParseUint(resp.Header.Get(api.HeaderAppliedIndex), 10, 64)
		// The applied index is taken once per server, at its last key:
		// entries applied between two keys' reads show as a difference
		// of state, and the loop reads again.
		st.applied = applied
		switch resp.StatusCode {
		case http.StatusOK:
			var rl api.RateLimit
			if err := json.Unmarshal(body, &rl); err != nil || rl.QPS == nil {
				return st, fmt.Errorf("stale read of %s from %s: bad body %q", key, addr, body)
			}
			st.keys = append(st.keys, fmt.Sprintf("%s=%v@%d", key, *rl.QPS, rl.Version))
		case http.StatusNotFound:
			st.keys = append(st.keys, key+" absent")
		default:
			return st, fmt.Errorf("stale read of %s from %s: %s %s", key, addr, resp.Status, body)
		}
	}
	return st, nil
}
