package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/allot/allot/masterd/api"
)

// staleRead is one stale read's outcome.
type staleRead struct {
	status int
	index  uint64
}

// getIndexed is a GET safe to call from any goroutine.
func getIndexed(url, token string) (staleRead, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return staleRead{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return staleRead{}, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	index, err := strconv.ParseUint(resp.Header.Get(api.HeaderIndex), 10, 64)
	if err != nil {
		return staleRead{}, fmt.Errorf("GET %s: %s %q: %w", url, resp.Status, api.HeaderIndex, err)
	}
	return staleRead{status: resp.StatusCode, index: index}, nil
}

// TestACLTokensAcrossServers: a token made a moment ago works through every
// server of a 3-server cluster at once; once its DELETE returns, a
// linearizable call through any server is refused, and a stale read on a
// follower is refused from the moment that follower's state reaches the
// delete: every 200 it gave came with an index below the delete's.
func TestACLTokensAcrossServers(t *testing.T) {
	c, leader := startACLCluster(t, 3)
	addr := c.Address(leader)
	secret := newToken(t, addr, "reader", "", api.ACLRule{Object: api.ACLObjectQuota, Access: api.ACLRead},
		api.ACLRule{Object: api.ACLObjectCluster, Access: api.ACLRead})
	for i := range c.N() {
		// Passed on to the leader, and served by the follower itself.
		for _, path := range []string{"/v1/quotas", "/v1/cluster"} {
			if a := aclDo(t, "GET", c.Address(i)+path, secret, ""); a.status != 200 {
				t.Fatalf("GET %s through %s right after the token was made: %d %s", path, c.ID(i), a.status, a.body)
			}
		}
	}

	follower := c.Followers()[0]
	staleURL := c.Address(follower) + "/v1/quotas?stale=true"
	var (
		mu    sync.Mutex
		reads []staleRead
		errs  []error
		stop  = make(chan struct{})
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			r, err := getIndexed(staleURL, secret)
			mu.Lock()
			if err != nil {
				errs = append(errs, err)
			} else {
				reads = append(reads, r)
			}
			mu.Unlock()
		}
	}()

	del := aclMust(t, "DELETE", c.Address(follower)+api.ACLTokenPath("reader"), aclOperatorToken, "", nil)
	deleted := del.index()
	if deleted == 0 {
		t.Fatalf("the DELETE answered no %s", api.HeaderIndex)
	}
	for i := range c.N() {
		for _, path := range []string{"/v1/quotas", "/v1/cluster", api.ACLTokenSelfPath} {
			if a := aclDo(t, "GET", c.Address(i)+path, secret, ""); a.status != 401 {
				t.Errorf("GET %s through %s after the DELETE returned: %d %s, want 401", path, c.ID(i), a.status, a.body)
			}
		}
	}
	// The follower's stale reads turn to 401 once it applies the delete.
	eventually(t, "a stale read on the follower refused", func() error {
		r, err := getIndexed(staleURL, secret)
		if err != nil {
			return err
		}
		if r.status != 401 {
			return fmt.Errorf("stale read answered %d at index %d (delete at %d)", r.status, r.index, deleted)
		}
		return nil
	})
	close(stop)
	<-done

	mu.Lock()
	defer mu.Unlock()
	for _, err := range errs {
		t.Error(err)
	}
	refused := false
	for _, r := range reads {
		switch {
		case r.status == 200 && r.index >= deleted:
			t.Errorf("a stale read answered 200 at index %d, at or after the delete's %d", r.index, deleted)
		case r.status == 200 && refused:
			t.Errorf("a stale read answered 200 (index %d) after one was refused", r.index)
		case r.status == 401:
			refused = true
		case r.status != 200:
			t.Errorf("a stale read answered %d", r.status)
		}
	}
	t.Logf("%d stale reads on %s while the token was deleted at index %d", len(reads), c.ID(follower), deleted)
}
