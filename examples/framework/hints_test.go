package main

import (
	"bytes"
	"context"
	"encoding/pem"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// Real masterd processes refuse the framework; what it prints says what to
// change.

const hintOperatorToken = "framework-hints-operator-token"

// subscribeOnce runs the framework with args until its SUBSCRIBE is refused
// (a 401 or 403 ends the run) or, for errors retried across masters (TLS
// handshakes), until the first round of attempts failed; it returns that
// error.
func subscribeOnce(t *testing.T, args ...string) error {
	t.Helper()
	cfg, err := parseFlags(append(args, "-timeout", "10m"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	client, err := schedulerClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	retried := make(chan error, 1)
	client.Retrying = func(_ int, err error) {
		select {
		case retried <- err:
		default:
		}
	}
	done := make(chan error, 1)
	go func() { done <- newFramework(cfg, io.Discard).run(ctx, client) }()
	select {
	case err := <-done:
		return err
	case err := <-retried:
		cancel()
		<-done
		return err
	}
}

// wantHint checks that report prints err and the hint.
func wantHint(t *testing.T, what string, err error, inError, inHint string) {
	t.Helper()
	var out bytes.Buffer
	report(&out, err)
	t.Logf("%s:\n%s", what, out.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "framework: ERROR: ") || !strings.Contains(lines[0], inError) ||
		!strings.HasPrefix(lines[1], "framework: hint: ") || !strings.Contains(lines[1], inHint) {
		t.Errorf("%s: printed\n%s\nwant an ERROR line with %q and a hint with %q", what, out.String(), inError, inHint)
	}
}

func TestHintsForRefusedTokens(t *testing.T) {
	t.Setenv("ALLOT_TOKEN", "")
	c := testcluster.Start(t, 1, testcluster.WithOperatorToken(hintOperatorToken), testcluster.WithArgs("-acl"))
	if _, err := c.WaitLeader(context.Background()); err != nil {
		t.Fatal(err)
	}
	operator, err := api.NewClient(c.Addresses(), hintOperatorToken)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := operator.PutACLPolicy(ctx, "quota-reader", api.ACLPolicyRequest{Rules: []api.ACLRule{{Object: api.ACLObjectQuota, Access: api.ACLRead}}}, api.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := operator.PutACLToken(ctx, "not-a-framework", api.ACLTokenRequest{Policies: []string{"quota-reader"}}, api.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}

	err = subscribeOnce(t, "-master", c.Address(0), "-role", "eng/ml")
	if api.ErrorCode(err) != api.CodeUnauthenticated {
		t.Fatalf("without a token: %v, want unauthenticated", err)
	}
	wantHint(t, "without a token", err, "unauthenticated", "pass a token with -token-file (or ALLOT_TOKEN)")

	// A token with no framework rule at all: the refusal names the role
	// asked for, and the hint the rule the policies need.
	err = subscribeOnce(t, "-master", c.Address(0), "-role", "eng/ml", "-token-file", writeToken(t, tok.Secret))
	if api.ErrorCode(err) != api.CodePermissionDenied {
		t.Fatalf("with a quota reader's token: %v, want permission_denied", err)
	}
	wantHint(t, "with a quota reader's token", err, "lacks register framework for role eng/ml",
		"the token's policies need the rule object framework, access register, roles eng/ml")
}

func TestHintsForTLSMistakes(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithTLS(), testcluster.WithArgs("-tls-verify-incoming"))
	if _, err := c.WaitLeader(context.Background()); err != nil {
		t.Fatal(err)
	}
	https := c.Address(0)
	ca := c.ClientTLS().CAFile
	cert, key, err := c.IssueCert("framework", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	foreignCA := writeForeignCA(t)

	err = subscribeOnce(t, "-master", https, "-tls-ca", ca)
	wantHint(t, "without a client certificate", err, "certificate required", "pass -tls-cert and -tls-key")

	err = subscribeOnce(t, "-master", https, "-tls-ca", foreignCA, "-tls-cert", cert, "-tls-key", key)
	wantHint(t, "with another CA", err, "unknown authority", "-tls-ca")

	err = subscribeOnce(t, "-master", strings.Replace(https, "https://", "http://", 1))
	if api.ErrorCode(err) != api.CodeInvalidArgument {
		t.Fatalf("an http:// address: %v, want the master's 400", err)
	}
	wantHint(t, "an http:// address", err, "this server speaks HTTPS", "use an https:// -master address")
}

// writeForeignCA writes a PEM certificate of no allot cluster (httptest's
// own) to serve as a wrong CA file.
func writeForeignCA(t *testing.T) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	srv.StartTLS()
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "foreign-ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
