package tlsutil

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// pki is a CA with files on disk, for tests.
type pki struct {
	t   *testing.T
	dir string
	ca  *Authority
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	ca, err := NewAuthority("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := ca.Write(dir); err != nil {
		t.Fatal(err)
	}
	return &pki{t: t, dir: dir, ca: ca}
}

func (p *pki) caFile() string { return filepath.Join(p.dir, CACertFile) }

// issue writes a certificate and returns the Config of a server holding it
// (trusting caFile).
func (p *pki) issue(req CertRequest, caFile string) Config {
	p.t.Helper()
	certPEM, keyPEM, err := p.ca.Issue(req)
	if err != nil {
		p.t.Fatal(err)
	}
	if err := WriteCert(p.dir, req.Name, certPEM, keyPEM); err != nil {
		p.t.Fatal(err)
	}
	cert, key := CertFiles(p.dir, req.Name)
	return Config{CertFile: cert, KeyFile: key, CAFile: caFile}
}

// material loads cfg without Load's checks, as a misconfigured or hostile
// peer would present it.
func material(t *testing.T, cfg Config) *Material {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	data, err := os.ReadFile(cfg.CAFile)
	if err != nil || !pool.AppendCertsFromPEM(data) {
		t.Fatalf("CA %s: %v", cfg.CAFile, err)
	}
	return &Material{cert: cert, leaf: mustParse(t, cfg.CertFile), pool: pool}
}

func mustParse(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseCert(data)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// syncBuffer collects log lines written from several goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls cond until it holds; the bound only keeps a broken test
// from hanging, it is no timing assertion.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func newLayer(t *testing.T, m *Material, logs io.Writer) *StreamLayer {
	t.Helper()
	logger := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug})
	s, err := NewStreamLayer("127.0.0.1:0", m, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestTLSStreamLayer: two servers of one CA talk; every peer that is not one
// is refused at the handshake with a log line naming its address, and never
// comes out of Accept.
func TestTLSStreamLayer(t *testing.T) {
	p := newPKI(t)
	hosts := []string{"127.0.0.1"}
	serverA := material(t, p.issue(CertRequest{Name: "a", Hosts: hosts, Server: true}, p.caFile()))
	serverB := material(t, p.issue(CertRequest{Name: "b", Hosts: hosts, Server: true}, p.caFile()))
	var logs syncBuffer
	layerA := newLayer(t, serverA, &logs)
	layerB := newLayer(t, serverB, io.Discard)

	other := newPKI(t)
	now := time.Now()
	refused := map[string]*Material{
		"other_ca":    material(t, other.issue(CertRequest{Name: "intruder", Hosts: hosts, Server: true}, p.caFile())),
		"missing_san": material(t, p.issue(CertRequest{Name: "client", Hosts: hosts}, p.caFile())),
		"expired": material(t, p.issue(CertRequest{Name: "old", Hosts: hosts, Server: true,
			NotBefore: now.Add(-2 * time.Hour), NotAfter: now.Add(-time.Hour)}, p.caFile())),
	}
	reasons := map[string]string{"other_ca": "unknown authority", "missing_san": "does not name server.allot", "expired": "expired"}
	for name, m := range refused {
		t.Run(name, func(t *testing.T) {
			before := strings.Count(logs.String(), "refused a raft peer")
			intruder := newLayer(t, m, io.Discard)
			conn, err := intruder.Dial(raft.ServerAddress(layerA.Addr().String()), 10*time.Second)
			if err == nil {
				// TLS 1.3 finishes the client's side before the server
				// checked its certificate: the refusal comes on first read.
				conn.SetReadDeadline(time.Now().Add(30 * time.Second))
				_, err = conn.Read(make([]byte, 1))
				conn.Close()
			}
			if err == nil {
				t.Fatal("server A accepted the peer")
			}
			waitFor(t, "the refusal in A's log", func() bool { return strings.Count(logs.String(), "refused a raft peer") > before })
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			if last := lines[len(lines)-1]; !strings.Contains(last, reasons[name]) {
				t.Fatalf("the refusal says %s, want the reason %q", last, reasons[name])
			}
		})
	}
	t.Run("plaintext", func(t *testing.T) {
		before := strings.Count(logs.String(), "refused a raft peer")
		conn, err := net.Dial("tcp", layerA.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conn.Write([]byte("plaintext raft rpc\n"))
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := conn.Read(make([]byte, 1)); err == nil {
			t.Fatal("a plaintext peer got an answer")
		}
		conn.Close()
		waitFor(t, "the plaintext refusal in A's log", func() bool {
			return strings.Count(logs.String(), "refused a raft peer") > before
		})
		if !strings.Contains(logs.String(), "remote="+conn.LocalAddr().String()) {
			t.Fatalf("the log does not name the peer %s:\n%s", conn.LocalAddr(), logs.String())
		}
	})

	t.Run("dial_refuses_non_server", func(t *testing.T) {
		// A listener whose certificate lacks the server name: B must not
		// take it for a server, though the CA signed it.
		client := material(t, p.issue(CertRequest{Name: "posing", Hosts: hosts}, p.caFile()))
		ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{client.cert}})
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			if c, err := ln.Accept(); err == nil {
				c.(*tls.Conn).Handshake()
				c.Close()
			}
		}()
		if conn, err := layerB.Dial(raft.ServerAddress(ln.Addr().String()), 10*time.Second); err == nil {
			conn.Close()
			t.Fatal("B dialed a peer that is no server")
		}
	})

	// A real server gets through, and it is the next connection Accept
	// hands over: none of the refused ones came before it.
	conn, err := layerB.Dial(raft.ServerAddress(layerA.Addr().String()), 10*time.Second)
	if err != nil {
		t.Fatalf("B dials A: %v", err)
	}
	defer conn.Close()
	got, err := layerA.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	if got.RemoteAddr().String() != conn.LocalAddr().String() {
		t.Fatalf("A accepted %s, want B's connection from %s", got.RemoteAddr(), conn.LocalAddr())
	}
	go conn.Write([]byte("ping"))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(got, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("read %q, %v", buf, err)
	}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if !strings.Contains(line, "remote=127.0.0.1:") || !strings.Contains(line, "reason=") {
			t.Fatalf("a refusal line names no remote address or reason: %s", line)
		}
	}
}

func TestTLSLoad(t *testing.T) {
	p := newPKI(t)
	other := newPKI(t)
	now := time.Now()
	good := p.issue(CertRequest{Name: "good", Hosts: []string{"127.0.0.1"}, Server: true}, p.caFile())
	m, err := Load(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CheckServer(); err != nil {
		t.Fatal(err)
	}
	client, err := Load(p.issue(CertRequest{Name: "client"}, p.caFile()))
	if err != nil {
		t.Fatal(err)
	}
	if err := client.CheckServer(); err == nil || !strings.Contains(err.Error(), "masterd tls cert -server") {
		t.Fatalf("a client certificate passes as a server's: %v", err)
	}
	otherCert := other.issue(CertRequest{Name: "x", Server: true}, p.caFile())
	expired := p.issue(CertRequest{Name: "old", Server: true, NotBefore: now.Add(-2 * time.Hour), NotAfter: now.Add(-time.Hour)}, p.caFile())
	expiredNoCA := expired
	expiredNoCA.CAFile = ""
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"other_ca":       {otherCert, "does not verify against -tls-ca"},
		"expired":        {expired, "expired"},
		"expired_no_ca":  {expiredNoCA, "not now"},
		"key_mismatch":   {Config{CertFile: good.CertFile, KeyFile: otherCert.KeyFile, CAFile: p.caFile()}, "private key does not match"},
		"missing_cert":   {Config{CertFile: filepath.Join(p.dir, "nope.pem"), KeyFile: good.KeyFile}, "no such file"},
		"ca_not_pem":     {Config{CertFile: good.CertFile, KeyFile: good.KeyFile, CAFile: good.KeyFile}, "no PEM certificate"},
		"missing_ca_pem": {Config{CertFile: good.CertFile, KeyFile: good.KeyFile, CAFile: filepath.Join(p.dir, "none")}, "no such file"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestTLSConfigCheck(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  Config
		raft bool
		want []string // flags with a problem
	}{
		"off":                   {Config{}, true, nil},
		"full":                  {Config{CertFile: "c", KeyFile: "k", CAFile: "ca", VerifyIncoming: true}, true, nil},
		"cert_without_key":      {Config{CertFile: "c", CAFile: "ca"}, true, []string{"tls-cert"}},
		"key_without_cert":      {Config{KeyFile: "k", CAFile: "ca"}, true, []string{"tls-key"}},
		"raft_without_ca":       {Config{CertFile: "c", KeyFile: "k"}, true, []string{"tls-ca"}},
		"dev_without_ca":        {Config{CertFile: "c", KeyFile: "k"}, false, nil},
		"ca_alone":              {Config{CAFile: "ca"}, true, []string{"tls-ca"}},
		"verify_incoming_alone": {Config{VerifyIncoming: true}, true, []string{"tls-verify-incoming"}},
		"verify_incoming_no_ca": {Config{CertFile: "c", KeyFile: "k", VerifyIncoming: true}, false, []string{"tls-verify-incoming"}},
	} {
		t.Run(name, func(t *testing.T) {
			problems := tc.cfg.Check(tc.raft)
			if len(problems) != len(tc.want) {
				t.Fatalf("problems %v, want them on %v", problems, tc.want)
			}
			for _, f := range tc.want {
				if problems[f] == "" {
					t.Fatalf("problems %v, want one on -%s", problems, f)
				}
			}
		})
	}
}

// TestTLSFiles: keys are 0600, a CA reloads and signs, nothing is overwritten.
func TestTLSFiles(t *testing.T) {
	p := newPKI(t)
	cfg := p.issue(CertRequest{Name: "srv", Hosts: []string{"127.0.0.1", "localhost"}, Server: true}, p.caFile())
	for _, path := range []string{filepath.Join(p.dir, CAKeyFile), cfg.KeyFile} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Fatalf("%s has mode %v, want 0600", path, st.Mode().Perm())
		}
	}
	leaf := mustParse(t, cfg.CertFile)
	if leaf.VerifyHostname("localhost") != nil || leaf.VerifyHostname("127.0.0.1") != nil || leaf.VerifyHostname(ServerName) != nil {
		t.Fatalf("certificate names %v %v", leaf.DNSNames, leaf.IPAddresses)
	}
	loaded, err := LoadAuthority(p.dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := loaded.Issue(CertRequest{Name: "again"}); err != nil {
		t.Fatal(err)
	}
	if err := p.ca.Write(p.dir); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("a second CA overwrote the first: %v", err)
	}
	if err := WriteCert(p.dir, "srv", []byte("x"), []byte("y")); err == nil {
		t.Fatal("a certificate was overwritten")
	}
	other := newPKI(t)
	mixed := t.TempDir()
	copyFile(t, filepath.Join(p.dir, CACertFile), filepath.Join(mixed, CACertFile))
	copyFile(t, filepath.Join(other.dir, CAKeyFile), filepath.Join(mixed, CAKeyFile))
	if _, err := LoadAuthority(mixed); err == nil {
		t.Fatal("a CA loaded with another CA's key")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTLSServerCallsNeedAServer: a server's own calls to other servers'
// APIs (forwarding, which carries the caller's bearer token; joining, with
// the operator token) go only to a peer whose certificate names server.allot,
// not to any holder of a certificate from the CA for that address (a
// client's, an agent's).
func TestTLSServerCallsNeedAServer(t *testing.T) {
	p := newPKI(t)
	hosts := []string{"127.0.0.1"}
	self := material(t, p.issue(CertRequest{Name: "self", Hosts: hosts, Server: true}, p.caFile()))
	dial := func(peer *Material) error {
		ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{peer.cert}})
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			if c, err := ln.Accept(); err == nil {
				c.(*tls.Conn).Handshake()
				c.Close()
			}
		}()
		conn, err := tls.Dial("tcp", ln.Addr().String(), self.Client())
		if err == nil {
			conn.Close()
		}
		return err
	}
	client := material(t, p.issue(CertRequest{Name: "agent-host", Hosts: hosts}, p.caFile()))
	if err := dial(client); err == nil || !strings.Contains(err.Error(), ServerName) {
		t.Fatalf("a server's call reached a peer with a client certificate of the CA: %v", err)
	}
	other := material(t, p.issue(CertRequest{Name: "other", Hosts: hosts, Server: true}, p.caFile()))
	if err := dial(other); err != nil {
		t.Fatalf("a server's call to another server: %v", err)
	}
}

// TestTLSOnlyServerCertificatesNameTheServer: a client certificate asked
// for with the host server.allot would pass for a Raft peer; it is refused.
func TestTLSOnlyServerCertificatesNameTheServer(t *testing.T) {
	ca, err := NewAuthority("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{ServerName, "Server.Allot"} {
		if _, _, err := ca.Issue(CertRequest{Name: "sneaky", Hosts: []string{"127.0.0.1", host}}); err == nil || !strings.Contains(err.Error(), ServerName) {
			t.Errorf("a client certificate with host %s: %v, want an error naming %s", host, err, ServerName)
		}
	}
	if _, _, err := ca.Issue(CertRequest{Name: "m1", Hosts: []string{"127.0.0.1", ServerName}, Server: true}); err != nil {
		t.Errorf("a server certificate that names %s among its hosts: %v", ServerName, err)
	}
}
