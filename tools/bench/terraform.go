package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// The terraform scenario times Terraform against its own floor: n built-in
// terraform_data resources (no provider, no API) beside n allot_rate_limit
// resources against a 3-server cluster, in the same run, so that only the
// ratio matters on a shared machine. The provider is the local build of this
// module, installed through dev_overrides: nothing is downloaded and no
// `terraform init` runs.

// Goals of issue 14, as ratios of allot_rate_limit to terraform_data.
const (
	tfGoalApply   = 1.2
	tfGoalPlan    = 1.5
	tfGoalDestroy = 1.2
)

// tfStep is one timed Terraform command, run on both configurations.
type tfStep struct {
	name    string
	args    []string
	goal    float64 // 0: no goal, shown for the breakdown
	changed bool    // runs on the configuration with every qps changed
}

var tfSteps = []tfStep{
	{name: "`terraform apply`", args: []string{"apply", "-auto-approve", "-input=false"}, goal: tfGoalApply},
	// -detailed-exitcode: 0 is no changes; 2 (an error here) would mean the
	// apply left something to do.
	{name: "`terraform plan`, nothing to change", args: []string{"plan", "-input=false", "-detailed-exitcode"}, goal: tfGoalPlan},
	{name: "the same plan with `-refresh=false`", args: []string{"plan", "-input=false", "-detailed-exitcode", "-refresh=false"}},
	// Every resource updated in place, as when a team retunes its limits.
	{name: "`terraform apply`, every qps changed", args: []string{"apply", "-auto-approve", "-input=false"}, changed: true},
	{name: "`terraform destroy`", args: []string{"destroy", "-auto-approve", "-input=false"}, goal: tfGoalDestroy},
}

// tfWorkspace is one Terraform working directory and its configuration.
type tfWorkspace struct {
	label  string // for the table: "terraform_data × 1 000"
	dir    string
	env    []string
	config func(changed bool) string
}

func terraformScenario(ctx context.Context, b *bench) (string, error) {
	n, rounds := b.opts.tfResources, b.opts.tfRounds
	tfPath, err := exec.LookPath("terraform")
	if err != nil {
		return "", errors.New("terraform scenario: terraform is not on the PATH")
	}
	tfVersion := terraformVersion(tfPath)

	providerDir, err := b.providerDir(ctx)
	if err != nil {
		return "", err
	}

	progress("terraform: starting 3 masterd servers")
	c, _, err := b.masterdCluster(ctx, "terraform-masterd", 3)
	if err != nil {
		return "", err
	}
	defer c.Stop()
	client, err := api.NewClient(c.Addresses(), "")
	if err != nil {
		return "", err
	}

	cliConfig := filepath.Join(b.workDir, "terraform.tfrc")
	if err := os.WriteFile(cliConfig, []byte(fmt.Sprintf(`provider_installation {
  dev_overrides {
    "allot/allot" = %q
  }
  direct {}
}
`, providerDir)), 0o644); err != nil {
		return "", err
	}
	env := append(os.Environ(), "TF_CLI_CONFIG_FILE="+cliConfig, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
	// A TF_LOG of the caller's would time the logging.
	env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "TF_LOG") })

	floor, err := newTFWorkspace(b.workDir, "terraform-floor", fmt.Sprintf("`terraform_data` × %d", n), env, func(changed bool) string {
		return floorConfig(n, firstQPS(changed))
	})
	if err != nil {
		return "", err
	}
	allot, err := newTFWorkspace(b.workDir, "terraform-allot", fmt.Sprintf("`allot_rate_limit` × %d", n), env, func(changed bool) string {
		return rateLimitConfig(c.Addresses(), n, firstQPS(changed))
	})
	if err != nil {
		return "", err
	}

	// times[step][workspace] holds one duration per round. The two
	// configurations run each step back to back, so that a change in the
	// machine's load hits both of a step's figures alike.
	// A no-op plan is short and moves most with the machine's load:
	// -tf-plans repeats each plan step within a round for more pairs.
	times := make([][2][]tfTime, len(tfSteps))
	for round := range rounds {
		for i, step := range tfSteps {
			repeats := 1
			if step.args[0] == "plan" {
				repeats = b.opts.tfPlans
			}
			for range repeats {
				for w, ws := range []*tfWorkspace{floor, allot} {
					if err := ws.use(step.changed); err != nil {
						return "", err
					}
					d, err := ws.run(ctx, step.args...)
					if err != nil {
						return "", fmt.Errorf("terraform %s, round %d: %w%s", ws.label, round+1, err, logTails(c))
					}
					times[i][w] = append(times[i][w], d)
					progress("terraform round %d/%d: %s %s: %s (CPU %s)", round+1, rounds, ws.label, step.args[0], formatDuration(d.wall), formatDuration(d.cpu))
				}
			}
			// The figures are only worth something if the cluster holds
			// what Terraform says it does.
			want := n
			if step.args[0] == "destroy" {
				want = 0
			}
			if err := checkRateLimits(ctx, client, want, firstQPS(step.changed)); err != nil {
				return "", fmt.Errorf("terraform round %d, after %s: %w", round+1, step.args[0], err)
			}
		}
	}

	// The API's share of the apply: the same writes through the Go client,
	// as many at a time as Terraform's default parallelism.
	progress("terraform: %d rate-limit writes through the Go client, 10 at a time", n)
	direct, err := directWrites(ctx, client, n, 10)
	if err != nil {
		return "", fmt.Errorf("terraform: direct writes: %w", err)
	}
	return terraformTable(n, rounds, b.opts.tfPlans, tfVersion, floor.label, allot.label, times, direct), nil
}

// providerDir returns the directory dev_overrides points at: one holding
// terraform-provider-allot, built from this tree unless -tf-provider names a
// binary (to compare two builds on the same machine).
func (b *bench) providerDir(ctx context.Context) (string, error) {
	dir := filepath.Join(b.workDir, "terraform-provider")
	binary := filepath.Join(dir, "terraform-provider-allot")
	if b.opts.tfProvider != "" {
		// dev_overrides wants a directory and the binary's usual name.
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		src, err := filepath.Abs(b.opts.tfProvider)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(src); err != nil {
			return "", fmt.Errorf("-tf-provider: %w", err)
		}
		return dir, os.Symlink(src, binary)
	}
	root, err := testcluster.ModuleRoot("")
	if err != nil {
		return "", err
	}
	progress("terraform: building terraform-provider-allot")
	build := exec.CommandContext(ctx, "go", "build", "-o", binary, ".")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build terraform-provider-allot: %w\n%s", err, out)
	}
	return dir, nil
}

// firstQPS is the qps of bench-0; bench-i has firstQPS + i. The changed
// configuration raises every one.
func firstQPS(changed bool) int {
	if changed {
		return 20
	}
	return 10
}

func floorConfig(n, qps int) string {
	// The same values as the rate limits, so that both states hold alike.
	return fmt.Sprintf(`resource "terraform_data" "bench" {
  count = %d
  input = {
    principal = "bench-${count.index}"
    qps       = %d + count.index
  }
}
`, n, qps)
}

func rateLimitConfig(addresses []string, n, qps int) string {
	quoted := make([]string, 0, len(addresses))
	for _, a := range addresses {
		quoted = append(quoted, fmt.Sprintf("%q", a))
	}
	return fmt.Sprintf(`terraform {
  required_providers {
    allot = { source = "allot/allot" }
  }
}

provider "allot" {
  addresses = [%s]
}

resource "allot_rate_limit" "bench" {
  count     = %d
  principal = "bench-${count.index}"
  qps       = %d + count.index
}
`, strings.Join(quoted, ", "), n, qps)
}

func newTFWorkspace(workDir, name, label string, env []string, config func(changed bool) string) (*tfWorkspace, error) {
	dir := filepath.Join(workDir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &tfWorkspace{label: label, dir: dir, env: env, config: config}, nil
}

// use writes the configuration a step runs on to main.tf.
func (ws *tfWorkspace) use(changed bool) error {
	return os.WriteFile(filepath.Join(ws.dir, "main.tf"), []byte(ws.config(changed)), 0o644)
}

// tfTime is what one terraform command took: wall-clock time, and the CPU
// time of terraform and the provider processes it started, which another
// process's load on the machine changes much less.
type tfTime struct{ wall, cpu time.Duration }

// run runs terraform in the workspace and returns how long it took.
func (ws *tfWorkspace) run(ctx context.Context, args ...string) (tfTime, error) {
	cmd := exec.CommandContext(ctx, "terraform", append([]string{"-chdir=" + ws.dir, args[0], "-no-color"}, args[1:]...)...)
	cmd.Env = ws.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	elapsed := tfTime{wall: time.Since(start)}
	if err != nil {
		return elapsed, fmt.Errorf("terraform %s: %w\n%s", strings.Join(args, " "), err, tail(out.String(), 40))
	}
	// The rusage of a waited-for process includes that of the children it
	// waited for: the provider processes.
	elapsed.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return elapsed, nil
}

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

func terraformVersion(path string) string {
	out, err := exec.Command(path, "version", "-json").Output()
	if err != nil {
		return "unknown"
	}
	var v struct {
		Version string `json:"terraform_version"`
	}
	if json.Unmarshal(out, &v) != nil || v.Version == "" {
		return "unknown"
	}
	return v.Version
}

// checkRateLimits fails unless the cluster holds exactly want rate limits
// of the configuration's principals, bench-i with qps qps0 + i.
func checkRateLimits(ctx context.Context, client *api.Client, want, qps0 int) error {
	cfg, err := client.RateLimitConfig(ctx, api.ReadOptions{})
	if err != nil {
		return err
	}
	got := 0
	for _, limit := range cfg.Limits {
		var i int
		if _, err := fmt.Sscanf(limit.Principal, "bench-%d", &i); err != nil {
			continue
		}
		got++
		if limit.QPS == nil {
			return fmt.Errorf("the cluster holds %s without a qps, want %d", limit.Principal, qps0+i)
		}
		if *limit.QPS != float64(qps0+i) {
			return fmt.Errorf("the cluster holds %s with qps %g, want %d", limit.Principal, *limit.QPS, qps0+i)
		}
	}
	if got != want {
		return fmt.Errorf("the cluster holds %d bench-* rate limits, want %d", got, want)
	}
	return nil
}

// directWrites creates n rate limits through the Go client with parallel
// workers, deletes them again, and returns how long the creates took.
func directWrites(ctx context.Context, client *api.Client, n, parallel int) (time.Duration, error) {
	each := func(do func(i int) error) error {
		next := make(chan int)
		errs := make(chan error, parallel)
		var wg sync.WaitGroup
		for range parallel {
			wg.Go(func() {
				var err error
				for i := range next {
					if err == nil {
						err = do(i)
					}
				}
				errs <- err
			})
		}
		for i := range n {
			next <- i
		}
		close(next)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}
	start := time.Now()
	err := each(func(i int) error {
		qps := float64(10 + i)
		_, err := client.PutRateLimit(ctx, fmt.Sprintf("direct-%d", i), api.RateLimitRequest{QPS: &qps}, api.WriteOptions{IfNoneMatch: true})
		return err
	})
	elapsed := time.Since(start)
	if err != nil {
		return 0, err
	}
	return elapsed, each(func(i int) error {
		return client.DeleteRateLimit(ctx, fmt.Sprintf("direct-%d", i), api.WriteOptions{})
	})
}

func median(samples []tfTime, of func(tfTime) time.Duration) time.Duration {
	s := make([]time.Duration, 0, len(samples))
	for _, t := range samples {
		s = append(s, of(t))
	}
	slices.Sort(s)
	return percentile(s, 0.5)
}

func wall(t tfTime) time.Duration { return t.wall }
func cpu(t tfTime) time.Duration  { return t.cpu }

func terraformTable(n, rounds, plans int, tfVersion, floorLabel, allotLabel string, times [][2][]tfTime, direct time.Duration) string {
	var s strings.Builder
	fmt.Fprintf(&s, "### terraform: %d resources, Terraform %s, default parallelism (10), %d %s\n\n", n, tfVersion, rounds, plural(rounds, "round", "rounds"))
	fmt.Fprintf(&s, "The floor is %s: built into Terraform, no provider process, no API. ", floorLabel)
	fmt.Fprintf(&s, "Beside it, %s against 3 masterd servers, with the provider built from this tree (dev_overrides). ", allotLabel)
	s.WriteString("Each step runs on both configurations back to back. ")
	s.WriteString("CPU is that of terraform and the provider processes it starts (not the servers').")
	if rounds > 1 || plans > 1 {
		fmt.Fprintf(&s, " Times are medians over the rounds (%d %s of each plan per round); the ratio's range is over the back-to-back pairs.", plans, plural(plans, "run", "runs"))
	}
	s.WriteString("\n\n")
	fmt.Fprintf(&s, "| step | %s | %s | ratio | goal | met | CPU ratio |\n|---|---:|---:|---:|---|---|---:|\n", floorLabel, allotLabel)
	for i, step := range tfSteps {
		floor, allot := median(times[i][0], wall), median(times[i][1], wall)
		ratio := float64(allot) / float64(floor)
		ratioText := fmt.Sprintf("%.2f×", ratio)
		if len(times[i][0]) > 1 {
			lo, hi := ratioRange(times[i][0], times[i][1], wall)
			ratioText = fmt.Sprintf("%.2f× (%.2f–%.2f)", ratio, lo, hi)
		}
		goal, ok := "", ""
		if step.goal > 0 {
			goal, ok = fmt.Sprintf("≤ %.1f×", step.goal), met(ratio <= step.goal)
			if pairs := len(times[i][0]); pairs > 1 {
				// How reliably: one pair caught by a burst of another
				// process's load moves the range, not the count.
				ok += fmt.Sprintf(" (%d of %d pairs)", pairsWithin(times[i][0], times[i][1], step.goal), pairs)
			}
		}
		cpuText := fmt.Sprintf("%s ÷ %s = %.2f×", formatDuration(median(times[i][1], cpu)), formatDuration(median(times[i][0], cpu)),
			float64(median(times[i][1], cpu))/float64(median(times[i][0], cpu)))
		fmt.Fprintf(&s, "| %s | %s | %s | %s | %s | %s | %s |\n", step.name, formatDuration(floor), formatDuration(allot), ratioText, goal, ok, cpuText)
	}
	fmt.Fprintf(&s, "\nThe same %d rate-limit creates through the Go client, 10 at a time (the API's share of the apply): %s.\n", n, formatDuration(direct))
	return s.String()
}

// pairsWithin counts the back-to-back pairs whose wall-time ratio is at
// most goal.
func pairsWithin(floor, allot []tfTime, goal float64) int {
	n := 0
	for r := range floor {
		if float64(allot[r].wall)/float64(floor[r].wall) <= goal {
			n++
		}
	}
	return n
}

// ratioRange is the lowest and highest per-round ratio.
func ratioRange(floor, allot []tfTime, of func(tfTime) time.Duration) (lo, hi float64) {
	for r := range floor {
		ratio := float64(of(allot[r])) / float64(of(floor[r]))
		if r == 0 || ratio < lo {
			lo = ratio
		}
		if r == 0 || ratio > hi {
			hi = ratio
		}
	}
	return lo, hi
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
