package provider

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
)

// TestBenchApply1000 times `terraform apply` of 1 000 allot_rate_limit
// resources against a 3-server cluster, then a `terraform plan` with nothing
// to change, with the provider binary built from this module and the real
// terraform at its default parallelism. It reports the timings rather than
// asserting them: the goals (apply ≤ 60 s, no-op plan ≤ 20 s) are for people
// to compare on a known machine.
//
//	ALLOT_BENCH=1 go test ./provider -run TestBenchApply1000 -v -timeout 30m
//
// ALLOT_BENCH_N changes the number of resources.
func TestBenchApply1000(t *testing.T) {
	if os.Getenv("ALLOT_BENCH") == "" {
		t.Skip("benchmark: set ALLOT_BENCH=1 to run it")
	}
	n := 1000
	if s := os.Getenv("ALLOT_BENCH_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("ALLOT_BENCH_N=%q: want a positive number", s)
		}
	}
	c := startCluster(t, 3)
	cli := newTFCLI(t)
	quoted := make([]string, 0, c.N())
	for _, a := range c.Addresses() {
		quoted = append(quoted, fmt.Sprintf("%q", a))
	}
	cli.writeConfig(t, fmt.Sprintf(`
provider "allot" {
  addresses = [%s]
}

resource "allot_rate_limit" "bench" {
  count     = %d
  principal = "bench-${count.index}"
  qps       = 10 + count.index
}
`, strings.Join(quoted, ", "), n))
	env := []string{"ALLOT_TOKEN=" + accToken}

	timed := func(args ...string) time.Duration {
		t.Helper()
		start := time.Now()
		if _, err := cli.run(env, args...); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	apply := timed("apply", "-auto-approve", "-input=false")
	cfg, err := c.client.RateLimitConfig(context.Background(), api.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Limits) != n {
		t.Fatalf("the cluster holds %d rate limits after the apply, want %d", len(cfg.Limits), n)
	}
	// -detailed-exitcode: 0 means no changes, 2 (an error here) changes.
	plan := timed("plan", "-input=false", "-detailed-exitcode")
	// Without refresh the plan makes no API call at all: Terraform alone.
	planNoRefresh := timed("plan", "-input=false", "-detailed-exitcode", "-refresh=false")
	destroy := timed("destroy", "-auto-approve", "-input=false")
	// The apply's writes through the Go client, as many at a time as
	// Terraform's default parallelism: the API's share of the apply.
	writes := timeWrites(t, c.client, n, 10)

	report := fmt.Sprintf("allot_rate_limit × %d against 3 servers: apply %.1fs (goal ≤ 60s), no-op plan %.1fs (goal ≤ 20s; "+
		"%.1fs of it without refresh, i.e. Terraform alone), destroy %.1fs; the same %d writes through the Go client, 10 at a time: %.1fs",
		n, apply.Seconds(), plan.Seconds(), planNoRefresh.Seconds(), destroy.Seconds(), n, writes.Seconds())
	t.Log(report)
	fmt.Println(report)
}

// timeWrites creates n rate limits through the client with parallel workers
// and returns how long it took.
func timeWrites(t *testing.T, client *api.Client, n, parallel int) time.Duration {
	t.Helper()
	ctx := context.Background()
	next := make(chan int)
	errs := make(chan error, parallel)
	start := time.Now()
	for range parallel {
		go func() {
			var err error
			for i := range next {
				qps := float64(10 + i)
				if err == nil {
					_, err = client.PutRateLimit(ctx, fmt.Sprintf("direct-%d", i), api.RateLimitRequest{QPS: &qps}, api.WriteOptions{IfNoneMatch: true})
				}
			}
			errs <- err
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	for range parallel {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	return time.Since(start)
}
