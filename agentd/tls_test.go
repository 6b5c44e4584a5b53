package main

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// TestAgentdRegistersOverTLS: agentd with -tls-ca, -tls-cert and -tls-key
// registers with masters that serve HTTPS and require client certificates
// (a follower's 307 to the leader is https too), and the masters list it as
// connected.
func TestAgentdRegistersOverTLS(t *testing.T) {
	c := testcluster.Start(t, 3, fastMaster, testcluster.WithTLS(), testcluster.WithArgs("-tls-verify-incoming"))
	if _, err := c.WaitLeader(context.Background()); err != nil {
		t.Fatal(err)
	}
	cert, key, err := c.IssueCert("agent-tls", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	// Only a follower's address: the registration follows its redirect.
	a := startAgent(t, []string{c.Address(c.Followers()[0])}, "tls-agent", "cpus:1;mem:256;disk:512",
		"-tls-ca", c.ClientTLS().CAFile, "-tls-cert", cert, "-tls-key", key)
	client, err := api.NewClient(c.Addresses(), "")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := c.ClientTLS().Config()
	if err != nil {
		t.Fatal(err)
	}
	client.SetTLS(cfg)
	eventually(t, "the agent is registered and connected", 60*time.Second, func() error {
		if len(a.logLines("agentd: registered:")) == 0 {
			return fmt.Errorf("agentd has not logged a registration")
		}
		agents, err := client.Agents(context.Background(), api.ReadOptions{})
		if err != nil {
			return err
		}
		for _, ag := range agents {
			if ag.Name == "tls-agent" && ag.Connected {
				return nil
			}
		}
		return fmt.Errorf("agents %+v", agents)
	})
}

// TestAgentdTLSFlagsRefused: TLS flags that cannot work are refused before
// agentd touches anything.
func TestAgentdTLSFlagsRefused(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"missing ca":       {[]string{"-tls-ca", dir + "/none.pem"}, "-tls-ca/-tls-cert/-tls-key"},
		"cert alone":       {[]string{"-tls-cert", dir + "/none.pem"}, "-tls-ca/-tls-cert/-tls-key"},
		"key alone":        {[]string{"-tls-key", dir + "/none.pem"}, "-tls-ca/-tls-cert/-tls-key"},
		"plaintext master": {[]string{"-tls-ca", writeCA(t, dir)}, "reached over https://"},
	} {
		t.Run(name, func(t *testing.T) {
			workDir := t.TempDir() + "/never-made"
			args := append(baseArgs(workDir), c.args...)
			if name == "plaintext master" {
				args = append(args, "-master", "http://127.0.0.1:5050")
			}
			err := run(args)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("agentd %s: %v, want an error with %q", strings.Join(c.args, " "), err, c.want)
			}
		})
	}
}

// writeCA writes a PEM certificate (httptest's own) to serve as a CA file.
func writeCA(t *testing.T, dir string) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	srv.StartTLS()
	defer srv.Close()
	path := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
