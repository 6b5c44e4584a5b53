// Command masterd is the allot master: a Raft-replicated policy store with the
// operator and scheduler APIs. `masterd -dev` runs a single in-memory server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/logs"
	"github.com/allot/allot/masterd/internal/server"
	"github.com/allot/allot/masterd/internal/strictjson"
	"github.com/allot/allot/raftstore"
)

// version is set at build time (go build -ldflags "-X main.version=v1.2.3");
// without it, -version reports what the Go toolchain recorded in the binary.
var version string

// gcPercent is the collector's target (GOGC) when the environment sets
// none. Every write allocates some 17 KB (request, Raft entry, audit entry,
// answer) over a live heap of a few tens of MB, so with Go's 100 the
// collector ran several times a second under load. Three servers taking
// 64 concurrent quota PUTs spent 137-147 µs of CPU per write at 200 against
// 151-162 µs at 100, for a leader's resident memory of 50-53 MB instead of
// 40 (at 400: 133-136 µs, 66-75 MB; see the benchmarks guide). GOGC still
// rules when set.
const gcPercent = 200

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	code, err := run(os.Args[1:], os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "masterd:", err)
	}
	os.Exit(code)
}

// options are masterd's flags that are not server.Config fields.
type options struct {
	join, rateLimits, logLevel string
	replace, version           bool
	logRepeatWindow            time.Duration
	// operatorTokenFile holds the operator token; operatorTokenInArgv is
	// set when -operator-token was given on the command line (ps shows it).
	operatorTokenFile   string
	operatorTokenInArgv bool
}

func newFlagSet(cfg *server.Config, o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("masterd", flag.ContinueOnError)
	fs.BoolVar(&cfg.Dev, "dev", false, "run a single in-memory server with no setup (data is lost on exit)")
	fs.StringVar(&cfg.ID, "id", "", "this server's unique id in the Raft cluster")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "directory for the Raft log and snapshots")
	fs.StringVar(&cfg.HTTPAddr, "http", "127.0.0.1:5050", "address of the HTTP API")
	fs.StringVar(&cfg.RaftAddr, "raft", "", "address for Raft traffic between servers")
	fs.BoolVar(&cfg.Bootstrap, "bootstrap", false, "make this server a new one-member cluster when it has no state (harmless when it has)")
	fs.StringVar(&o.join, "join", "", "comma-separated API URLs of cluster servers to join when this server has no state")
	fs.BoolVar(&o.replace, "replace", false, "with -join: take over the id of a member that is at another address and no longer answers the leader (a replacement host); refused while that member is live")
	fs.StringVar(&cfg.OperatorToken, "operator-token", os.Getenv("ALLOT_OPERATOR_TOKEN"), "bearer token required on every call but /v1/health (or ALLOT_OPERATOR_TOKEN); with -acl, a management token with principal \"operator\". On the command line it is visible in ps: prefer -operator-token-file")
	fs.StringVar(&o.operatorTokenFile, "operator-token-file", "", "file holding the operator token (a trailing newline is trimmed; instead of -operator-token)")
	fs.BoolVar(&cfg.ACL, "acl", false, "enforce ACLs: every call but GET /v1/health and POST /v1/acl/bootstrap needs a token whose policies allow it (on as well whenever the cluster was bootstrapped)")
	fs.StringVar(&o.rateLimits, "rate-limits", "", "rates.json (Mesos format) that seeds the rate-limit configuration of a new cluster")
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
	fs.DurationVar(&cfg.RaftTiming.HeartbeatTimeout, "raft-heartbeat-timeout", raftstore.DefaultTiming.HeartbeatTimeout,
		"how long a follower goes without hearing from the leader before it stands for election (the leader's heartbeats go 10 times as often); shorter is a faster failover, too short for the network deposes healthy leaders")
	fs.DurationVar(&cfg.RaftTiming.ElectionTimeout, "raft-election-timeout", 0,
		"how long a candidate waits for votes before it starts another election; at least -raft-heartbeat-timeout (0 = -raft-heartbeat-timeout)")
	fs.DurationVar(&cfg.RaftTiming.LeaderLeaseTimeout, "raft-leader-lease-timeout", 0,
		"how long a leader keeps leading without hearing from a quorum before it steps down (it then takes no write); at most -raft-heartbeat-timeout (0 = -raft-heartbeat-timeout)")
	fs.StringVar(&cfg.RaftLogStore, "raft-log-store", raftstore.LogStoreBolt,
		"the Raft log on disk: bolt (raft.db in -data-dir) or wal (wal/ in -data-dir: one fsync per append instead of two, faster writes). A data dir keeps its kind: to change it, remove the data dir and start again with -join")
	fs.StringVar(&o.logLevel, "log-level", "info", "trace, debug, info, warn or error")
	fs.DurationVar(&o.logRepeatWindow, "log-repeat-window", 10*time.Second, "a warning or error repeated within this window is counted, not printed again (0 prints every one)")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.StringVar(&cfg.TLS.CertFile, "tls-cert", "", "PEM certificate of this server (masterd tls cert -server): the API is HTTPS and Raft mutual TLS")
	fs.StringVar(&cfg.TLS.KeyFile, "tls-key", "", "PEM private key of -tls-cert")
	fs.StringVar(&cfg.TLS.CAFile, "tls-ca", "", "PEM CA that Raft peers' certificates (and, with -tls-verify-incoming, clients') must chain to; required with -tls-cert but in -dev")
	fs.BoolVar(&cfg.TLS.VerifyIncoming, "tls-verify-incoming", false, "require API clients to present a certificate from -tls-ca")
	return fs
}

// run is masterd; it returns the exit code and the error to report.
func run(args []string, stdout io.Writer) (int, error) {
	if len(args) > 0 && args[0] == "tls" {
		return runTLS(args[1:], stdout)
	}
	var (
		cfg server.Config
		o   options
	)
	fs := newFlagSet(&cfg, &o)
	// Parse errors are reported once, by main; -h prints the flags to stdout.
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprintf(stdout, "Usage: masterd [flags]\n       masterd tls ca|cert ... (makes a CA and certificates: masterd tls -h)\n\nThe allot master. `masterd -dev` runs a single in-memory server.\n\nFlags:\n")
			fs.PrintDefaults()
			return 0, nil
		}
		return 2, fmt.Errorf("%w (masterd -h lists the flags)", err)
	}
	if o.version {
		fmt.Fprintln(stdout, "masterd", versionString())
		return 0, nil
	}
	if err := validate(fs, &cfg, &o); err != nil {
		return 2, err
	}
	cfg.Join = api.SplitAddresses(o.join)
	cfg.Replace = o.replace
	if o.rateLimits != "" {
		rl, err := readRateLimits(o.rateLimits)
		if err != nil {
			return 1, err
		}
		cfg.RateLimits = rl
	}
	cfg.Logger = logs.Wrap(hclog.New(&hclog.LoggerOptions{Name: "masterd", Level: hclog.LevelFromString(o.logLevel)}),
		logs.Options{RepeatWindow: o.logRepeatWindow})
	if o.operatorTokenInArgv {
		cfg.Logger.Warn("-operator-token on the command line is visible to every user of this machine (ps); use -operator-token-file or ALLOT_OPERATOR_TOKEN")
	}

	srv, err := server.New(cfg)
	if err != nil {
		return 1, err
	}
	cfg.Logger.Info("serving", "api", srv.APIAddress(), "id", cfg.ID, "dev", cfg.Dev, "version", versionString())

	errc := make(chan error, 1)
	// Signals are caught before Serve starts: a SIGTERM sent as soon as the
	// server logs that it joins must stop it cleanly, not kill it.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() { errc <- srv.Serve() }()
	select {
	case err := <-errc:
		if err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			srv.Shutdown(ctx)
			return 1, err
		}
		return 0, nil
	case sig := <-sigs:
		cfg.Logger.Info("shutting down", "signal", sig.String())
	}
	// A leader hands its leadership over before it stops, as Consul and
	// Nomad do when a server leaves: the cluster takes writes again after
	// one election round trip, not after its followers' heartbeat timeout.
	transferCtx, cancelTransfer := context.WithTimeout(context.Background(), leadershipTransferTimeout)
	if err := srv.TransferLeadership(transferCtx); err != nil {
		cfg.Logger.Warn("could not hand the leadership over before stopping; the other servers elect a leader once their heartbeat timeout passes", "error", err)
	}
	cancelTransfer()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return 1, err
	}
	return 0, nil
}

// leadershipTransferTimeout bounds the handover of a stopping leader (its
// attempts each take at most an election timeout).
const leadershipTransferTimeout = 5 * time.Second

// validate checks the flags' values and reports every problem at once, in
// the order of the flags' names (as -h lists them).
func validate(fs *flag.FlagSet, cfg *server.Config, o *options) error {
	problems := map[string]string{}
	if fs.NArg() > 0 {
		problems[""] = fmt.Sprintf("unexpected arguments: %v", fs.Args())
	}
	if cfg.RecoveryAgentRatio < 0 || cfg.RecoveryAgentRatio > 1 {
		problems["recovery-agent-ratio"] = fmt.Sprintf("must be between 0 and 1, not %v", cfg.RecoveryAgentRatio)
	}
	for name, d := range map[string]time.Duration{"allocation-interval": cfg.AllocationInterval, "offer-timeout": cfg.OfferTimeout,
		"agent-ping-timeout": cfg.AgentPingTimeout, "recovery-timeout": cfg.RecoveryTimeout,
		"agent-removal-timeout": cfg.AgentRemovalTimeout, "heartbeat-interval": cfg.HeartbeatInterval} {
		if d <= 0 {
			problems[name] = fmt.Sprintf("must be positive, not %v", d)
		}
	}
	for key, problem := range cfg.RaftTiming.Problems() {
		problems["raft-"+key] = problem
	}
	if !slices.Contains(raftstore.LogStores, cfg.RaftLogStore) {
		problems["raft-log-store"] = fmt.Sprintf("unknown log store %q: want %s", cfg.RaftLogStore, strings.Join(raftstore.LogStores, " or "))
	}
	if o.logRepeatWindow < 0 {
		problems["log-repeat-window"] = fmt.Sprintf("must not be negative, not %v", o.logRepeatWindow)
	}
	if !slices.Contains([]string{"trace", "debug", "info", "warn", "error"}, strings.ToLower(strings.TrimSpace(o.logLevel))) {
		problems["log-level"] = fmt.Sprintf("unknown level %q: want trace, debug, info, warn or error", o.logLevel)
	}
	if o.join != "" {
		if _, err := api.NewClient(api.SplitAddresses(o.join), ""); err != nil {
			problems["join"] = err.Error()
		}
	}
	for name, problem := range cfg.TLS.Check(!cfg.Dev) {
		problems[name] = problem
	}
	if cfg.TLS.Enabled() && problems["join"] == "" {
		for _, addr := range api.SplitAddresses(o.join) {
			if !strings.HasPrefix(addr, "https://") {
				problems["join"] = fmt.Sprintf("%s: with -tls-cert the servers speak HTTPS, want https://host:port", addr)
				break
			}
		}
	}
	if o.replace && o.join == "" {
		problems["replace"] = "needs -join: it replaces a member while joining its cluster"
	}
	fs.Visit(func(f *flag.Flag) { o.operatorTokenInArgv = o.operatorTokenInArgv || f.Name == "operator-token" })
	if o.operatorTokenFile != "" {
		if cfg.OperatorToken != "" {
			problems["operator-token-file"] = "-operator-token (or ALLOT_OPERATOR_TOKEN) sets the token as well: give one"
		} else if token, err := readTokenFile(o.operatorTokenFile); err != nil {
			problems["operator-token-file"] = err.Error()
		} else {
			cfg.OperatorToken = token
		}
	}
	var errs []error
	if p, ok := problems[""]; ok {
		errs = append(errs, errors.New(p))
	}
	fs.VisitAll(func(f *flag.Flag) {
		if p, ok := problems[f.Name]; ok {
			errs = append(errs, fmt.Errorf("-%s: %s", f.Name, p))
		}
	})
	return errors.Join(errs...)
}

// readTokenFile reads a token from a file, as written by an editor or echo:
// a trailing newline is not part of it. An empty file is an error (a token
// that is "" would turn the check off).
func readTokenFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	token := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if token == "" {
		return "", fmt.Errorf("%s is empty: it must hold the token", path)
	}
	if strings.ContainsAny(token, "\r\n") {
		return "", fmt.Errorf("%s holds more than one line: it must hold the token alone", path)
	}
	return token, nil
}

// versionString is the -ldflags version, else the module version and VCS
// revision the Go toolchain recorded.
func versionString() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev != "" {
		v += " " + rev[:min(12, len(rev))] + dirty
	}
	return v + " " + info.GoVersion
}

// maxRateLimitsBytes bounds the -rate-limits file as PUT /v1/ratelimits
// bounds its body: the same configuration must fit through both.
const maxRateLimitsBytes = 1 << 20

// readRateLimits reads a Mesos rates.json with the HTTP API's strict decoder
// (strictjson: no unknown or duplicate fields, names as written, no null for
// a number, nothing after the object), so that a file says what a
// PUT /v1/ratelimits of the same bytes would say. The API's per-type checks
// are about resource maps, which this file has none of.
func readRateLimits(path string) (*api.RateLimitConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("-rate-limits: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRateLimitsBytes+1))
	if err != nil {
		return nil, fmt.Errorf("-rate-limits: read %s: %w", path, err)
	}
	if len(data) > maxRateLimitsBytes {
		return nil, fmt.Errorf("-rate-limits %s: the file is larger than %d bytes, the most PUT /v1/ratelimits accepts", path, maxRateLimitsBytes)
	}
	var cfg api.RateLimitConfig
	if err := strictjson.Decode(data, &cfg, strictjson.Options{}); err != nil {
		var bad *strictjson.Error
		if errors.As(err, &bad) && bad.Path == "" {
			// Its own words are about a request body.
			return nil, fmt.Errorf("-rate-limits %s: the file %s", path, bad.Message)
		}
		return nil, fmt.Errorf("-rate-limits %s: %w", path, err)
	}
	return &cfg, nil
}
