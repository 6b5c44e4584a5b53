package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/allot/allot/masterd/api"
)

// An apply plans every resource again just before it writes it. Those
// plans of rate limits, whose dry runs only say whether a write would be
// refused, are not dry-run again once the provider has written: an apply of
// n rate limits, one at a time, makes the plan's n dry runs, one more for
// the first resource the apply plans before any write, and n writes. A
// quota's dry run can warn of effects, so each quota is dry-run twice. The
// next plan, by a new provider, dry-runs its changes again.
func TestApplyDryRunsOnlyBeforeItWrites(t *testing.T) {
	c := sharedCluster(t)
	ctx := context.Background()
	const n = 5
	t.Cleanup(func() {
		for i := range n {
			c.client.DeleteRateLimit(ctx, fmt.Sprintf("acc-apply-dry-%d", i), api.WriteOptions{})
		}
		c.client.DeleteQuota(ctx, "acc-apply-dry-q", api.WriteOptions{})
	})
	cli := newTFCLI(t)
	config := func(qps int) string {
		return c.providerConfig() + fmt.Sprintf(`
resource "allot_rate_limit" "r" {
  count     = %d
  principal = "acc-apply-dry-${count.index}"
  qps       = %d
}

resource "allot_quota" "q" {
  role       = "acc-apply-dry-q"
  limits     = { cpus = %d }
  depends_on = [allot_rate_limit.r] # applied after them, so a rate limit is planned first
}
`, n, qps, qps)
	}
	calls := func(args ...string) map[string]int {
		t.Helper()
		log := filepath.Join(t.TempDir(), "tf.log")
		if out, err := cli.run([]string{"TF_LOG_PROVIDER=debug", "TF_LOG_PATH=" + log}, args...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		counts := map[string]int{}
		call := regexp.MustCompile(`allot API call:.*`)
		method := regexp.MustCompile(`\bmethod=(\S+)`)
		url := regexp.MustCompile(`\burl=\S+/v1/(ratelimits|quotas)/acc-apply-dry-\w+(\S*)`)
		for _, line := range call.FindAllString(string(b), -1) {
			m, u := method.FindStringSubmatch(line), url.FindStringSubmatch(line)
			if m != nil && u != nil {
				counts[strings.TrimSpace(m[1]+" "+u[1]+" "+u[2])]++
			}
		}
		return counts
	}

	cli.writeConfig(t, config(10))
	got := calls("apply", "-auto-approve", "-no-color", "-parallelism=1")
	want := map[string]int{"PUT ratelimits ?dry_run=true": n + 1, "PUT ratelimits": n, "PUT quotas ?dry_run=true": 2, "PUT quotas": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("apply of %d rate limits made %v, want %v", n, got, want)
	}
	cli.writeConfig(t, config(11))
	got = calls("plan", "-no-color", "-refresh=false")
	want = map[string]int{"PUT ratelimits ?dry_run=true": n, "PUT quotas ?dry_run=true": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the next plan made %v, want %v", got, want)
	}
}
