package api

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"
)

// TLSFiles is where a client of the masters finds its TLS material: the CA
// that signed the masters' certificates (a file or PEM text) and, when the
// masters verify their clients (masterd -tls-verify-incoming), a client
// certificate and key. Leave it zero for plaintext http:// masters.
type TLSFiles struct {
	// CAFile and CAPEM name the CA the masters' certificates must chain to;
	// both may be set (each adds its certificates). With neither, the
	// system's roots are used.
	CAFile string
	CAPEM  string
	// CertFile and KeyFile are the client certificate presented to the
	// masters, both or neither; CertPEM and KeyPEM give the same as text.
	CertFile string
	KeyFile  string
	CertPEM  string
	KeyPEM   string
}

// IsZero reports whether nothing is set: the client speaks plaintext or
// trusts the system's roots.
func (f TLSFiles) IsZero() bool { return f == TLSFiles{} }

// Config builds the client side *tls.Config: TLS 1.2 or later, the masters
// verified against the CA, the client certificate presented when given.
func (f TLSFiles) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CAFile != "" || f.CAPEM != "" {
		pool := x509.NewCertPool()
		if f.CAFile != "" {
			data, err := os.ReadFile(f.CAFile)
			if err != nil {
				return nil, fmt.Errorf("read CA file: %w", err)
			}
			if !pool.AppendCertsFromPEM(data) {
				return nil, fmt.Errorf("CA file %s holds no PEM certificate", f.CAFile)
			}
		}
		if f.CAPEM != "" && !pool.AppendCertsFromPEM([]byte(f.CAPEM)) {
			return nil, errors.New("the CA PEM text holds no certificate")
		}
		cfg.RootCAs = pool
	}
	certPEM, keyPEM := []byte(f.CertPEM), []byte(f.KeyPEM)
	if f.CertFile != "" {
		data, err := os.ReadFile(f.CertFile)
		if err != nil {
			return nil, fmt.Errorf("read client certificate: %w", err)
		}
		certPEM = data
	}
	if f.KeyFile != "" {
		data, err := os.ReadFile(f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("read client key: %w", err)
		}
		keyPEM = data
	}
	switch {
	case len(certPEM) > 0 && len(keyPEM) > 0:
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("client certificate %s and key %s: %w", orText(f.CertFile), orText(f.KeyFile), err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case len(certPEM) > 0:
		return nil, errors.New("a client certificate needs its key")
	case len(keyPEM) > 0:
		return nil, errors.New("a client key needs its certificate")
	}
	return cfg, nil
}

func orText(path string) string {
	if path == "" {
		return "(PEM text)"
	}
	return path
}

// NewTLSTransport returns an HTTP transport to the masters over cfg (nil:
// the default TLS settings), with the connection pooling of the default one.
func NewTLSTransport(cfg *tls.Config) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if cfg != nil {
		t.TLSClientConfig = cfg.Clone()
	}
	return t
}

// SetTLS makes the client verify the masters with cfg (and present its
// client certificate). Call it before the first call; the addresses should
// be https:// URLs.
func (c *Client) SetTLS(cfg *tls.Config) {
	timeout := 30 * time.Second
	if c.HTTP != nil {
		timeout = c.HTTP.Timeout
	}
	c.HTTP = &http.Client{Timeout: timeout, Transport: NewTLSTransport(cfg)}
}

// SetTLS makes the agent's sessions verify the masters with cfg (and present
// its client certificate). Call it before Run.
func (c *AgentClient) SetTLS(cfg *tls.Config) { c.streams.setTLS(cfg) }

// SetTLS makes the framework's sessions verify the masters with cfg (and
// present its client certificate). Call it before Subscribe.
func (c *SchedulerClient) SetTLS(cfg *tls.Config) { c.streams.setTLS(cfg) }

// setTLS gives the stream client its own transport: streamHTTP, shared by
// every plaintext client of the process, stays as it is.
func (c *streamClient) setTLS(cfg *tls.Config) {
	t := NewTLSTransport(cfg)
	t.MaxIdleConnsPerHost = streamHTTP.Transport.(*http.Transport).MaxIdleConnsPerHost
	c.http = &http.Client{Transport: t, CheckRedirect: streamHTTP.CheckRedirect}
}
