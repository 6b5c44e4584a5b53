// Command bench measures allot against its anchors on this machine and prints
// Markdown tables:
//
//	go run ./tools/bench -scenario writes|failover|graceful|terraform|all [-out FILE]
//
// writes: quota PUTs on a three-server masterd cluster against puts on a
// three-member etcd cluster, with 1 and 64 closed-loop clients.
// failover: SIGKILL the masterd leader while a client writes, 20 times, and
// measure the time to the next acknowledged write.
// graceful: SIGTERM the masterd leader (it hands its leadership over) while a
// client writes, and measure the longest gap between acknowledged writes.
// terraform: apply, plan and destroy 1 000 allot_rate_limit resources beside
// Terraform's floor, 1 000 built-in terraform_data resources.
//
// Everything runs on loopback and is killed on exit, including on Ctrl-C.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/allot/allot/masterd/testcluster"
)

type options struct {
	scenario string
	out      string
	duration time.Duration
	warmup   time.Duration
	clients  []int
	systems  map[string]bool
	rounds   int
	keys     int
	masterd  string
	etcd     string
	keep     bool
	// masterdArgs are appended to every masterd's command line.
	masterdArgs []string

	tfResources int
	tfRounds    int
	tfPlans     int
	tfProvider  string
}

func main() {
	var (
		opts    options
		clients string
		systems string
	)
	flag.StringVar(&opts.scenario, "scenario", "all", "writes, failover, graceful, terraform or all")
	flag.StringVar(&opts.out, "out", "", "append the report to this Markdown file")
	flag.DurationVar(&opts.duration, "duration", 10*time.Second, "length of each measured load step")
	flag.DurationVar(&opts.warmup, "warmup", time.Second, "unmeasured load before each step (opens connections, warms caches)")
	flag.StringVar(&clients, "clients", "1,64", "comma-separated concurrent client counts for the writes scenario")
	flag.StringVar(&systems, "systems", "allot,etcd", "systems the writes scenario measures")
	flag.IntVar(&opts.rounds, "rounds", 20, "leader kills (failover) or leader stops (graceful) per scenario")
	flag.IntVar(&opts.keys, "keys", 1000, "distinct quota roles (and etcd keys) the writes cycle through")
	flag.StringVar(&opts.masterd, "masterd", "", "prebuilt masterd binary (default: go build ./masterd)")
	flag.StringVar(&opts.etcd, "etcd", "etcd", "etcd binary (Debian package "+etcdPackage+")")
	flag.IntVar(&opts.tfResources, "tf-resources", 1000, "resources of each configuration in the terraform scenario")
	flag.IntVar(&opts.tfRounds, "tf-rounds", 1, "rounds of apply, plan and destroy in the terraform scenario")
	flag.IntVar(&opts.tfPlans, "tf-plans", 1, "no-op plans of each kind per round of the terraform scenario")
	flag.Func("masterd-args", "space-separated flags added to every masterd's command line (e.g. \"-raft-log-store wal\")",
		func(v string) error { opts.masterdArgs = strings.Fields(v); return nil })
	flag.StringVar(&opts.tfProvider, "tf-provider", "", "prebuilt terraform-provider-allot binary for the terraform scenario (default: go build .)")
	flag.BoolVar(&opts.keep, "keep", false, "keep the work directory (data and logs of every server)")
	flag.Parse()

	for _, field := range strings.Split(clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || n < 1 || n > 1024 {
			fatalf("-clients: %q is not a count between 1 and 1024", field)
		}
		opts.clients = append(opts.clients, n)
	}
	slices.Sort(opts.clients)
	opts.systems = map[string]bool{}
	for _, s := range strings.Split(systems, ",") {
		s = strings.TrimSpace(s)
		if s != "allot" && s != "etcd" {
			fatalf("-systems: unknown system %q (allot, etcd)", s)
		}
		opts.systems[s] = true
	}
	if opts.keys < 1 || opts.keys > 1_000_000 {
		fatalf("-keys: %d is not between 1 and 1000000", opts.keys)
	}
	if opts.tfResources < 1 || opts.tfResources > 100_000 {
		fatalf("-tf-resources: %d is not between 1 and 100000", opts.tfResources)
	}
	if opts.tfRounds < 1 || opts.tfRounds > 100 {
		fatalf("-tf-rounds: %d is not between 1 and 100", opts.tfRounds)
	}
	if opts.tfPlans < 1 || opts.tfPlans > 100 {
		fatalf("-tf-plans: %d is not between 1 and 100", opts.tfPlans)
	}
	if opts.rounds < 1 || opts.rounds > 1000 {
		fatalf("-rounds: %d is not between 1 and 1000", opts.rounds)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, opts)
	interrupted := ctx.Err() != nil
	stop()
	if interrupted {
		// Whatever failed did so because we stopped it: its logs say nothing.
		fmt.Fprintln(os.Stderr, "bench: interrupted; every process it started is stopped")
		os.Exit(130)
	}
	if err != nil {
		fatalf("%v", err)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	os.Exit(1)
}

func run(ctx context.Context, opts options) error {
	var scenarios []func(context.Context, *bench) (string, error)
	switch opts.scenario {
	case "writes":
		scenarios = append(scenarios, writesScenario)
	case "failover":
		scenarios = append(scenarios, failoverScenario)
	case "graceful":
		scenarios = append(scenarios, gracefulScenario)
	case "terraform":
		scenarios = append(scenarios, terraformScenario)
	case "all":
		scenarios = append(scenarios, writesScenario, failoverScenario, gracefulScenario, terraformScenario)
	default:
		return fmt.Errorf("-scenario: unknown scenario %q (writes, failover, graceful, terraform, all)", opts.scenario)
	}

	b := &bench{opts: opts}
	if (opts.scenario == "writes" || opts.scenario == "all") && opts.systems["etcd"] {
		// Fail before minutes of masterd load if the anchor cannot run.
		path, version, err := findEtcd(opts.etcd)
		if err != nil {
			return err
		}
		b.etcdPath, b.etcdVersion = path, version
	}
	workDir, err := os.MkdirTemp("", "allot-bench-")
	if err != nil {
		return err
	}
	b.workDir = workDir
	if opts.keep {
		fmt.Fprintf(os.Stderr, "bench: work directory %s\n", workDir)
	} else {
		defer os.RemoveAll(workDir)
	}

	report := new(strings.Builder)
	fmt.Fprintf(report, "## allot benchmark, %s\n\n", time.Now().Format("2006-01-02 15:04 MST"))
	report.WriteString(machineDescription(workDir))
	for _, scenario := range scenarios {
		section, err := scenario(ctx, b)
		if err != nil {
			return err
		}
		report.WriteString("\n" + section)
	}
	fmt.Print(report.String())
	if opts.out != "" {
		f, err := os.OpenFile(opts.out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		_, err = f.WriteString(report.String() + "\n")
		if closeErr := f.Close(); err == nil {
			err = closeErr
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", opts.out, err)
		}
	}
	return nil
}

// bench carries what the scenarios share.
type bench struct {
	opts        options
	workDir     string
	masterdBin  string
	etcdPath    string
	etcdVersion string
}

// masterdCluster starts a masterd cluster (building the binary once) and
// waits for its leader.
func (b *bench) masterdCluster(ctx context.Context, name string, n int) (*testcluster.Cluster, int, error) {
	if b.masterdBin == "" {
		bin := b.opts.masterd
		if bin == "" {
			progress("building masterd")
			built, err := testcluster.Build("")
			if err != nil {
				return nil, -1, err
			}
			bin = built
		}
		b.masterdBin = bin
	}
	c, err := testcluster.New(testcluster.Config{
		Binary:    b.masterdBin,
		N:         n,
		BaseDir:   b.workDir + "/" + name,
		ExtraArgs: b.opts.masterdArgs,
	})
	if err != nil {
		return nil, -1, err
	}
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	leader, err := c.WaitLeader(waitCtx)
	if err != nil {
		c.Stop()
		return nil, -1, fmt.Errorf("masterd cluster: %w%s", err, logTails(c))
	}
	return c, leader, nil
}

func logTails(c *testcluster.Cluster) string {
	var s strings.Builder
	for i := range c.N() {
		fmt.Fprintf(&s, "\n--- %s (%s):\n%s", c.ID(i), c.LogPath(i), c.LogTail(i, 20))
	}
	return s.String()
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// quotaPut is the write both scenarios send: limits only, so that no agent
// capacity is needed, cycling over keys roles so that the state stays bounded.
func quotaPut(baseURL string, keys, i int) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodPut, fmt.Sprintf("%s/v1/quotas/%s", baseURL, benchKey(keys, i)), bytes.NewReader(quotaBody(i)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

func benchKey(keys, i int) string { return "bench-" + strconv.Itoa(i%keys) }

func quotaBody(i int) []byte {
	return fmt.Appendf(nil, `{"limits": {"cpus": %d, "mem": 1024}}`, 1+i%64)
}

func doOK(ctx context.Context, client *http.Client, req *http.Request) error {
	resp, err := client.Do(req.WithContext(ctx))
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%w: %s", statusError(resp.StatusCode), strings.TrimSpace(string(body)))
	}
	return nil
}

func postJSON(ctx context.Context, client *http.Client, url string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(data)))
	}
	return json.Unmarshal(data, out)
}

func formatDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	}
}

func met(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}
