package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/tlsutil"
	"github.com/allot/allot/masterd/testcluster"
)

// tlsClient is a client of a WithTLS cluster: the cluster's CA and its
// client certificate.
func tlsClient(t testing.TB, c *testcluster.Cluster, token string, addrs ...string) *api.Client {
	t.Helper()
	cl, err := api.NewClient(addrs, token)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := c.ClientTLS().Config()
	if err != nil {
		t.Fatal(err)
	}
	cl.SetTLS(cfg)
	cl.RetryFor = 20 * time.Second
	return cl
}

// TestTLSClusterMutualRaftAndHTTPS runs three real masterd processes with
// HTTPS (client certificates required), mutual-TLS Raft and ACLs (writes
// with the bootstrap token; the harness reads with an -operator-token): writes go
// through every server (followers forward over TLS), the leader is killed
// and replaced while writes go on, the killed server restarts and catches
// up; Raft peers that are not servers of the CA are refused with a log line
// and change nothing, and plaintext or certificate-less API clients are
// refused.
func TestTLSClusterMutualRaftAndHTTPS(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.WithTLS(), testcluster.WithArgs("-tls-verify-incoming", "-acl"),
		testcluster.WithOperatorToken("tls-test-operator"))
	leader := waitLeader(t, c)
	ctx := context.Background()
	boot, err := tlsClient(t, c, "", c.Address(c.Followers()[0])).ACLBootstrap(ctx)
	if err != nil {
		t.Fatalf("ACL bootstrap over TLS: %v", err)
	}
	token := boot.Secret
	if _, err := tlsClient(t, c, "", c.Address(leader)).PutQuota(ctx, "no-token", api.QuotaRequest{Limits: api.Resources{"cpus": 1}}, api.WriteOptions{}); api.ErrorCode(err) != api.CodeUnauthenticated {
		t.Fatalf("a write without a token: %v, want unauthenticated", err)
	}
	for _, addr := range c.Addresses() {
		if !strings.HasPrefix(addr, "https://") {
			t.Fatalf("server address %s is not https", addr)
		}
	}

	// Every server takes writes: the followers forward them to the leader
	// over TLS with their own certificate.
	for i := range c.N() {
		if _, err := tlsClient(t, c, token, c.Address(i)).PutQuota(ctx, "via-"+c.ID(i), api.QuotaRequest{Limits: api.Resources{"cpus": 1}}, api.WriteOptions{}); err != nil {
			t.Fatalf("write through %s: %v", c.ID(i), err)
		}
	}

	t.Run("api_refuses_plaintext_and_anonymous_clients", func(t *testing.T) {
		addr := strings.TrimPrefix(c.Address(leader), "https://")
		resp, err := http.Get("http://" + addr + "/v1/health")
		if err != nil {
			t.Fatalf("plaintext request: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var answer api.ErrorBody
		if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(body, &answer) != nil || answer.Error == nil ||
			!strings.Contains(answer.Error.Message, "HTTPS") {
			t.Fatalf("plaintext request answered %s %s, want 400 saying the server speaks HTTPS", resp.Status, body)
		}
		// The CA but no client certificate: -tls-verify-incoming refuses it.
		cl, _ := api.NewClient([]string{c.Address(leader)}, "")
		cl.RetryFor = 0
		cfg, err := api.TLSFiles{CAFile: c.ClientTLS().CAFile}.Config()
		if err != nil {
			t.Fatal(err)
		}
		cl.SetTLS(cfg)
		if err := health(ctx, cl); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("a client without a certificate was served under -tls-verify-incoming: %v", err)
		}
		// The same client with the certificate is served: the refusal
		// above was about the certificate.
		full, err := c.ClientTLS().Config()
		if err != nil {
			t.Fatal(err)
		}
		cl.SetTLS(full)
		if err := health(ctx, cl); err != nil {
			t.Fatalf("a client with the CA and a client certificate: %v", err)
		}
		// No CA: the client does not trust the server.
		cl, _ = api.NewClient([]string{c.Address(leader)}, "")
		cl.RetryFor = 0
		if err := health(ctx, cl); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("a client without the CA reached the server: %v", err)
		}
	})

	t.Run("raft_refuses_peers_that_are_not_servers_of_the_ca", func(t *testing.T) {
		before, err := c.ClusterInfo(ctx, leader)
		if err != nil {
			t.Fatal(err)
		}
		logBefore := refusals(t, c.LogPath(leader))

		// A real Raft RPC, a vote request with a far higher term: had it
		// reached Raft, the leader would have stepped down.
		vote := func(trans *raft.NetworkTransport) error {
			var resp raft.RequestVoteResponse
			return trans.RequestVote(raft.ServerID(c.ID(leader)), raft.ServerAddress(c.RaftAddress(leader)), &raft.RequestVoteRequest{
				RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte(trans.LocalAddr())},
				Term:      1 << 20, LastLogIndex: 1 << 30, LastLogTerm: 1 << 20,
			}, &resp)
		}
		plain, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 5*time.Second, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		if err := vote(plain); err == nil {
			t.Fatal("a plaintext Raft peer's vote request was answered")
		}
		otherCA := otherCAServer(t, c.ClientTLS().CAFile)
		stream, err := tlsutil.NewStreamLayer("127.0.0.1:0", otherCA, hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		foreign := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: stream, MaxPool: 1, Timeout: 5 * time.Second, Logger: hclog.NewNullLogger()})
		defer foreign.Close()
		if err := vote(foreign); err == nil {
			t.Fatal("a Raft peer with another CA's certificate had its vote request answered")
		}

		eventually(t, "both refusals in the leader's log", func() error {
			lines := refusals(t, c.LogPath(leader))[len(logBefore):]
			joined := strings.Join(lines, "\n")
			if !strings.Contains(joined, "does not look like a TLS handshake") || !strings.Contains(joined, "unknown authority") {
				return fmt.Errorf("refusals logged since: %q", lines)
			}
			for _, l := range lines {
				if !strings.Contains(l, "remote=127.0.0.1:") {
					return fmt.Errorf("a refusal names no remote address: %s", l)
				}
			}
			return nil
		})
		after, err := c.ClusterInfo(ctx, leader)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(before.Servers, after.Servers, func(a, b api.Server) bool {
			return a.ID == b.ID && a.RaftAddress == b.RaftAddress && a.Suffrage == b.Suffrage
		}) || after.Leader == nil || after.Leader.ID != c.ID(leader) {
			t.Fatalf("membership or leadership moved: before %+v, after %+v", before, after)
		}
	})

	// Writes through every address while the leader is killed: every
	// acknowledged one survives.
	cl := tlsClient(t, c, token, c.Addresses()...)
	acked, killedAt, newLeader := writesSurviveLeaderKill(t, c, leader, cl, 3, 50,
		func(addr string) *api.Client { return tlsClient(t, c, token, addr) })

	// The killed server restarts over mutual TLS and catches up.
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	last, err := cl.PutQuota(ctx, "after-restart", api.QuotaRequest{Limits: api.Resources{"cpus": 2}}, api.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	restarted := tlsClient(t, c, token, c.Address(leader))
	eventually(t, "the restarted server catches up", func() error {
		q, err := restarted.Quota(ctx, "after-restart", api.ReadOptions{Stale: true})
		if err != nil {
			return err
		}
		if q.Version != last.Version {
			return fmt.Errorf("version %d, want %d", q.Version, last.Version)
		}
		return nil
	})
	waitLeader(t, c)
	t.Logf("%d acknowledged writes over TLS, %d before the leader %s was killed; new leader %s", acked, killedAt, c.ID(leader), c.ID(newLeader))
}

// health is GET /v1/health, a call any client may make.
func health(ctx context.Context, cl *api.Client) error {
	_, err := cl.Do(ctx, api.Request{Method: http.MethodGet, Path: "/v1/health"}, nil)
	return err
}

// refusals are the Raft refusal lines of a server's log.
func refusals(t *testing.T, logPath string) []string {
	t.Helper()
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, "refused a raft peer") {
			lines = append(lines, l)
		}
	}
	return lines
}

// otherCAServer is a well-formed server certificate (server.allot and all)
// from a CA the cluster does not trust, held by a peer that trusts the
// cluster's CA (clusterCA) besides its own: so the handshake fails on the
// cluster's side, not the intruder's.
func otherCAServer(t *testing.T, clusterCA string) *tlsutil.Material {
	t.Helper()
	dir := t.TempDir()
	ca, err := tlsutil.NewAuthority("another CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Write(dir); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(tlsutil.CertRequest{Name: "intruder", Hosts: []string{"127.0.0.1"}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := tlsutil.WriteCert(dir, "intruder", certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	trusted, err := os.ReadFile(clusterCA)
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "bundle.pem")
	if err := os.WriteFile(bundle, append(append([]byte{}, ca.CertPEM...), trusted...), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, key := tlsutil.CertFiles(dir, "intruder")
	m, err := tlsutil.Load(tlsutil.Config{CertFile: cert, KeyFile: key, CAFile: bundle})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
