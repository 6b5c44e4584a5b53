// Command masterd is the allot master: a Raft-replicated policy store with the
// operator and scheduler APIs. `masterd -dev` runs a single in-memory server.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/server"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "masterd:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("masterd", flag.ContinueOnError)
	var (
		cfg        server.Config
		join       string
		rateLimits string
		logLevel   string
	)
	fs.BoolVar(&cfg.Dev, "dev", false, "run a single in-memory server with no setup (data is lost on exit)")
	fs.StringVar(&cfg.ID, "id", "", "this server's unique id in the Raft cluster")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "directory for the Raft log and snapshots")
	fs.StringVar(&cfg.HTTPAddr, "http", "127.0.0.1:5050", "address of the HTTP API")
	fs.StringVar(&cfg.RaftAddr, "raft", "", "address for Raft traffic between servers")
	fs.BoolVar(&cfg.Bootstrap, "bootstrap", false, "make this server a new one-member cluster when it has no state (harmless when it has)")
	fs.StringVar(&join, "join", "", "comma-separated API URLs of cluster servers to join when this server has no state")
	fs.StringVar(&cfg.OperatorToken, "operator-token", os.Getenv("ALLOT_OPERATOR_TOKEN"), "bearer token required on every call but /v1/health (or ALLOT_OPERATOR_TOKEN)")
	fs.StringVar(&rateLimits, "rate-limits", "", "rates.json (Mesos format) that seeds the rate-limit configuration of a new cluster")
	fs.DurationVar(&cfg.AllocationInterval, "allocation-interval", time.Second, "time between allocation cycles")
	fs.DurationVar(&cfg.OfferTimeout, "offer-timeout", 30*time.Second, "how long an offer stays outstanding before it is rescinded")
	fs.DurationVar(&cfg.AgentPingTimeout, "agent-ping-timeout", 15*time.Second, "how long an agent may stay silent before it counts as disconnected")
	fs.DurationVar(&cfg.AgentRemovalTimeout, "agent-removal-timeout", 10*time.Minute, "how long a disconnected agent's tasks stay TASK_UNREACHABLE before they are TASK_GONE")
	fs.DurationVar(&cfg.HeartbeatInterval, "heartbeat-interval", 15*time.Second, "how often scheduler streams get a HEARTBEAT event")
	fs.Float64Var(&cfg.RecoveryAgentRatio, "recovery-agent-ratio", 0.8, "share of admitted agents that must re-register before a new leader sends offers while quotas exist")
	fs.DurationVar(&cfg.RecoveryTimeout, "recovery-timeout", 10*time.Minute, "longest a new leader waits for agents to re-register")
	fs.BoolVar(&cfg.TestHooks, "test-hooks", false, "enable PUT /v1/test/agents/{name} to admit agents without agentd (tests only)")
	fs.Uint64Var(&cfg.SnapshotThreshold, "raft-snapshot-threshold", 0, "log entries between snapshots (0 = 8192)")
	fs.DurationVar(&cfg.SnapshotInterval, "raft-snapshot-interval", 0, "how often the snapshot threshold is checked (0 = 120s)")
	fs.StringVar(&logLevel, "log-level", "info", "trace, debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if cfg.RecoveryAgentRatio < 0 || cfg.RecoveryAgentRatio > 1 {
		return fmt.Errorf("-recovery-agent-ratio must be between 0 and 1, not %v", cfg.RecoveryAgentRatio)
	}
	for name, d := range map[string]time.Duration{"allocation-interval": cfg.AllocationInterval, "offer-timeout": cfg.OfferTimeout,
		"agent-ping-timeout": cfg.AgentPingTimeout, "recovery-timeout": cfg.RecoveryTimeout,
		"agent-removal-timeout": cfg.AgentRemovalTimeout, "heartbeat-interval": cfg.HeartbeatInterval} {
		if d <= 0 {
			return fmt.Errorf("-%s must be positive, not %v", name, d)
		}
	}
	cfg.Join = api.SplitAddresses(join)
	if rateLimits != "" {
		rl, err := readRateLimits(rateLimits)
		if err != nil {
			return err
		}
		cfg.RateLimits = rl
	}
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "masterd", Level: hclog.LevelFromString(logLevel)})

	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	cfg.Logger.Info("serving", "api", srv.APIAddress(), "id", cfg.ID, "dev", cfg.Dev)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve() }()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	select {
	case err := <-errc:
		return err
	case sig := <-sigs:
		cfg.Logger.Info("shutting down", "signal", sig.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(ctx)
}

// readRateLimits reads a Mesos rates.json strictly.
func readRateLimits(path string) (*api.RateLimitConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("-rate-limits: %w", err)
	}
	defer f.Close()
	var cfg api.RateLimitConfig
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("-rate-limits %s: %w", path, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("-rate-limits %s: data after the JSON object", path)
	}
	return &cfg, nil
}
