package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// The audit trail through the tool: -json is the API's, -since narrows,
// the table shows who changed what with a before→after diff, and -follow
// prints new entries as they land until its context ends (Ctrl-C), exit 0.
func TestAuditCommand(t *testing.T) {
	c := shared(t)
	e := clusterEnv(c)
	cl := client(t, c)
	ctx := context.Background()

	var first api.Quota
	decode(t, &first, e, "quota", "set", "a-eng", "-guarantee", "cpus=1", "-force", "-json")
	ok(t, e, "quota", "set", "a-eng", "-guarantee", "cpus=2,mem=64", "-force")

	var all api.AuditList
	decode(t, &all, e, "audit", "-json")
	want, err := cl.Audit(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Entries) != len(want) || len(want) < 2 {
		t.Fatalf("audit -json has %d entries, the API %d", len(all.Entries), len(want))
	}
	for i := range want {
		if !sameEntry(all.Entries[i], want[i]) {
			t.Errorf("audit -json entry %d = %+v, the API has %+v", i, all.Entries[i], want[i])
		}
	}

	var since api.AuditList
	decode(t, &since, e, "audit", "-since", strconv.FormatUint(first.Version, 10), "-json")
	if len(since.Entries) == 0 || since.Entries[0].Index <= first.Version {
		t.Fatalf("audit -since %d = %+v", first.Version, since.Entries)
	}
	update := since.Entries[0]
	table := ok(t, e, "audit", "-since", strconv.FormatUint(first.Version, 10)).stdout
	if !rowHas(table, strconv.FormatUint(update.Index, 10), update.Time.UTC().Format(time.RFC3339), "quota.set", "quota/a-eng",
		"guarantees.cpus: 1→2, guarantees.mem: -→64") {
		t.Errorf("audit table:\n%s", table)
	}

	// -follow, in the background: the entries after -since, then each new
	// one, until the context ends.
	last := want[len(want)-1].Index
	followCtx, stop := context.WithCancel(ctx)
	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Run(followCtx, Options{Args: []string{"allot", "audit", "-follow", "-json", "-interval", "50ms",
			"-since", strconv.FormatUint(last, 10)}, Stdout: &out, Stderr: &out,
			LookupEnv: func(k string) (string, bool) { v, ok := e[k]; return v, ok }})
	}()
	ok(t, e, "role", "set", "a-eng", "-weight", "3")
	var followed api.AuditEntry
	waitFor(t, "the new entry in -follow's output", func() bool {
		line, _, _ := strings.Cut(out.String(), "\n")
		return json.Unmarshal([]byte(line), &followed) == nil && followed.Object == "role/a-eng"
	})
	stop()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("audit -follow ended with exit %d, want 0:\n%s", code, out.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("audit -follow did not end with its context")
	}
	if followed.Index <= last || followed.Action != "role.set" {
		t.Errorf("-follow printed %+v", followed)
	}
	ok(t, e, "role", "delete", "a-eng")
	ok(t, e, "quota", "delete", "a-eng")
}

// sameEntry compares audit entries, their JSON by meaning (the tool
// re-indents it).
func sameEntry(a, b api.AuditEntry) bool {
	var ab, bb, aa, ba any
	_ = json.Unmarshal(a.Before, &ab)
	_ = json.Unmarshal(b.Before, &bb)
	_ = json.Unmarshal(a.After, &aa)
	_ = json.Unmarshal(b.After, &ba)
	return a.Index == b.Index && a.Time.Equal(b.Time) && a.Principal == b.Principal && a.Action == b.Action &&
		a.Object == b.Object && reflect.DeepEqual(ab, bb) && reflect.DeepEqual(aa, ba)
}

// syncBuffer is a bytes.Buffer a running command writes while the test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls cond until it holds, for at most a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// operator servers list shows GET /v1/cluster; remove takes a server out
// of a 3-server cluster, and an unknown one is not found.
func TestOperatorServersCommands(t *testing.T) {
	c := startCluster(t, 3)
	e := clusterEnv(c)
	cl := client(t, c)

	var cluster api.Cluster
	decode(t, &cluster, e, "operator", "servers", "list", "-json")
	if len(cluster.Servers) != 3 || cluster.Leader == nil {
		t.Fatalf("servers list -json = %+v", cluster)
	}
	table := ok(t, e, "operator", "servers", "list").stdout
	for i := 0; i < 3; i++ {
		if !rowHas(table, c.ID(i), c.Address(i), c.RaftAddress(i), "voter") {
			t.Errorf("servers list lacks %s:\n%s", c.ID(i), table)
		}
	}
	// Listed by id, in the table, in -json and in status.
	ids := []string{c.ID(0), c.ID(1), c.ID(2)}
	slices.SortFunc(ids, api.CompareNatural)
	_, statusServers, _ := strings.Cut(ok(t, e, "status").stdout, "\nServers\n") // past the Leader line
	for _, out := range []string{table, statusServers} {
		if a, b, c := strings.Index(out, ids[0]+" "), strings.Index(out, ids[1]+" "), strings.Index(out, ids[2]+" "); !(a >= 0 && a < b && b < c) {
			t.Errorf("servers not listed by id (%q):\n%s", ids, out)
		}
	}
	for i, s := range cluster.Servers {
		if s.ID != ids[i] {
			t.Errorf("servers list -json lists %+v, want ids %q in order", cluster.Servers, ids)
			break
		}
	}
	fails(t, ExitNotFound, e, "operator", "servers", "remove", "m-nosuch")

	victim := c.Followers()[0]
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	r := ok(t, e, "operator", "servers", "remove", c.ID(victim))
	if !strings.Contains(r.stdout, "Removed server "+c.ID(victim)) {
		t.Errorf("remove says %q", r.stdout)
	}
	now, err := cl.LeaderCluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(now.Servers) != 2 {
		t.Errorf("after remove the cluster has %+v", now.Servers)
	}
}

// On an -acl cluster: no token and an unknown token are 401 (exit 5, a
// hint at ALLOT_TOKEN), a token without the rule is 403 (exit 5, the rule
// named); the token from ALLOT_TOKEN, -token-file or ALLOT_TOKEN_FILE
// passes, -token-file first.
func TestTokensOnAnACLCluster(t *testing.T) {
	// The operator token is a management token; the harness waits on
	// the leader with it.
	const mgmt = "cli-test-operator-token"
	c := startCluster(t, 1, testcluster.WithOperatorToken(mgmt), testcluster.WithArgs("-acl"))
	addr := env{EnvAddress: strings.Join(c.Addresses(), ",")}
	ctx := context.Background()

	msg := fails(t, ExitDenied, addr, "quota", "list")
	if !strings.Contains(msg, "Hint: pass a token with $ALLOT_TOKEN or -token-file") {
		t.Errorf("401 says %q", msg)
	}
	fails(t, ExitDenied, env{EnvAddress: addr[EnvAddress], EnvToken: "not-a-token"}, "quota", "list")

	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good"), filepath.Join(dir, "bad")
	if err := os.WriteFile(good, []byte(mgmt+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("not-a-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok(t, env{EnvAddress: addr[EnvAddress], EnvToken: mgmt}, "quota", "list")
	ok(t, addr, "-token-file", good, "quota", "list")
	ok(t, env{EnvAddress: addr[EnvAddress], EnvTokenFile: good}, "quota", "list")
	// -token-file wins over ALLOT_TOKEN, which wins over ALLOT_TOKEN_FILE.
	fails(t, ExitDenied, env{EnvAddress: addr[EnvAddress], EnvToken: mgmt}, "-token-file", bad, "quota", "list")
	ok(t, env{EnvAddress: addr[EnvAddress], EnvToken: mgmt, EnvTokenFile: bad}, "quota", "list")

	// A token that may only read quotas may not write one.
	admin, err := api.NewClient(c.Addresses(), mgmt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PutACLPolicy(ctx, "quota-reader", api.ACLPolicyRequest{
		Rules: []api.ACLRule{{Object: api.ACLObjectQuota, Access: api.ACLRead}}}, api.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	reader, err := admin.PutACLToken(ctx, "cli-quota-reader", api.ACLTokenRequest{Description: "cli test", Policies: []string{"quota-reader"}}, api.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	readerEnv := env{EnvAddress: addr[EnvAddress], EnvToken: reader.Secret}
	ok(t, readerEnv, "quota", "list")
	msg = fails(t, ExitDenied, readerEnv, "quota", "set", "acl-eng", "-limit", "cpus=1")
	if !strings.Contains(msg, "Hint: the token's policies need the rule object quota, access write") {
		t.Errorf("403 says %q", msg)
	}
}

// On a TLS cluster that verifies its clients: no CA is exit 5 with a hint
// at -ca-file, no client certificate exit 5 with a hint at -client-cert,
// http:// exit 6; the environment's files pass. None of those mistakes is
// retried for -retry-for: no retry fixes them.
func TestTLSFlags(t *testing.T) {
	c := startCluster(t, 1, testcluster.WithTLS(), testcluster.WithArgs("-tls-verify-incoming"))
	files := c.ClientTLS()
	addr := strings.Join(c.Addresses(), ",")

	msg := failsAtOnce(t, ExitDenied, env{EnvAddress: addr}, "quota", "list")
	if !strings.Contains(msg, "-ca-file") {
		t.Errorf("no CA: %q", msg)
	}
	msg = failsAtOnce(t, ExitDenied, env{EnvAddress: addr}, "-ca-file", files.CAFile, "quota", "list")
	if !strings.Contains(msg, "-client-cert and -client-key") {
		t.Errorf("no client certificate: %q", msg)
	}
	msg = failsAtOnce(t, ExitUnavailable, env{EnvAddress: strings.ReplaceAll(addr, "https://", "http://")}, "quota", "list")
	if !strings.Contains(msg, "https://") {
		t.Errorf("http:// to an HTTPS server: %q", msg)
	}
	// A backup transfer gives up at once too.
	msg = failsAtOnce(t, ExitDenied, env{EnvAddress: addr}, "snapshot", "save", filepath.Join(t.TempDir(), "b.snap"))
	if !strings.Contains(msg, "-ca-file") {
		t.Errorf("snapshot save without a CA: %q", msg)
	}
	ok(t, env{EnvAddress: addr, EnvCACert: files.CAFile, EnvClientCert: files.CertFile, EnvClientKey: files.KeyFile}, "quota", "list")
	ok(t, env{EnvAddress: addr}, "-ca-file", files.CAFile, "-client-cert", files.CertFile, "-client-key", files.KeyFile, "status")
}

// An https:// address of a server that speaks plaintext HTTP fails at
// once, with the hint to use http://.
func TestHTTPSAddressOfAnHTTPServer(t *testing.T) {
	c := shared(t)
	addr := strings.ReplaceAll(strings.Join(c.Addresses(), ","), "http://", "https://")
	msg := failsAtOnce(t, ExitUnavailable, env{EnvAddress: addr}, "quota", "list")
	if !strings.Contains(msg, "the server speaks plaintext HTTP: use an http:// -address") {
		t.Errorf("https:// to an HTTP server: %q", msg)
	}
}

// No server at the address: exit 6, with a hint at -address.
func TestUnreachable(t *testing.T) {
	msg := fails(t, ExitUnavailable, env{EnvAddress: "http://127.0.0.1:1"}, "-retry-for", "0s", "status")
	if !strings.Contains(msg, "connection refused") || !strings.Contains(msg, "-address") {
		t.Errorf("unreachable: %q", msg)
	}
}
