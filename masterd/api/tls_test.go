package api_test

import (
	"context"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/allot/allot/masterd/api"
)

// TestClientTLS: a client given the server's CA reaches it over https, one
// without it refuses the server, and one that must present a certificate
// does so.
func TestClientTLS(t *testing.T) {
	var sawClientCert bool
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawClientCert = r.TLS != nil && len(r.TLS.PeerCertificates) > 0
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"ok"}`))
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	defer srv.Close()
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))

	client, err := api.NewClient([]string{srv.URL}, "")
	if err != nil {
		t.Fatal(err)
	}
	client.RetryFor = 0
	if err := client.Health(context.Background()); err == nil {
		t.Fatal("a client without the CA reached a server whose certificate it cannot verify")
	}

	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, []byte(caPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	// httptest's certificate is its own CA; it doubles as a client
	// certificate here.
	certPEM := caPEM
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: mustLocalhostKey(t)}))
	for name, files := range map[string]api.TLSFiles{
		"ca_file":         {CAFile: caFile},
		"ca_pem":          {CAPEM: caPEM},
		"ca_and_cert_pem": {CAPEM: caPEM, CertPEM: certPEM, KeyPEM: keyPEM},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := files.Config()
			if err != nil {
				t.Fatal(err)
			}
			client.SetTLS(cfg)
			if err := client.Health(context.Background()); err != nil {
				t.Fatalf("health over https: %v", err)
			}
			if want := files.CertPEM != ""; sawClientCert != want {
				t.Fatalf("server saw a client certificate: %v, want %v", sawClientCert, want)
			}
		})
	}
}

func TestTLSFilesErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	os.WriteFile(notPEM, []byte("hello"), 0o600)
	for name, files := range map[string]api.TLSFiles{
		"missing_ca":    {CAFile: filepath.Join(dir, "nope.pem")},
		"ca_not_pem":    {CAFile: notPEM},
		"ca_pem_text":   {CAPEM: "hello"},
		"cert_no_key":   {CertFile: notPEM},
		"key_no_cert":   {KeyPEM: "x"},
		"bad_cert_pair": {CertFile: notPEM, KeyFile: notPEM},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := files.Config(); err == nil {
				t.Fatalf("%+v accepted", files)
			}
		})
	}
	if cfg, err := (api.TLSFiles{}).Config(); err != nil || cfg.MinVersion != tls.VersionTLS12 {
		t.Fatalf("zero TLSFiles: %v, %v", cfg, err)
	}
}

// mustLocalhostKey is the private key of httptest's built-in certificate.
func mustLocalhostKey(t *testing.T) []byte {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	srv.StartTLS()
	defer srv.Close()
	key, ok := srv.TLS.Certificates[0].PrivateKey.(*rsa.PrivateKey)
	if !ok {
		t.Fatalf("httptest's key is a %T", srv.TLS.Certificates[0].PrivateKey)
	}
	return x509.MarshalPKCS1PrivateKey(key)
}

// A client of masters that run with -tls-cert (and -tls-verify-incoming):
// the CA `masterd tls ca` made, and a certificate from `masterd tls cert
// -client`.
func ExampleTLSFiles() {
	cfg, err := api.TLSFiles{CAFile: "tls/ca.pem", CertFile: "tls/ops.pem", KeyFile: "tls/ops-key.pem"}.Config()
	if err != nil {
		log.Fatal(err)
	}
	client, err := api.NewClient([]string{"https://10.0.0.1:5050", "https://10.0.0.2:5050"}, os.Getenv("ALLOT_TOKEN"))
	if err != nil {
		log.Fatal(err)
	}
	client.SetTLS(cfg)
	quotas, err := client.Quotas(context.Background(), api.ReadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(quotas), "quotas")
}
