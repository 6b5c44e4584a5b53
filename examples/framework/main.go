// Command framework is an example allot framework, written to be read: it
// runs a few command tasks to completion through the scheduler API and
// exits.
//
//	framework -master http://127.0.0.1:5050 -name hello -role '*' -tasks 3 -command 'sleep 1'
//
// With ACLs on, the framework calls with a token from -token-file or
// ALLOT_TOKEN (never from argv, where ps shows it to every user); its
// principal is the token's. -label sets it apart from the principal's other
// frameworks for rate limiting (/v1/ratelimits/{principal}/labels/{label}).
//
// The protocol, in the order this program goes through it (scheduler.go):
//
//  1. SUBSCRIBE opens a stream of events for the framework.
//  2. OFFERS bring resources of agents; ACCEPT launches tasks on them,
//     DECLINE hands back what the framework does not need.
//  3. UPDATE events report each task's state; every one carrying a uuid
//     must be acknowledged (ACKNOWLEDGE), or the agent keeps resending it.
//  4. TEARDOWN removes the framework once its work is done.
//
// It exits 0 when every task finished, 1 when one did not or on -timeout,
// 2 on bad flags.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/allot/allot/masterd/api"
)

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "framework:", err)
		os.Exit(2)
	}
	if err := run(cfg); err != nil {
		report(os.Stderr, err)
		os.Exit(1)
	}
}

// config is what the flags say.
type config struct {
	addresses []string
	token     string
	info      api.FrameworkInfo
	tasks     int
	command   string
	resources api.Resources
	// limits are cycled through the tasks: task i gets limits[i % len].
	limits  []api.Limits
	timeout time.Duration
	// tls is how https masters are verified (nil: plaintext or the
	// system's roots).
	tls *tls.Config
}

// limitsFlag collects repeated -limits flags.
type limitsFlag []api.Limits

func (f *limitsFlag) String() string { return fmt.Sprint(*f) }
func (f *limitsFlag) Set(s string) error {
	l, err := api.ParseLimits(s)
	if err != nil {
		return err
	}
	*f = append(*f, l)
	return nil
}

func parseFlags(args []string, output io.Writer) (config, error) {
	fs := flag.NewFlagSet("framework", flag.ContinueOnError)
	fs.SetOutput(output)
	var (
		master    = fs.String("master", envOr("ALLOT_ADDR", "http://127.0.0.1:5050"), "comma-separated masterd URLs (or ALLOT_ADDR)")
		name      = fs.String("name", "hello", "the framework's name")
		role      = fs.String("role", "*", "the role whose resources the framework is offered")
		principal = fs.String("principal", "", "the principal the framework's calls are rate limited by (with ACLs: the token's, which an empty one defaults to)")
		label     = fs.String("label", "", "the framework's label: its calls also wait under the limit of (principal, label) when one is set")
		tokenFile = fs.String("token-file", "", "file holding the bearer token for the masters (a trailing newline is trimmed; default ALLOT_TOKEN; never pass a token in argv)")
		tasks     = fs.Int("tasks", 3, "how many tasks to run")
		command   = fs.String("command", "sleep 1", "the command each task runs")
		cpus      = fs.Float64("cpus", 0.5, "cores each task asks for")
		mem       = fs.Float64("mem", 64, "MiB of memory each task asks for")
		timeout   = fs.Duration("timeout", time.Minute, "how long to wait for the tasks to end")
		limits    limitsFlag
	)
	var tlsFiles api.TLSFiles
	fs.StringVar(&tlsFiles.CAFile, "tls-ca", "", "PEM CA the masters' certificates must chain to (https:// masters)")
	fs.StringVar(&tlsFiles.CertFile, "tls-cert", "", "PEM client certificate presented to the masters (masterd -tls-verify-incoming), with -tls-key")
	fs.StringVar(&tlsFiles.KeyFile, "tls-key", "", "PEM private key of -tls-cert")
	fs.Var(&limits, "limits", "task limits, e.g. 'cpus:1;mem:Infinity' (repeat it: task i gets the i-th, cycling; '' is none)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	cfg := config{
		addresses: api.SplitAddresses(*master),
		token:     os.Getenv("ALLOT_TOKEN"),
		info:      api.FrameworkInfo{Name: *name, Principal: *principal, Label: *label, Roles: []string{*role}},
		tasks:     *tasks,
		command:   *command,
		resources: api.Resources{"cpus": *cpus, "mem": *mem}.Normalized(),
		limits:    limits,
		timeout:   *timeout,
	}
	switch {
	case len(cfg.addresses) == 0:
		return config{}, errors.New("-master: no masterd URL given")
	case strings.TrimSpace(*name) == "":
		return config{}, errors.New("-name must not be empty")
	case strings.TrimSpace(*role) == "":
		return config{}, errors.New("-role must not be empty (the unreserved role is '*')")
	case cfg.tasks < 1:
		return config{}, fmt.Errorf("-tasks must be at least 1, not %d", cfg.tasks)
	case strings.TrimSpace(cfg.command) == "":
		return config{}, errors.New("-command must not be empty")
	case cfg.timeout <= 0:
		return config{}, fmt.Errorf("-timeout must be positive, not %v", cfg.timeout)
	}
	if *label != "" {
		if err := api.ValidateName("label", *label); err != nil {
			return config{}, fmt.Errorf("-label: %w", err)
		}
	}
	if *tokenFile != "" {
		token, err := api.ReadTokenFile(*tokenFile)
		if err != nil {
			return config{}, err
		}
		cfg.token = token
	}
	if err := cfg.resources.Validate("task resources"); err != nil {
		return config{}, fmt.Errorf("-cpus/-mem: %w", err)
	}
	if cfg.resources.IsZero() {
		return config{}, errors.New("-cpus/-mem: a task must ask for some cpus or mem")
	}
	for _, l := range cfg.limits {
		if err := l.Validate(cfg.resources); err != nil {
			return config{}, fmt.Errorf("-limits: %w", err)
		}
	}
	if !tlsFiles.IsZero() {
		tlsConfig, err := tlsFiles.Config()
		if err != nil {
			return config{}, fmt.Errorf("-tls-ca/-tls-cert/-tls-key: %w", err)
		}
		cfg.tls = tlsConfig
	}
	return cfg, nil
}

func run(cfg config) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeoutCause(ctx, cfg.timeout, fmt.Errorf("timed out after %v", cfg.timeout))
	defer cancel()

	client, err := schedulerClient(cfg)
	if err != nil {
		return err
	}
	return newFramework(cfg, os.Stdout).run(ctx, client)
}

// schedulerClient is the client the flags describe: the masters, the token,
// and TLS when asked for.
func schedulerClient(cfg config) (*api.SchedulerClient, error) {
	client, err := api.NewSchedulerClient(cfg.addresses, cfg.token)
	if err != nil {
		return nil, err
	}
	if cfg.tls != nil {
		client.SetTLS(cfg.tls)
	}
	client.Retrying = retrying(os.Stderr)
	return client, nil
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
