package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
	"github.com/allot/allot/raftstore"
)

// Backups (GET and PUT /v1/snapshot) between real clusters: what one saves,
// a new one restores, every object, version and audit entry intact.

// listPaths are the reads whose answers a restore must reproduce exactly.
var listPaths = []string{"/v1/quotas", "/v1/roles", "/v1/reservations", "/v1/ratelimits", "/v1/ratelimits-default",
	"/v1/agents", "/v1/acl/policies", "/v1/acl/tokens", "/v1/audit"}

// readLists answers every list of listPaths from the server at addr (stale
// reads its own state), as status and JSON text (the default rate limit may
// be absent: 404).
func readLists(t testing.TB, addr, token string, stale bool) (map[string]string, error) {
	t.Helper()
	out := map[string]string{}
	for _, path := range listPaths {
		if stale {
			path += "?stale=true"
		}
		a := aclDo(t, "GET", addr+path, token, "")
		if a.status != http.StatusOK && a.status != http.StatusNotFound {
			return nil, fmt.Errorf("GET %s: %d %s", path, a.status, a.body)
		}
		out[strings.TrimSuffix(path, "?stale=true")] = fmt.Sprintf("%d %s", a.status, a.body)
	}
	return out, nil
}

// sameLists says how got differs from want ("" when it does not).
func sameLists(got, want map[string]string) string {
	for _, path := range listPaths {
		if got[path] != want[path] {
			return fmt.Sprintf("GET %s:\n%s\nwant\n%s", path, got[path], want[path])
		}
	}
	return ""
}

// backupOf is a backup of the cluster at addr, "" when it cannot be had
// (the caller's request then fails visibly).
func backupOf(addr, token string) string {
	req, err := http.NewRequest("GET", addr+api.SnapshotPath, nil)
	if err != nil {
		return ""
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return ""
	}
	return string(body)
}

func tokenClient(t testing.TB, token string, addrs ...string) *api.Client {
	t.Helper()
	cl, err := api.NewClient(addrs, token)
	if err != nil {
		t.Fatal(err)
	}
	cl.RetryFor = 20 * time.Second
	return cl
}

// saveBackup saves a backup of c through server i (a follower passes it on
// to the leader) into a file, and returns the file and the index it
// reflects.
func saveBackup(t *testing.T, c *testcluster.Cluster, i int, token string) (string, uint64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "allot.snap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	index, err := tokenClient(t, token, c.Address(i)).SaveSnapshot(ctx, f)
	if err != nil {
		t.Fatalf("save a backup through %s: %v", c.ID(i), err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path, index
}

// restoreBackup restores the backup file into c through server i.
func restoreBackup(t *testing.T, c *testcluster.Cluster, i int, token, path string) uint64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	restored, err := tokenClient(t, token, c.Address(i)).RestoreSnapshot(ctx, f)
	if err != nil {
		t.Fatalf("restore the backup through %s: %v", c.ID(i), err)
	}
	return restored.Index
}

// checkRestored holds the cluster c, into which a backup of index index
// was restored, to want: the leader answers it, every follower's own state
// comes to answer it, its servers are its own, and a write after the
// restore works and gets a version above the backup's index.
func checkRestored(t *testing.T, c *testcluster.Cluster, token string, index uint64, want map[string]string) {
	t.Helper()
	leader := waitLeader(t, c)
	got, err := readLists(t, c.Address(leader), token, false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := sameLists(got, want); diff != "" {
		t.Errorf("the new cluster's leader, after the restore: %s", diff)
	}
	for _, i := range c.Followers() {
		eventually(t, c.ID(i)+"'s own state to answer what the backup holds", func() error {
			got, err := readLists(t, c.Address(i), token, true)
			if err != nil {
				return err
			}
			if diff := sameLists(got, want); diff != "" {
				return errors.New(diff)
			}
			return nil
		})
	}
	info, err := c.ClusterInfo(context.Background(), leader)
	if err != nil {
		t.Fatal(err)
	}
	for _, srv := range info.Servers {
		if i := indexOfServer(c, srv.ID); i < 0 || srv.APIAddress != c.Address(i) {
			t.Errorf("after the restore GET /v1/cluster lists %+v: the restoring cluster's own servers must stay", srv)
		}
	}
	var q api.Quota
	aclMust(t, "PUT", c.Address(c.Followers()[0])+"/v1/quotas/after-restore", token, `{"limits": {"cpus": 1}}`, &q)
	if q.Version <= index {
		t.Errorf("a write after the restore got version %d, not above the backup's index %d", q.Version, index)
	}
}

// waitStoreVersion waits until the leader has heard that every server runs
// this tree's store version: until then writes that need it are refused.
func waitStoreVersion(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	eventually(t, "the leader to hear every server's store version", func() error {
		info, err := c.ClusterInfo(context.Background(), waitLeader(t, c))
		if err != nil {
			return err
		}
		for _, srv := range info.Servers {
			if srv.StoreVersion != raftstore.StoreVersion {
				return fmt.Errorf("server %s: store version %d", srv.ID, srv.StoreVersion)
			}
		}
		return nil
	})
}

func indexOfServer(c *testcluster.Cluster, id string) int {
	for i := range c.N() {
		if c.ID(i) == id {
			return i
		}
	}
	return -1
}

// TestBackupRestoresIntoANewCluster saves a 3-server ACL cluster holding
// every kind of object and restores the backup into a new 3-server
// cluster, both through followers: every list answers identical objects
// with identical versions and the identical audit trail, on the leader and
// from every follower's own state; the backup's tokens work there. Before
// that, every kind of bad file is refused and changes nothing.
func TestBackupRestoresIntoANewCluster(t *testing.T) {
	old, oldLeader := startACLCluster(t, 3, "-test-hooks")
	waitStoreVersion(t, old)
	addr := old.Address(oldLeader)
	for _, w := range []struct{ method, path, body string }{
		{"PUT", "/v1/test/agents/node-1", `{"hostname": "node-1.example", "resources": {"cpus": 16, "mem": 65536}}`},
		{"PUT", "/v1/quotas/eng", `{"guarantees": {"cpus": 4}, "limits": {"cpus": 12, "mem": 32768}}`},
		{"PUT", "/v1/quotas/eng/ml", `{"guarantees": {"cpus": 2}, "limits": {"cpus": 8}}`},
		{"PUT", "/v1/roles/eng/ml", `{"weight": 2.5, "lending_limit": {"cpus": 1}}`},
		{"PUT", "/v1/reservations/db-1", `{"agent": "node-1", "role": "db", "resources": {"cpus": 2, "mem": 4096}}`},
		{"PUT", "/v1/reservations/later", `{"agent": "node-9", "role": "db", "resources": {"cpus": 1}, "force": true}`},
		{"PUT", "/v1/ratelimits/spark", `{"qps": 55.5, "burst": 10, "capacity": 1000}`},
		{"PUT", "/v1/ratelimits/spark/labels/nightly", `{"qps": 5}`},
		{"PUT", "/v1/ratelimits-default", `{"qps": 33.3}`},
		{"DELETE", "/v1/quotas/eng/ml", ``},
		{"PUT", "/v1/quotas/eng/ml", `{"limits": {"cpus": 6}}`},
	} {
		aclMust(t, w.method, addr+w.path, aclOperatorToken, w.body, nil)
	}
	readerSecret := newToken(t, addr, "reader", "auditor", api.ACLRule{Object: api.ACLObjectQuota, Access: api.ACLRead, Roles: []string{"eng/*"}})
	want, err := readLists(t, addr, aclOperatorToken, false)
	if err != nil {
		t.Fatal(err)
	}
	path, index := saveBackup(t, old, old.Followers()[0], aclOperatorToken)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	c, leader := startACLCluster(t, 3, "-test-hooks")
	aclMust(t, "PUT", c.Address(leader)+"/v1/quotas/mine", aclOperatorToken, `{"limits": {"cpus": 1}}`, nil)
	before, err := readLists(t, c.Address(leader), aclOperatorToken, false)
	if err != nil {
		t.Fatal(err)
	}
	follower := c.Address(c.Followers()[0])
	t.Run("bad files are refused and change nothing", func(t *testing.T) {
		checkBadBackups(t, follower, good)
		after, err := readLists(t, c.Address(leader), aclOperatorToken, false)
		if err != nil {
			t.Fatal(err)
		}
		if diff := sameLists(after, before); diff != "" {
			t.Fatalf("refused restores changed the state: %s", diff)
		}
	})

	if got := restoreBackup(t, c, c.Followers()[0], aclOperatorToken, path); got != index {
		t.Errorf("the restore answered index %d, the backup holds %d", got, index)
	}
	checkRestored(t, c, aclOperatorToken, index, want)
	// The backup's token, which the new cluster never made, works there.
	var self api.ACLToken
	aclMust(t, "GET", c.Address(leader)+api.ACLTokenSelfPath, readerSecret, "", &self)
	if self.Accessor != "reader" || self.Principal != "auditor" {
		t.Errorf("the backup's token reads as %+v", self)
	}

	// The restored state is on disk: the leader that installed it, killed
	// and started again, comes back with it (its log has a hole where the
	// restore was, its snapshot covers it).
	installer := waitLeader(t, c)
	if err := c.Kill(installer); err != nil {
		t.Fatal(err)
	}
	now, err := readLists(t, c.Address(waitLeader(t, c)), aclOperatorToken, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(installer); err != nil {
		t.Fatal(err)
	}
	eventually(t, c.ID(installer)+", restarted, to hold the restored state", func() error {
		if _, err := c.ClusterInfo(context.Background(), installer); err != nil {
			return err // not listening yet
		}
		got, err := readLists(t, c.Address(installer), aclOperatorToken, true)
		if err != nil {
			return err
		}
		if diff := sameLists(got, now); diff != "" {
			return errors.New(diff)
		}
		return nil
	})
}

// checkBadBackups sends every kind of bad file to addr: each is refused
// with 400 invalid_argument and a message that names what is wrong.
func checkBadBackups(t *testing.T, addr string, good []byte) {
	t.Helper()
	lines := strings.SplitN(string(good), "\n", 3)
	doc := lines[2][:len(lines[2])-len("sha256 ")-2*sha256.Size-1]
	withChecksum := func(body string) string {
		sum := sha256.Sum256([]byte(body))
		return body + "sha256 " + hex.EncodeToString(sum[:]) + "\n"
	}
	altered := bytes.Clone(good)
	i := bytes.Index(altered, []byte(`"qps": 55.5`))
	copy(altered[i:], `"qps": 99.5`)
	newer := strings.Replace(lines[1], `"rules_version":3`, `"rules_version":4`, 1)
	for name, tc := range map[string]struct{ body, says string }{
		"an empty body":         {"", "empty"},
		"not a backup":          {`{"quotas": []}`, "not an allot backup"},
		"cut short":             {string(good[:len(good)*2/3]), "truncated"},
		"altered":               {string(altered), "checksum does not match"},
		"a newer file format":   {"allot-snapshot 2\n" + lines[1] + "\n" + lines[2], "file version 2"},
		"a newer store version": {withChecksum(lines[0] + "\n" + newer + "\n" + doc), "store version 4"},
		"an object no write stores": {withChecksum(lines[0] + "\n" + lines[1] + "\n" + strings.Replace(doc, `"qps": 55.5`, `"qps": -55.5`, 1)),
			"qps must be greater than 0"},
	} {
		a := aclDo(t, "PUT", addr+api.SnapshotPath, aclOperatorToken, tc.body)
		if a.status != http.StatusBadRequest || a.code() != api.CodeInvalidArgument || !strings.Contains(string(a.body), tc.says) {
			t.Errorf("%s: %d %s, want 400 invalid_argument saying %q", name, a.status, a.body, tc.says)
		}
	}
}
