package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// agentd refused by real masters logs at ERROR what keeps it out and which
// of its flags would let it in, and keeps trying.

const hintsOperatorToken = "agentd-hints-operator-token"

// waitErrorHint waits until the agent logged an ERROR line with each of
// want.
func waitErrorHint(t *testing.T, a *agentProcess, what string, want ...string) {
	t.Helper()
	eventually(t, what, 60*time.Second, func() error {
		for _, line := range a.logLines("[ERROR]") {
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(line, w)
			}
			if ok {
				return nil
			}
		}
		return fmt.Errorf("no ERROR line with %q in agentd's log", want)
	})
}

func writeTokenFile(t *testing.T, secret string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAgentdHintsForTokens: without a token agentd says to pass one with
// -token-file; with a token lacking agent register it names the rule the
// policies need; an agent whose token is revoked while it runs is
// disconnected with the master's reason, then refused with the hint.
func TestAgentdHintsForTokens(t *testing.T) {
	c := testcluster.Start(t, 1, fastMaster, testcluster.WithOperatorToken(hintsOperatorToken), testcluster.WithArgs("-acl"))
	if _, err := c.WaitLeader(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	operator, err := api.NewClient(c.Addresses(), hintsOperatorToken)
	if err != nil {
		t.Fatal(err)
	}
	token := func(accessor string, rule api.ACLRule) string {
		t.Helper()
		if _, err := operator.PutACLPolicy(ctx, "p-"+accessor, api.ACLPolicyRequest{Rules: []api.ACLRule{rule}}, api.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		tok, err := operator.PutACLToken(ctx, accessor, api.ACLTokenRequest{Policies: []string{"p-" + accessor}}, api.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tok.Secret
	}
	reader := token("quota-reader", api.ACLRule{Object: api.ACLObjectQuota, Access: api.ACLRead})
	agentTok := token("agent", api.ACLRule{Object: api.ACLObjectAgent, Access: api.ACLRegister})

	noToken := startAgent(t, c.Addresses(), "hint-none", "cpus:1;mem:256;disk:512")
	waitErrorHint(t, noToken, "the hint for a missing token", "unauthenticated", "pass a token with -token-file")

	denied := startAgent(t, c.Addresses(), "hint-denied", "cpus:1;mem:256;disk:512", "-token-file", writeTokenFile(t, reader))
	waitErrorHint(t, denied, "the hint for a token without agent register",
		"lacks register agent", "the token's policies need the rule object agent, access register")

	revoked := startAgent(t, c.Addresses(), "hint-revoked", "cpus:1;mem:256;disk:512", "-token-file", writeTokenFile(t, agentTok))
	eventually(t, "the agent registers", 60*time.Second, func() error {
		if len(revoked.logLines("agentd: registered:")) == 0 {
			return fmt.Errorf("agentd has not logged a registration")
		}
		return nil
	})
	if err := operator.DeleteACLToken(ctx, "agent", api.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the master's reason reaches the agent", 60*time.Second, func() error {
		if len(revoked.logLines("token agent was revoked")) == 0 {
			return fmt.Errorf("agentd has not logged the revocation")
		}
		return nil
	})
	waitErrorHint(t, revoked, "the hint once the token is revoked", "unauthenticated", "pass a token with -token-file")
}

// TestAgentdHintsForTLS: against masters that serve HTTPS and verify their
// clients, agentd names the flag it lacks: -tls-cert/-tls-key, -tls-ca, an
// https:// address.
func TestAgentdHintsForTLS(t *testing.T) {
	c := testcluster.Start(t, 1, fastMaster, testcluster.WithTLS(), testcluster.WithArgs("-tls-verify-incoming"))
	if _, err := c.WaitLeader(context.Background()); err != nil {
		t.Fatal(err)
	}
	https := c.Address(0)
	cert, key, err := c.IssueCert("agent-hints", nil, false)
	if err != nil {
		t.Fatal(err)
	}

	noCert := startAgent(t, []string{https}, "hint-no-cert", "cpus:1;mem:256;disk:512", "-tls-ca", c.ClientTLS().CAFile)
	waitErrorHint(t, noCert, "the hint for a missing client certificate", "certificate required", "pass -tls-cert and -tls-key")

	otherCA := startAgent(t, []string{https}, "hint-other-ca", "cpus:1;mem:256;disk:512",
		"-tls-ca", writeCA(t, t.TempDir()), "-tls-cert", cert, "-tls-key", key)
	waitErrorHint(t, otherCA, "the hint for another CA", "unknown authority", "pass the cluster's CA with -tls-ca")

	plain := startAgent(t, []string{strings.Replace(https, "https://", "http://", 1)}, "hint-plain", "cpus:1;mem:256;disk:512")
	waitErrorHint(t, plain, "the hint for an http:// address", "this server speaks HTTPS", "use an https:// -master address")
}
