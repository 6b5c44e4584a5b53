package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

// A join's X-Allot-Store-Version header is what the joiner says of itself:
// it gates the join, but only the leader's poll of a server's GET
// /v1/health raises the version the leader counts it at. A dry run, or a
// join refused before the configuration changes, leaves that version as it
// was; a header that did raise it would have the leader stamp writes the
// server may not read.
func TestJoinHeaderNeverRaisesAServersVersion(t *testing.T) {
	s := startDev(t)
	body := `{"id": "m2", "raft_address": "127.0.0.1:1", "api_address": "http://127.0.0.1:1"}`
	newest := strconv.FormatUint(uint64(raftstore.StoreVersion), 10)
	for _, tc := range []struct {
		name    string
		path    string
		headers []string
		want    int
	}{
		{"a dry run", "/v1/cluster/servers?dry_run=true", []string{"X-Allot-Store-Version", newest}, http.StatusOK},
		{"a join refused for its If-Match", "/v1/cluster/servers", []string{"X-Allot-Store-Version", newest, "If-Match", "1"}, http.StatusBadRequest},
		{"a join of an older server", "/v1/cluster/servers", []string{"X-Allot-Store-Version", "1"}, http.StatusConflict},
	} {
		a := call(t, s, http.MethodPost, tc.path, body, tc.headers...)
		if a.status != tc.want {
			t.Fatalf("%s: %d %s, want %d", tc.name, a.status, a.body, tc.want)
		}
		if v := s.node.ServerVersion("m2"); v != 1 {
			t.Fatalf("%s raised m2's store version to %d: only the leader's poll may", tc.name, v)
		}
	}
	servers, err := s.node.Servers()
	if err != nil || len(servers) != 1 {
		t.Fatalf("the configuration changed: %v, %v", servers, err)
	}
}

// A cluster whose committed store version is below the version every server
// runs moves up without waiting for a client's write: a restored backup of
// a version 1 cluster, which already holds this server's record as it is,
// leaves this server's state at version 1, and the leader's poll commits
// the newer version.
func TestLeaderCommitsTheVersionItsServersRun(t *testing.T) {
	// The backup's agents never connect: their ping timeout would write.
	s := startDev(t, func(c *Config) { c.AgentPingTimeout = time.Hour })
	raw, err := os.ReadFile("../../../raftstore/testdata/snapshot-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	// This server's own record, as it would write it: so that recording
	// itself after the restore writes nothing.
	doc["servers"] = []map[string]any{{"id": s.cfg.ID, "raft_address": s.node.RaftAddress(), "api_address": s.APIAddress(), "version": 1}}
	state, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var backup bytes.Buffer
	w, err := api.NewSnapshotWriter(&backup, api.SnapshotHeader{StoreVersion: 1, RulesVersion: 1, Format: 1, Index: 21, Server: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(state); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if a := restore(t, s, backup.Bytes(), ""); a.status != http.StatusOK {
		t.Fatalf("restore of a version 1 backup: %d %s", a.status, a.body)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var cluster api.Cluster
		a := call(t, s, http.MethodGet, "/v1/cluster", "")
		decode(t, a.body, &cluster)
		if cluster.StoreVersion == raftstore.StoreVersion {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /v1/cluster after the restore: %d %s; want store_version %d without a client's write", a.status, a.body, raftstore.StoreVersion)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
