package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
	"github.com/allot/allot/raftstore"
)

// postServer sends POST /v1/cluster/servers (forwarded to the leader by
// whichever server gets it) as a joining masterd of this release does, and
// returns the status and the decoded error.
func postServer(t *testing.T, addr string, req api.AddServerRequest, dryRun bool) (int, *api.Error) {
	t.Helper()
	body, _ := json.Marshal(req)
	url := addr + "/v1/cluster/servers"
	if dryRun {
		url += "?dry_run=true"
	}
	post, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	post.Header.Set("X-Allot-Store-Version", fmt.Sprint(raftstore.StoreVersion))
	resp, err := http.DefaultClient.Do(post)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, nil
	}
	var e api.ErrorBody
	if err := json.Unmarshal(data, &e); err != nil || e.Error == nil {
		t.Fatalf("POST %s: %s: not an error body: %s", url, resp.Status, data)
	}
	return resp.StatusCode, e.Error
}

// raftAddressOf is id's Raft address in the configuration server i sees.
func raftAddressOf(t *testing.T, c *testcluster.Cluster, i int, id string) string {
	t.Helper()
	info, err := c.ClusterInfo(context.Background(), i)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range info.Servers {
		if s.ID == id {
			return s.RaftAddress
		}
	}
	return ""
}

func TestJoinUnderALiveMembersIDIsRefusedAndADeadOneIsReplacedExplicitly(t *testing.T) {
	c := testcluster.Start(t, 3)
	waitLeader(t, c)
	const m2 = 1
	live := c.RaftAddress(m2)

	// A second "masterd -id m2 ... -join" while m2 runs: refused, and the
	// impostor exits saying why instead of taking over m2's Raft address.
	impostor := startDaemon(t, masterdBinary(t), "-id", c.ID(m2), "-data-dir", t.TempDir(), "-http", freeAddr(t),
		"-raft", freeAddr(t), "-join", strings.Join(c.Addresses(), ","))
	if code := impostor.waitExit(t); code == 0 {
		t.Fatalf("the impostor m2 exited 0:\n%s", impostor.logText())
	}
	if log := impostor.logText(); !strings.Contains(log, "server m2 is a live member at "+live) {
		t.Fatalf("the impostor's log does not say that m2 is live at %s:\n%s", live, log)
	}
	for _, i := range []int{0, 2} {
		if got := raftAddressOf(t, c, i, "m2"); got != live {
			t.Fatalf("%s sees m2 at %s after the refused join, want %s", c.ID(i), got, live)
		}
	}

	// Through the API, even asking to replace: 409 naming the id and the
	// live address; the same with a dry run.
	other := api.AddServerRequest{ID: "m2", RaftAddress: freeAddr(t), APIAddress: "http://" + freeAddr(t), Replace: true}
	for _, dry := range []bool{false, true} {
		status, e := postServer(t, c.Address(0), other, dry)
		if status != http.StatusConflict || e.Code != api.CodeConflict || !strings.Contains(e.Message, "m2") ||
			!strings.Contains(e.Message, live) || e.Details["live"] != true {
			t.Fatalf("replace a live m2 (dry run %v): %d %+v, want 409 conflict naming m2 and %s", dry, status, e, live)
		}
	}
	// Another id on m3's Raft address is refused too.
	status, e := postServer(t, c.Address(0), api.AddServerRequest{ID: "m9", RaftAddress: c.RaftAddress(2), APIAddress: "http://" + freeAddr(t)}, false)
	if status != http.StatusConflict || !strings.Contains(e.Message, "belongs to member m3") {
		t.Fatalf("m9 on m3's raft address: %d %+v, want 409 naming m3", status, e)
	}
	// m2 itself joining again at its own address stays a no-op.
	if status, e := postServer(t, c.Address(0), api.AddServerRequest{ID: "m2", RaftAddress: live, APIAddress: c.Address(m2)}, false); status != http.StatusOK {
		t.Fatalf("m2 re-joining at its own address: %d %+v", status, e)
	}

	// m2's host dies. Once the leader has not heard from it for a while, a
	// join without -replace is still refused, saying how to replace it.
	if err := c.Kill(m2); err != nil {
		t.Fatal(err)
	}
	eventually(t, "m2 counts as gone for the leader", func() error {
		status, e := postServer(t, c.Address(0), other, true)
		if status != http.StatusOK {
			return fmt.Errorf("%d %v", status, e)
		}
		return nil
	})
	plain := other
	plain.Replace = false
	if status, e := postServer(t, c.Address(0), plain, false); status != http.StatusConflict ||
		!strings.Contains(e.Message, "join with -replace") || e.Details["live"] != false {
		t.Fatalf("join under a dead m2's id without replace: %d %+v, want 409 saying to use -replace", status, e)
	}

	// The replacement host joins with -replace and takes m2's place.
	newRaft, newHTTP := freeAddr(t), freeAddr(t)
	replacement := startDaemon(t, masterdBinary(t), "-id", "m2", "-data-dir", t.TempDir(), "-http", newHTTP,
		"-raft", newRaft, "-join", strings.Join(c.Addresses(), ","), "-replace")
	replacement.waitLog(t, "joined the cluster")
	for _, i := range []int{0, 2} {
		if got := raftAddressOf(t, c, i, "m2"); got != newRaft {
			t.Fatalf("%s sees m2 at %s after the replacement, want %s", c.ID(i), got, newRaft)
		}
	}
	q, err := client(t, c.Address(0)).PutQuota(context.Background(), "after-replace", api.QuotaRequest{Limits: api.Resources{"cpus": 1}}, api.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the replacement m2 replicates", func() error {
		got, err := client(t, "http://"+newHTTP).Quota(context.Background(), "after-replace", api.ReadOptions{Stale: true})
		if err != nil {
			return err
		}
		if got.Version != q.Version {
			return fmt.Errorf("version %d, want %d", got.Version, q.Version)
		}
		return nil
	})
}
