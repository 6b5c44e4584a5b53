// Command simagent runs one simulated allot agent: it stands in for agentd in
// `make demo` and in manual testing, until agentd exists.
//
//	simagent -master http://127.0.0.1:5050 -name node-1 -resources 'cpus:4;mem:4096;disk:8192'
//
// It registers over the real agent protocol (package agentsim) and offers the
// resources it is given, but runs its tasks in memory: a task whose command
// is `sleep N` finishes after N seconds, any other runs until it is killed.
// With -oversubscribed it reports a fixed estimate of usage slack
// (UPDATE_OVERSUBSCRIBED, after every registration), which the master offers
// as revocable resources, as agentd's fixed estimator does:
//
//	simagent -name node-2 -resources 'cpus:4;mem:4096' -oversubscribed 'cpus:2;mem:512'
//
// It logs its registrations and its tasks' launches and ends to stderr, and
// leaves the master on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/allot/allot/masterd/agentsim"
	"github.com/allot/allot/masterd/api"
)

func main() {
	logger := log.New(os.Stderr, "simagent: ", log.Ltime)
	if err := run(os.Args[1:], logger); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "simagent:", err)
		os.Exit(2)
	}
}

// config is what the flags say.
type config struct {
	addresses []string
	token     string
	info      api.AgentInfo
	// oversubscribed is the usage slack the agent reports; nil: none
	// (no UPDATE_OVERSUBSCRIBED at all).
	oversubscribed api.Resources
}

func parseFlags(args []string, output io.Writer) (config, error) {
	fs := flag.NewFlagSet("simagent", flag.ContinueOnError)
	fs.SetOutput(output)
	var (
		master       = fs.String("master", envOr("ALLOT_ADDR", "http://127.0.0.1:5050"), "comma-separated masterd URLs (or ALLOT_ADDR)")
		name         = fs.String("name", "node-1", "the agent's name, unique in the cluster (reservations name it)")
		hostname     = fs.String("hostname", "", "the hostname offers show (default: the name)")
		resources    = fs.String("resources", "cpus:4;mem:4096;disk:8192", "the resources the agent offers, as name:value;name:value")
		capabilities = fs.String("capabilities", "", "comma-separated agent capabilities, e.g. "+api.CapabilityTaskResourceLimits)
		slack        = fs.String("oversubscribed", "", "usage slack to report as the agent's estimate, as name:value;name:value "+
			"(each at most the agent's own; default: no estimate)")
	)
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	cfg := config{addresses: api.SplitAddresses(*master), token: os.Getenv("ALLOT_TOKEN")}
	if len(cfg.addresses) == 0 {
		return config{}, errors.New("-master: no masterd URL given")
	}
	if strings.TrimSpace(*name) == "" {
		return config{}, errors.New("-name must not be empty")
	}
	res, err := api.ParseResources(*resources)
	if err != nil {
		return config{}, fmt.Errorf("-resources %q: %w", *resources, err)
	}
	if res.IsZero() {
		return config{}, fmt.Errorf("-resources %q: an agent needs some resources to offer", *resources)
	}
	cfg.info = api.AgentInfo{Name: *name, Hostname: *hostname, Resources: res}
	if cfg.info.Hostname == "" {
		cfg.info.Hostname = *name
	}
	for _, c := range strings.Split(*capabilities, ",") {
		if c = strings.TrimSpace(c); c != "" {
			cfg.info.Capabilities = append(cfg.info.Capabilities, c)
		}
	}
	if *slack != "" {
		if cfg.oversubscribed, err = parseSlack(*slack, res); err != nil {
			return config{}, fmt.Errorf("-oversubscribed %q: %w", *slack, err)
		}
	}
	return cfg, nil
}

// parseSlack reads an estimate and checks it as the master will: only the
// agent's own resources, each at most its total.
func parseSlack(s string, total api.Resources) (api.Resources, error) {
	slack, err := api.ParseResources(s)
	if err != nil {
		return nil, err
	}
	for _, name := range slack.Names() {
		have, ok := total[name]
		switch {
		case !ok:
			return nil, fmt.Errorf("the agent has no %s (it has %s)", name, total)
		case slack[name] > have:
			return nil, fmt.Errorf("%s %g is more than the agent's %g", name, slack[name], have)
		}
	}
	return slack, nil
}

func run(args []string, logger *log.Logger) error {
	cfg, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	agent, err := start(ctx, cfg, logger)
	if err != nil {
		return err
	}
	<-ctx.Done()
	agent.Stop()
	logger.Printf("agent %s stopped", cfg.info.Name)
	return nil
}

// start registers the agent as cfg says and logs its registrations and
// tasks until ctx ends.
func start(ctx context.Context, cfg config, logger *log.Logger) (*agentsim.Agent, error) {
	agent, err := agentsim.New(cfg.addresses, cfg.token, cfg.info, agentsim.Options{Logf: logger.Printf})
	if err != nil {
		return nil, err
	}
	logger.Printf("agent %s (%s) registering with %s", cfg.info.Name, cfg.info.Resources, strings.Join(cfg.addresses, ","))
	if cfg.oversubscribed != nil {
		// Sent once registered, and again after every registration.
		agent.Client().SetOversubscribed(cfg.oversubscribed)
		logger.Printf("agent %s reports usage slack %s", cfg.info.Name, cfg.oversubscribed)
	}
	if err := agent.Start(ctx); err != nil {
		return nil, err
	}
	go logRegistrations(ctx, agent, logger)
	go newTaskLog(agent, logger).follow(ctx)
	return agent, nil
}

// logRegistrations logs every REGISTERED: the first, and those after a lost
// session or a master failover.
func logRegistrations(ctx context.Context, agent *agentsim.Agent, logger *log.Logger) {
	for n := 1; agent.Client().WaitRegistered(ctx, n) == nil; n++ {
		logger.Printf("registered as agent %s (registration %d)", agent.AgentID(), n)
	}
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
