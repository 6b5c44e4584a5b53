package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/allot/allot/masterd/api"
)

// TestTLSCommandMakesACAAndCertificates runs `masterd tls` as the guide
// does: a CA, a server certificate, a client certificate, keys 0600, nothing
// overwritten, and clear errors.
func TestTLSCommandMakesACAAndCertificates(t *testing.T) {
	bin := masterdBinary(t)
	dir := t.TempDir()
	run := func(wantCode int, args ...string) (string, string) {
		t.Helper()
		stdout, stderr, code := runMasterd(t, bin, args...)
		if code != wantCode {
			t.Fatalf("masterd %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, wantCode, stdout, stderr)
		}
		return stdout, stderr
	}
	run(0, "tls", "ca", "-out", dir)
	run(0, "tls", "cert", "-ca", dir, "-name", "m1", "-hosts", "127.0.0.1,localhost", "-server", "-out", dir)
	run(0, "tls", "cert", "-ca", dir, "-name", "agent", "-client", "-out", dir)
	for _, name := range []string{"ca.pem", "ca-key.pem", "m1.pem", "m1-key.pem", "agent.pem", "agent-key.pem"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", name, st.Mode().Perm())
		}
	}
	if stdout, _ := run(0, "tls", "-h"); !strings.Contains(stdout, "masterd tls cert -ca DIR -name NAME") {
		t.Errorf("masterd tls -h says:\n%s", stdout)
	}
	if stdout, _ := run(0, "tls", "cert", "-h"); !strings.Contains(stdout, "-server") {
		t.Errorf("masterd tls cert -h says:\n%s", stdout)
	}
	for _, tc := range []struct {
		code int
		args []string
		want string
	}{
		{1, []string{"tls", "ca", "-out", dir}, "exists"},
		{1, []string{"tls", "cert", "-ca", dir, "-name", "m1", "-hosts", "127.0.0.1", "-server", "-out", dir}, "exists"},
		{2, []string{"tls", "cert", "-ca", dir, "-name", "x", "-out", dir}, "-server"},
		{2, []string{"tls", "cert", "-ca", dir, "-name", "x", "-server", "-out", dir}, "-server needs -hosts"},
		{2, []string{"tls", "cert", "-ca", dir, "-name", "../x", "-client", "-out", dir}, "-name"},
		{2, []string{"tls", "ca"}, "-out is required"},
		{2, []string{"tls", "sign"}, "unknown subcommand"},
		{1, []string{"tls", "cert", "-ca", t.TempDir(), "-name", "x", "-client", "-out", dir}, "read CA certificate"},
	} {
		if _, stderr := run(tc.code, tc.args...); !strings.Contains(stderr, tc.want) {
			t.Errorf("masterd %s: stderr %q, want %q", strings.Join(tc.args, " "), stderr, tc.want)
		}
	}
}

// TestTLSFlagsRefusedAtStartup: TLS settings that cannot work stop masterd
// at once with an error naming the flag or the file.
func TestTLSFlagsRefusedAtStartup(t *testing.T) {
	bin := masterdBinary(t)
	dir := t.TempDir()
	other := t.TempDir()
	for _, args := range [][]string{
		{"tls", "ca", "-out", dir},
		{"tls", "cert", "-ca", dir, "-name", "m1", "-hosts", "127.0.0.1", "-server", "-out", dir},
		{"tls", "cert", "-ca", dir, "-name", "client", "-client", "-out", dir},
		{"tls", "ca", "-out", other},
		{"tls", "cert", "-ca", other, "-name", "stranger", "-hosts", "127.0.0.1", "-server", "-out", other},
	} {
		if _, stderr, code := runMasterd(t, bin, args...); code != 0 {
			t.Fatalf("masterd %s: %s", strings.Join(args, " "), stderr)
		}
	}
	ca := filepath.Join(dir, "ca.pem")
	cert, key := filepath.Join(dir, "m1.pem"), filepath.Join(dir, "m1-key.pem")
	server := func(extra ...string) []string {
		return append([]string{"-id", "m1", "-data-dir", t.TempDir(), "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-bootstrap"}, extra...)
	}
	for name, tc := range map[string]struct {
		code int
		args []string
		want string
	}{
		"cert without key":   {2, server("-tls-cert", cert, "-tls-ca", ca), "-tls-cert: needs -tls-key"},
		"key without cert":   {2, server("-tls-key", key, "-tls-ca", ca), "-tls-key: needs -tls-cert"},
		"raft without ca":    {2, server("-tls-cert", cert, "-tls-key", key), "-tls-ca: is required with -tls-cert"},
		"ca alone":           {2, server("-tls-ca", ca), "-tls-ca: needs -tls-cert"},
		"verify without ca":  {2, server("-tls-verify-incoming"), "-tls-verify-incoming: needs -tls-ca"},
		"plaintext join":     {2, []string{"-id", "m2", "-data-dir", t.TempDir(), "-raft", "127.0.0.1:0", "-join", "http://127.0.0.1:1", "-tls-cert", cert, "-tls-key", key, "-tls-ca", ca}, "want https://"},
		"client certificate": {1, server("-tls-cert", filepath.Join(dir, "client.pem"), "-tls-key", filepath.Join(dir, "client-key.pem"), "-tls-ca", ca), "does not name server.allot"},
		"another ca":         {1, server("-tls-cert", filepath.Join(other, "stranger.pem"), "-tls-key", filepath.Join(other, "stranger-key.pem"), "-tls-ca", ca), "does not verify against -tls-ca"},
		"key of another":     {1, server("-tls-cert", cert, "-tls-key", filepath.Join(dir, "client-key.pem"), "-tls-ca", ca), "private key does not match"},
		"missing file":       {1, server("-tls-cert", filepath.Join(dir, "none.pem"), "-tls-key", key, "-tls-ca", ca), "no such file"},
	} {
		t.Run(name, func(t *testing.T) {
			_, stderr, code := runMasterd(t, bin, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d with %q", code, stderr, tc.code, tc.want)
			}
		})
	}

	// -dev takes a certificate without a CA (no Raft peers to verify) and
	// serves HTTPS.
	d := startDaemon(t, bin, "-dev", "-http", "127.0.0.1:0", "-tls-cert", cert, "-tls-key", key)
	text := d.waitLog(t, "serving: api=https://")
	addr := text[strings.Index(text, "api=https://")+len("api="):]
	addr = strings.Fields(addr)[0]
	cl, err := api.NewClient([]string{addr}, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := api.TLSFiles{CAFile: ca}.Config()
	if err != nil {
		t.Fatal(err)
	}
	cl.SetTLS(cfg)
	if _, err := cl.Do(context.Background(), api.Request{Method: "GET", Path: "/v1/health"}, nil); err != nil {
		t.Fatalf("health of the -dev server over https: %v", err)
	}
}
