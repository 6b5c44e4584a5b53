package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
	"github.com/allot/allot/raftstore"
)

// A cluster whose servers all run this release reaches its store version
// without a client's write (the bootstrapping server's own record, or, when
// the others joined before it was written, the leader's poll), the leader hears
// every server's version, and a server of an older version may not join.
// (The mixed-release path is the rolling-upgrade test's.)
func TestClusterMovesToItsStoreVersionAndRefusesOlderServers(t *testing.T) {
	c := testcluster.Start(t, 3)
	leader := waitLeader(t, c)
	ctx := context.Background()

	var health struct {
		Status       string `json:"status"`
		StoreVersion uint32 `json:"store_version"`
	}
	resp, err := http.Get(c.Address(leader) + "/v1/health")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&health)
	resp.Body.Close()
	if err != nil || health.StoreVersion != raftstore.StoreVersion {
		t.Fatalf("GET /v1/health: %+v, %v; want store_version %d", health, err, raftstore.StoreVersion)
	}

	eventually(t, "the leader to hear every server's store version", func() error {
		info, err := c.ClusterInfo(ctx, waitLeader(t, c))
		if err != nil {
			return err
		}
		for _, s := range info.Servers {
			if s.StoreVersion != raftstore.StoreVersion {
				return fmt.Errorf("%s: store_version %d", s.ID, s.StoreVersion)
			}
		}
		return nil
	})
	for i := range c.N() {
		eventually(t, c.ID(i)+" to show the cluster's store version", func() error {
			info, err := c.ClusterInfo(ctx, i)
			if err != nil {
				return err
			}
			if info.StoreVersion != raftstore.StoreVersion {
				return fmt.Errorf("store_version %d", info.StoreVersion)
			}
			return nil
		})
	}

	// A server of store version 1 asking to join: refused, naming both.
	body, _ := json.Marshal(api.AddServerRequest{ID: "m4", RaftAddress: freeAddr(t), APIAddress: "http://" + freeAddr(t)})
	for _, header := range []string{"", "1"} {
		req, _ := http.NewRequest(http.MethodPost, c.Address(leader)+"/v1/cluster/servers", bytes.NewReader(body))
		if header != "" {
			req.Header.Set("X-Allot-Store-Version", header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusConflict || !strings.Contains(string(data), "runs store version 1") {
			t.Fatalf("join of a version 1 server (header %q): %s %s", header, resp.Status, data)
		}
	}
	info, err := c.ClusterInfo(ctx, leader)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Servers) != 3 {
		t.Fatalf("the refused join changed the configuration: %+v", info.Servers)
	}
	checkAddServerSendsStoreVersion(t, c)
}

// checkAddServerSendsStoreVersion adds a server started with neither
// -bootstrap nor -join, as an operator does, through api.Client.AddServer:
// with the store version the server's health answers, it joins; said to be
// version 1, it is refused, as a server of a release before store versions.
func checkAddServerSendsStoreVersion(t *testing.T, c *testcluster.Cluster) {
	ctx := context.Background()
	bin, err := testcluster.Build("")
	if err != nil {
		t.Fatal(err)
	}
	httpAddr, raftAddr := freeAddr(t), freeAddr(t)
	d := startDaemon(t, bin, "-id", "m4", "-data-dir", filepath.Join(t.TempDir(), "data"), "-http", httpAddr, "-raft", raftAddr)
	d.waitLog(t, "waiting to be added to a cluster")
	var health struct {
		StoreVersion uint32 `json:"store_version"`
	}
	eventually(t, "m4 to answer GET /v1/health", func() error {
		resp, err := http.Get("http://" + httpAddr + "/v1/health")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&health)
	})
	admin := client(t, c.Addresses()...)
	req := api.AddServerRequest{ID: "m4", RaftAddress: raftAddr, APIAddress: "http://" + httpAddr}
	if err := admin.AddServer(ctx, req, 1); api.ErrorCode(err) != api.CodeConflict {
		t.Fatalf("AddServer of m4 said to run store version 1: %v, want a conflict", err)
	}
	if err := admin.AddServer(ctx, req, health.StoreVersion); err != nil {
		t.Fatalf("AddServer of m4 at store version %d: %v", health.StoreVersion, err)
	}
	eventually(t, "m4 to be a voter", func() error {
		info, err := c.ClusterInfo(ctx, waitLeader(t, c))
		if err != nil {
			return err
		}
		for _, s := range info.Servers {
			if s.ID == "m4" && s.Suffrage == "voter" {
				return nil
			}
		}
		return fmt.Errorf("servers %+v", info.Servers)
	})
}

func ptr[T any](v T) *T { return &v }
