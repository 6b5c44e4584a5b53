package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// TestSubscribesOverTLS: with -tls-ca, -tls-cert and -tls-key the framework
// subscribes to masters that serve HTTPS and require client certificates.
func TestSubscribesOverTLS(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithTLS(), testcluster.WithArgs("-tls-verify-incoming"))
	if _, err := c.WaitLeader(context.Background()); err != nil {
		t.Fatal(err)
	}
	cert, key, err := c.IssueCert("framework", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := parseFlags([]string{"-master", c.Address(0), "-name", "tls-hello",
		"-tls-ca", c.ClientTLS().CAFile, "-tls-cert", cert, "-tls-key", key}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	client, err := schedulerClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- newFramework(cfg, io.Discard).run(ctx, client) }()
	defer func() { cancel(); <-done }()

	operator, err := api.NewClient([]string{c.Address(0)}, "")
	if err != nil {
		t.Fatal(err)
	}
	opTLS, err := c.ClientTLS().Config()
	if err != nil {
		t.Fatal(err)
	}
	operator.SetTLS(opTLS)
	deadline := time.Now().Add(60 * time.Second) // bounds a hang only
	for {
		fws, err := operator.Frameworks(ctx)
		if err == nil && len(fws) > 0 && fws[0].Name == "tls-hello" {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("the framework ended before it subscribed: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the framework never subscribed: %v %v", fws, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestParseFlagsRefusesBadTLS(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"-tls-ca", dir + "/none.pem"},
		{"-tls-cert", dir + "/none.pem"},
		{"-tls-key", dir + "/none.pem"},
	} {
		_, err := parseFlags(args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "-tls-ca/-tls-cert/-tls-key") {
			t.Errorf("parseFlags(%q) = %v, want a TLS error", args, err)
		}
	}
}
