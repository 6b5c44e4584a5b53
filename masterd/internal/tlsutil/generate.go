// Package tlsutil is masterd's TLS: the certificates `masterd tls` makes,
// the configurations of the HTTPS API and of the clients among servers, and
// the mutual-TLS stream layer Raft runs on. As Consul and Nomad do, a server
// proves it is one by a certificate from the cluster's CA that names a fixed
// DNS name (ServerName), whatever its address.
package tlsutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ServerName is the DNS name every server certificate carries (`masterd tls
// cert -server`). Raft accepts a peer, and dials one, only when its
// certificate names it, so a client certificate from the same CA cannot pose
// as a server.
const ServerName = "server.allot"

// File names in a CA directory and beside a leaf certificate.
const (
	CACertFile = "ca.pem"
	CAKeyFile  = "ca-key.pem"
)

// CertFiles are the certificate and key files `masterd tls cert -name NAME`
// writes in its -out directory.
func CertFiles(dir, name string) (cert, key string) {
	return filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
}

// Authority is a CA that issues the cluster's certificates.
type Authority struct {
	Cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	CertPEM []byte
	KeyPEM  []byte
}

// Validity of what `masterd tls` makes unless told otherwise.
const (
	DefaultCAValidity   = 10 * 365 * 24 * time.Hour
	DefaultCertValidity = 365 * 24 * time.Hour
)

// NewAuthority makes a CA (ECDSA P-256) valid from now for validity.
func NewAuthority(commonName string, validity time.Duration) (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"allot"}},
		NotBefore:             now.Add(-time.Minute), // tolerate a little clock skew between hosts
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &Authority{Cert: cert, key: key, CertPEM: encodeCert(der), KeyPEM: keyPEM}, nil
}

// LoadAuthority reads the CA `masterd tls ca -out dir` wrote.
func LoadAuthority(dir string) (*Authority, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, fmt.Errorf("read CA certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, fmt.Errorf("read CA key: %w", err)
	}
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("CA certificate in %s: %w", dir, err)
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, fmt.Errorf("CA key in %s: no PEM block", dir)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("CA key in %s: %w", dir, err)
	}
	key, ok := parsed.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("CA key in %s does not belong to its certificate", dir)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("%s is not a CA certificate", filepath.Join(dir, CACertFile))
	}
	return &Authority{Cert: cert, key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// Write stores the CA as dir/ca.pem and dir/ca-key.pem (0600), refusing to
// overwrite an existing CA: the certificates it signed would stop working.
func (a *Authority) Write(dir string) error {
	return writeFiles(dir, map[string][]byte{CACertFile: a.CertPEM, CAKeyFile: a.KeyPEM})
}

// CertRequest describes a leaf certificate.
type CertRequest struct {
	// Name is the certificate's common name (and its file name).
	Name string
	// Hosts are the IP addresses and DNS names the holder answers at.
	Hosts []string
	// Server adds the DNS name ServerName: the holder may join Raft.
	Server bool
	// NotBefore and NotAfter bound its validity; zero means from now for
	// DefaultCertValidity.
	NotBefore, NotAfter time.Time
}

// Issue signs a certificate for req with a fresh ECDSA P-256 key. Every
// certificate is good for both ends of a connection (serverAuth and
// clientAuth): servers are each other's clients.
func (a *Authority) Issue(req CertRequest) (certPEM, keyPEM []byte, err error) {
	if strings.TrimSpace(req.Name) == "" {
		return nil, nil, errors.New("a certificate needs a name")
	}
	if !req.Server && slices.ContainsFunc(req.Hosts, func(h string) bool { return strings.EqualFold(strings.TrimSpace(h), ServerName) }) {
		// The name is what lets a peer into Raft: only a server's
		// certificate carries it.
		return nil, nil, fmt.Errorf("host %s makes a certificate a server's (Raft peers accept it): ask for a server certificate instead", ServerName)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	notBefore, notAfter := req.NotBefore, req.NotAfter
	if notBefore.IsZero() {
		notBefore = time.Now().Add(-time.Minute)
	}
	if notAfter.IsZero() {
		notAfter = notBefore.Add(DefaultCertValidity)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: req.Name, Organization: []string{"allot"}},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range req.Hosts {
		h = strings.TrimSpace(h)
		switch {
		case h == "":
		case net.ParseIP(h) != nil:
			tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(h))
		default:
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if req.Server {
		tmpl.DNSNames = append(tmpl.DNSNames, ServerName)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.Cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate %s: %w", req.Name, err)
	}
	if keyPEM, err = encodeKey(key); err != nil {
		return nil, nil, err
	}
	return encodeCert(der), keyPEM, nil
}

// WriteCert stores a certificate and its key as dir/NAME.pem and
// dir/NAME-key.pem (the key 0600), refusing to overwrite either.
func WriteCert(dir, name string, certPEM, keyPEM []byte) error {
	cert, key := CertFiles("", name)
	return writeFiles(dir, map[string][]byte{cert: certPEM, key: keyPEM})
}

func writeFiles(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	for name := range files {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return fmt.Errorf("%s exists: remove it first or choose another -out", filepath.Join(dir, name))
		}
	}
	for name, data := range files {
		// Certificates are public, but one mode for both keeps the rule
		// simple: nothing `masterd tls` writes is world-readable.
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return nil
}

func newSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("certificate serial: %w", err)
	}
	return serial, nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func parseCert(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}
