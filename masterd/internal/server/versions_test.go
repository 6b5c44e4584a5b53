package server

import (
	"net/http"
	"strconv"
	"testing"

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
