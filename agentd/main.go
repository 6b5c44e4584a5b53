// Command agentd is the allot agent: it registers its host with the leading
// master, runs the tasks the master sends in nested cgroups with their
// requests and limits, and reports every state change at least once.
//
//	agentd -master http://10.0.0.1:5050,http://10.0.0.2:5050 -name node-1 -work-dir /var/lib/allot/agent
//
// Tasks outlive agentd: each has a monitor process (agentd re-executed as
// `agentd monitor …`), and a restarted agentd takes its tasks over.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/allot/allot/agentd/internal/agent"
	"github.com/allot/allot/agentd/internal/cgroups"
	"github.com/allot/allot/agentd/internal/containerizer"
	"github.com/allot/allot/agentd/internal/estimator"
	"github.com/allot/allot/agentd/internal/hostinfo"
	"github.com/allot/allot/agentd/internal/localapi"
	"github.com/allot/allot/agentd/internal/qos"
	"github.com/allot/allot/masterd/api"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = ""

func main() {
	if len(os.Args) > 1 && os.Args[1] == "monitor" {
		containerizer.RunMonitor(os.Args[2:]) // never returns
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "agentd:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("agentd", flag.ContinueOnError)
	var (
		masters, name, workDir, httpAddr, resources string
		cgroupRoot, tokenFile, logLevel             string
		tlsFiles                                    api.TLSFiles
		reservedMem                                 float64
		sandboxMaxAge                               time.Duration
		showVersion                                 bool

		estimatorKind, estimatorFixed   string
		estimatorMemory                 bool
		estimatorMargin                 float64
		estimatorWindow, oversubscribed time.Duration
		qosKind                         string
		qosInterval                     time.Duration
		qosCfg                          qos.Config
	)
	host, _ := os.Hostname()
	fs.StringVar(&masters, "master", "http://127.0.0.1:5050", "comma-separated API URLs of masterd servers (any of them: a follower redirects to the leader)")
	fs.StringVar(&name, "name", host, "the agent's name, unique in the cluster (reservations name agents by it)")
	fs.StringVar(&workDir, "work-dir", "/var/lib/allot/agent", "directory for checkpoints and task sandboxes; keep it across restarts")
	fs.StringVar(&httpAddr, "http", "127.0.0.1:5051", "address of the agent's local API (/v1/health, /v1/containers, /metrics)")
	fs.StringVar(&resources, "resources", "", "the resources to offer, e.g. 'cpus:2;mem:1024;disk:4096' (mem, disk in MiB); detected from the host when empty")
	fs.Float64Var(&reservedMem, "reserved-mem", 1024, "MiB of the host's memory left to the system when mem is detected")
	fs.StringVar(&cgroupRoot, "cgroup-root", "allot", "name of the agent's root cgroup; tasks run in /<root>/<container_id>")
	fs.StringVar(&tokenFile, "token-file", "", "file holding the bearer token for the masters (never pass a token in argv)")
	fs.StringVar(&tlsFiles.CAFile, "tls-ca", "", "PEM CA the masters' certificates must chain to (https:// masters; the system's roots without it)")
	fs.StringVar(&tlsFiles.CertFile, "tls-cert", "", "PEM client certificate presented to the masters (masterd -tls-verify-incoming), with -tls-key")
	fs.StringVar(&tlsFiles.KeyFile, "tls-key", "", "PEM private key of -tls-cert")
	fs.DurationVar(&sandboxMaxAge, "sandbox-max-age", 7*24*time.Hour, "how long the sandbox of an ended task is kept (0 keeps them)")
	fs.StringVar(&logLevel, "log-level", "info", "trace, debug, info, warn or error")
	fs.BoolVar(&showVersion, "version", false, "print the version and exit")

	// Oversubscription: usage slack lent as revocable resources, and the
	// QoS controller that takes it back (see the agentd guide).
	fs.StringVar(&estimatorKind, "estimator", estimator.KindNoop, "usage slack estimator: noop (lend nothing), fixed (-estimator-fixed) or usage (what regular tasks are allocated and do not use)")
	fs.StringVar(&estimatorFixed, "estimator-fixed", "", "what the fixed estimator lends, e.g. 'cpus:1' (mem only with -estimator-memory)")
	fs.BoolVar(&estimatorMemory, "estimator-memory", false, "also lend mem (not compressible: a task that finds it taken back is killed); cpus only by default")
	fs.Float64Var(&estimatorMargin, "estimator-margin", estimator.DefaultMargin, "fraction of the regular tasks' allocation the usage estimator never lends, from 0 to below 1")
	fs.DurationVar(&estimatorWindow, "estimator-window", estimator.DefaultWindow, "how long a usage peak keeps the usage estimator's estimate down")
	fs.DurationVar(&oversubscribed, "oversubscribed-interval", agent.DefaultOversubscribedInterval, "how often the estimate is made and, when it changed, reported to the master")
	fs.StringVar(&qosKind, "qos", qos.KindNoop, "QoS controller: noop (leave it to the kernel), load (-qos-load-5min/-15min) or pressure (Linux PSI and the root cgroup's memory)")
	fs.Float64Var(&qosCfg.Load5, "qos-load-5min", 0, "load controller: 5-minute load average over which revocable tasks are killed (0: unset)")
	fs.Float64Var(&qosCfg.Load15, "qos-load-15min", 0, "load controller: 15-minute load average over which revocable tasks are killed (0: unset)")
	fs.DurationVar(&qosInterval, "qos-interval", agent.DefaultQoSInterval, "how often the QoS controller looks at the node; it kills at most this often (the pressure controller also at once when the root cgroup's memory passes -qos-pressure-memory-fraction, and every 100ms while it stays there)")
	fs.Float64Var(&qosCfg.CPUSome, "qos-pressure-cpu-some", qos.DefaultCPUSome, "pressure controller: cpu 'some' avg10 threshold, percent (0: off)")
	fs.Float64Var(&qosCfg.CPUFull, "qos-pressure-cpu-full", qos.DefaultCPUFull, "pressure controller: cpu 'full' avg10 threshold, percent (0: off)")
	fs.Float64Var(&qosCfg.MemorySome, "qos-pressure-memory-some", qos.DefaultMemorySome, "pressure controller: memory 'some' avg10 threshold, percent (0: off)")
	fs.Float64Var(&qosCfg.MemoryFull, "qos-pressure-memory-full", qos.DefaultMemoryFull, "pressure controller: memory 'full' avg10 threshold, percent (0: off)")
	fs.Float64Var(&qosCfg.MemoryFraction, "qos-pressure-memory-fraction", qos.DefaultMemoryFraction, "pressure controller: share of the root cgroup's memory limit in use at which tasks are evicted, revocable first (0: off)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if showVersion {
		fmt.Println("agentd", buildVersion())
		return nil
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	level := hclog.LevelFromString(logLevel)
	if level == hclog.NoLevel {
		return fmt.Errorf("-log-level %q: want trace, debug, info, warn or error", logLevel)
	}
	if err := api.ValidateName("-name", name); err != nil {
		return err
	}
	if cgroupRoot == "" || strings.ContainsAny(cgroupRoot, "/\x00") || cgroupRoot == "." || cgroupRoot == ".." {
		return fmt.Errorf("-cgroup-root %q: want one path component, such as allot", cgroupRoot)
	}
	addresses := api.SplitAddresses(masters)
	if len(addresses) == 0 {
		return errors.New("-master: name at least one masterd URL")
	}
	var (
		token string
		err   error
	)
	if tokenFile != "" {
		if token, err = api.ReadTokenFile(tokenFile); err != nil {
			return err
		}
	}
	var tlsConfig *tls.Config
	if !tlsFiles.IsZero() {
		if tlsConfig, err = tlsFiles.Config(); err != nil {
			return fmt.Errorf("-tls-ca/-tls-cert/-tls-key: %w", err)
		}
		for _, m := range addresses {
			if !strings.HasPrefix(m, "https://") {
				return fmt.Errorf("-master %q: with -tls-ca, -tls-cert or -tls-key the masters are reached over https://", m)
			}
		}
	}
	workDir, err = filepath.Abs(workDir)
	if err != nil {
		return err
	}
	if sandboxMaxAge < 0 {
		return fmt.Errorf("-sandbox-max-age %v: want 0 (keep) or a positive age", sandboxMaxAge)
	}
	estimatorCfg, err := estimatorConfig(estimatorKind, estimatorFixed, estimatorMemory, estimatorMargin, estimatorWindow)
	if err != nil {
		return err
	}
	if err := checkEstimatorFlags(estimatorKind, fs); err != nil {
		return err
	}
	if oversubscribed <= 0 {
		return fmt.Errorf("-oversubscribed-interval %v: want a positive interval such as 15s", oversubscribed)
	}
	qosCfg.Kind = qosKind
	if err := checkQoS(qosCfg, fs); err != nil {
		return err
	}
	if qosInterval <= 0 {
		return fmt.Errorf("-qos-interval %v: want a positive interval such as 5s", qosInterval)
	}
	var res api.Resources
	if resources != "" {
		if res, err = api.ParseResources(resources); err != nil {
			return fmt.Errorf("-resources %q: %w", resources, err)
		}
	} else {
		if err := os.MkdirAll(workDir, 0o755); err != nil {
			return err
		}
		if res, err = hostinfo.Detect(workDir, reservedMem); err != nil {
			return fmt.Errorf("detect the host's resources (or set -resources): %w", err)
		}
	}
	if res["cpus"] <= 0 || res["mem"] <= 0 {
		return fmt.Errorf("-resources %s: the agent needs more than 0 cpus and mem", res)
	}
	for _, m := range addresses {
		if u, err := url.Parse(m); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("-master %q: want URLs such as http://10.0.0.1:5050", m)
		}
	}

	log := hclog.New(&hclog.LoggerOptions{Name: "agentd", Level: level, TimeFormat: time.RFC3339Nano})
	cg, err := cgroups.NewManager(log.Named("cgroups"))
	if err != nil {
		return err
	}
	if cg.Mode() == cgroups.V2 {
		// Where the kernel keeps the root cgroup's own pressure files.
		qosCfg.CgroupDir = filepath.Join("/sys/fs/cgroup", cgroupRoot)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find agentd's own binary for task monitors: %w", err)
	}
	a, err := agent.New(agent.Config{
		Masters: addresses,
		Token:   token,
		TLS:     tlsConfig,
		Info:    api.AgentInfo{Name: name, Hostname: host, Resources: res},
		WorkDir: workDir,
		Containerizer: containerizer.Config{
			CgroupRoot:      cgroupRoot,
			Cgroups:         cg,
			Root:            cgroups.SpecFor(api.Resources{"cpus": res["cpus"], "mem": res["mem"]}, nil),
			NodeMemoryBytes: int64(res["mem"] * (1 << 20)),
			MonitorCommand:  []string{self, "monitor"},
		},
		SandboxMaxAge:          sandboxMaxAge,
		Estimator:              estimatorCfg,
		OversubscribedInterval: oversubscribed,
		QoS:                    qosCfg,
		QoSInterval:            qosInterval,
		Logger:                 log,
	})
	if err != nil {
		return err
	}
	defer a.Close()

	registry := prometheus.NewRegistry()
	registry.MustRegister(a.Collector(), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ln, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return fmt.Errorf("-http: %w", err)
	}
	srv := &http.Server{Handler: localapi.New(a, registry), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("local API", "error", err)
		}
	}()
	log.Info("agentd started", "version", buildVersion(), "name", name, "resources", res.String(), "cgroups", cg.Mode().String(),
		"work_dir", workDir, "http", ln.Addr().String(), "masters", strings.Join(addresses, ","),
		"estimator", estimatorCfg.Kind, "qos", qosCfg.Kind)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err = a.Run(ctx)
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	log.Info("agentd stopped; its tasks keep running and the next agentd takes them over")
	return err
}

// estimatorConfig checks the estimator's flags and builds its
// configuration; the estimator itself says what is wrong with a
// combination (fixed without -estimator-fixed, mem without
// -estimator-memory, …).
func estimatorConfig(kind, fixed string, memory bool, margin float64, window time.Duration) (estimator.Config, error) {
	cfg := estimator.Config{Kind: kind, Memory: memory, Margin: margin, Window: window}
	if fixed != "" {
		r, err := api.ParseResources(fixed)
		if err != nil {
			return cfg, fmt.Errorf("-estimator-fixed %q: %w", fixed, err)
		}
		cfg.Fixed = r
	}
	if _, err := estimator.New(cfg); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// checkEstimatorFlags refuses tunables set for an estimator that is not
// chosen, as checkQoS does thresholds: an operator who set
// -estimator-margin meant the usage estimator to run. (-estimator-fixed
// is the estimator's own check.)
func checkEstimatorFlags(kind string, fs *flag.FlagSet) error {
	if kind == "" {
		kind = estimator.KindNoop
	}
	var stray []string
	fs.Visit(func(f *flag.Flag) {
		switch {
		case (f.Name == "estimator-margin" || f.Name == "estimator-window") && kind != estimator.KindUsage,
			f.Name == "estimator-memory" && kind == estimator.KindNoop:
			stray = append(stray, "-"+f.Name)
		}
	})
	if len(stray) > 0 {
		return fmt.Errorf("%s: set for an estimator other than -estimator %s", strings.Join(stray, ", "), kind)
	}
	return nil
}

// checkQoS refuses a QoS configuration the controller would refuse, and
// thresholds set for a controller that is not chosen (an operator who set
// -qos-load-5min meant the load controller to run).
func checkQoS(cfg qos.Config, fs *flag.FlagSet) error {
	var stray []string
	fs.Visit(func(f *flag.Flag) {
		switch {
		case strings.HasPrefix(f.Name, "qos-load-") && cfg.Kind != qos.KindLoad,
			strings.HasPrefix(f.Name, "qos-pressure-") && cfg.Kind != qos.KindPressure:
			stray = append(stray, "-"+f.Name)
		}
	})
	if len(stray) > 0 {
		kind := cfg.Kind
		if kind == "" {
			kind = qos.KindNoop
		}
		return fmt.Errorf("%s: set for a QoS controller other than -qos %s", strings.Join(stray, ", "), kind)
	}
	if _, err := qos.New(cfg); err != nil {
		return err
	}
	return nil
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
		if info.Main.Version != "" {
			return info.Main.Version
		}
	}
	return "dev"
}
