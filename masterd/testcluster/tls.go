package testcluster

import (
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/tlsutil"
)

// WithTLS runs the cluster as an operator would after `masterd tls`: a CA in
// BASE/tls, a server certificate per server (-tls-cert, -tls-key, -tls-ca:
// HTTPS API, mutual-TLS Raft), https:// addresses, and the cluster's own
// calls made with a client certificate "client" (so -tls-verify-incoming in
// WithArgs works too).
func WithTLS() Option {
	return func(c *Config) { c.TLS = true }
}

// setupTLS makes the CA and the harness's client certificate.
func (c *Cluster) setupTLS() error {
	dir := c.TLSDir()
	ca, err := tlsutil.NewAuthority("testcluster CA", 24*time.Hour)
	if err != nil {
		return fmt.Errorf("testcluster: %w", err)
	}
	if err := ca.Write(dir); err != nil {
		return fmt.Errorf("testcluster: %w", err)
	}
	if _, _, err := c.IssueCert("client", nil, false); err != nil {
		return err
	}
	cfg, err := c.ClientTLS().Config()
	if err != nil {
		return fmt.Errorf("testcluster: %w", err)
	}
	c.client = &http.Client{Timeout: c.client.Timeout, Transport: api.NewTLSTransport(cfg)}
	return nil
}

// serverTLSArgs issues server s's certificate and returns its flags.
func (c *Cluster) serverTLSArgs(s *server) ([]string, error) {
	cert, key, err := c.IssueCert(s.id, []string{"127.0.0.1", "localhost"}, true)
	if err != nil {
		return nil, err
	}
	return []string{"-tls-cert", cert, "-tls-key", key, "-tls-ca", filepath.Join(c.TLSDir(), tlsutil.CACertFile)}, nil
}

// TLSDir holds the CA (ca.pem, ca-key.pem) and every certificate IssueCert
// made; it is only there WithTLS.
func (c *Cluster) TLSDir() string { return filepath.Join(c.cfg.BaseDir, "tls") }

// TLS reports whether the cluster runs WithTLS.
func (c *Cluster) TLS() bool { return c.cfg.TLS }

// IssueCert signs a certificate named name with the cluster's CA (a server's
// when server, naming hosts) and returns its files.
func (c *Cluster) IssueCert(name string, hosts []string, server bool) (cert, key string, err error) {
	ca, err := tlsutil.LoadAuthority(c.TLSDir())
	if err != nil {
		return "", "", fmt.Errorf("testcluster: %w", err)
	}
	certPEM, keyPEM, err := ca.Issue(tlsutil.CertRequest{Name: name, Hosts: hosts, Server: server})
	if err != nil {
		return "", "", fmt.Errorf("testcluster: %w", err)
	}
	if err := tlsutil.WriteCert(c.TLSDir(), name, certPEM, keyPEM); err != nil {
		return "", "", fmt.Errorf("testcluster: %w", err)
	}
	cert, key = tlsutil.CertFiles(c.TLSDir(), name)
	return cert, key, nil
}

// ClientTLS is what a client of the cluster needs: the CA and the harness's
// client certificate. It is zero without WithTLS.
func (c *Cluster) ClientTLS() api.TLSFiles {
	if !c.cfg.TLS {
		return api.TLSFiles{}
	}
	cert, key := tlsutil.CertFiles(c.TLSDir(), "client")
	return api.TLSFiles{CAFile: filepath.Join(c.TLSDir(), tlsutil.CACertFile), CertFile: cert, KeyFile: key}
}

func (c *Cluster) scheme() string {
	if c.cfg.TLS {
		return "https://"
	}
	return "http://"
}
