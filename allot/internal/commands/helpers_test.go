package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// shared is one real masterd (-test-hooks, to admit agents without agentd)
// for the tests that do not need a cluster of their own. Each test uses
// names of its own, so they do not see each other's objects.
var (
	sharedOnce    sync.Once
	sharedCluster *testcluster.Cluster
	sharedErr     error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedCluster != nil {
		sharedCluster.Stop()
	}
	os.Exit(code)
}

func shared(t *testing.T) *testcluster.Cluster {
	t.Helper()
	sharedOnce.Do(func() {
		sharedCluster, sharedErr = testcluster.New(testcluster.Config{N: 1, ExtraArgs: []string{"-test-hooks"}, Logf: t.Logf})
		if sharedErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, sharedErr = sharedCluster.WaitLeader(ctx)
	})
	if sharedErr != nil {
		t.Fatalf("shared cluster: %v", sharedErr)
	}
	return sharedCluster
}

// startCluster starts a cluster of n servers for one test and waits for its
// leader.
func startCluster(t *testing.T, n int, opts ...testcluster.Option) *testcluster.Cluster {
	t.Helper()
	c := testcluster.Start(t, n, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// result is what one run of the tool printed and returned.
type result struct {
	args           []string
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("allot %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// env is the environment of a run; nil values are left out.
type env map[string]string

// clusterEnv points the tool at c.
func clusterEnv(c *testcluster.Cluster) env {
	e := env{EnvAddress: strings.Join(c.Addresses(), ",")}
	if c.Token() != "" {
		e[EnvToken] = c.Token()
	}
	return e
}

// run runs the tool in-process with e as its whole environment.
func run(t *testing.T, e env, args ...string) result {
	t.Helper()
	return runCtx(context.Background(), t, e, args...)
}

func runCtx(ctx context.Context, t *testing.T, e env, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Run(ctx, Options{
		Version:   "test",
		Args:      append([]string{"allot"}, args...),
		Stdout:    &stdout,
		Stderr:    &stderr,
		LookupEnv: func(k string) (string, bool) { v, ok := e[k]; return v, ok },
	})
	return result{args: args, stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// ok runs the tool and fails the test unless it exits 0 with nothing on
// stderr.
func ok(t *testing.T, e env, args ...string) result {
	t.Helper()
	r := run(t, e, args...)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("want exit 0 and no error:\n%s", r)
	}
	return r
}

// fails runs the tool and checks that it exits with code, prints only an
// "Error: " line (and maybe a hint) on stderr, and nothing on stdout. It
// returns stderr.
func fails(t *testing.T, code int, e env, args ...string) string {
	t.Helper()
	r := run(t, e, args...)
	if r.code != code || !strings.HasPrefix(r.stderr, "Error: ") || r.stdout != "" {
		t.Fatalf("want exit %d, an Error: line and no output:\n%s", code, r)
	}
	for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if !strings.HasPrefix(line, "Error: ") && !strings.HasPrefix(line, "Hint: ") {
			t.Errorf("stderr line %q is neither an error nor a hint:\n%s", line, r)
		}
	}
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, `{"error"`) {
		t.Errorf("stderr shows a stack or raw JSON:\n%s", r)
	}
	return r.stderr
}

// failsAtOnce is fails for a failure no retry fixes (TLS trust, the wrong
// scheme): it runs the tool with -retry-for 1h under a context that ends
// long before that, so a tool that retried would fail with the context's
// error instead of the one wanted. No clock is read: the check is the
// message.
func failsAtOnce(t *testing.T, code int, e env, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := runCtx(ctx, t, e, append([]string{"-retry-for", "1h"}, args...)...)
	if r.code != code || !strings.HasPrefix(r.stderr, "Error: ") || r.stdout != "" ||
		strings.Contains(r.stderr, "context deadline exceeded") {
		t.Fatalf("want exit %d at once, without retrying:\n%s", code, r)
	}
	return r.stderr
}

// decode runs the tool with -json (which the caller passes) and decodes its
// output into v, refusing unknown fields: the output is the API's JSON.
func decode(t *testing.T, v any, e env, args ...string) {
	t.Helper()
	r := ok(t, e, args...)
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %T: %v\n%s", v, err, r)
	}
}

// client is a Go API client for c, for checking what the tool says.
func client(t *testing.T, c *testcluster.Cluster) *api.Client {
	t.Helper()
	cl, err := api.NewClient(c.Addresses(), c.Token())
	if err != nil {
		t.Fatal(err)
	}
	if c.TLS() {
		cfg, err := c.ClientTLS().Config()
		if err != nil {
			t.Fatal(err)
		}
		cl.SetTLS(cfg)
	}
	return cl
}

// admitAgent admits an agent without agentd (-test-hooks) and returns its id.
func admitAgent(t *testing.T, cl *api.Client, name string, res api.Resources) string {
	t.Helper()
	body := map[string]any{"hostname": name + ".test", "resources": res}
	if _, err := cl.Do(context.Background(), api.Request{Method: http.MethodPut, Path: "/v1/test/agents/" + name, Body: body}, nil); err != nil {
		t.Fatalf("admit agent %s: %v", name, err)
	}
	return "agent-" + name
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
