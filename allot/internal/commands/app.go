// Package commands is the allot command-line tool: the command tree on
// urfave/cli, the global configuration (addresses, token, TLS), and the
// mapping of every failure to a message and an exit code. It speaks to the
// cluster only through the public Go client, masterd/api.
package commands

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/allot/allot/masterd/api"
)

// Environment variables the tool reads; the provider reads the same names.
const (
	EnvAddress    = "ALLOT_ADDR"
	EnvToken      = "ALLOT_TOKEN"
	EnvTokenFile  = "ALLOT_TOKEN_FILE"
	EnvCACert     = "ALLOT_CACERT"
	EnvClientCert = "ALLOT_CLIENT_CERT"
	EnvClientKey  = "ALLOT_CLIENT_KEY"
)

// DefaultAddress is the server a fresh `masterd -dev` listens on.
const DefaultAddress = "http://127.0.0.1:5050"

// Options are what one run of the tool gets from its process: main passes
// os.Args, os.Stdout, os.Stderr and os.LookupEnv; tests pass their own.
type Options struct {
	Version   string
	Args      []string // the whole command line, program name first
	Stdout    io.Writer
	Stderr    io.Writer
	LookupEnv func(string) (string, bool)
}

// app is one run: where it writes, what it reads, and the client it builds
// from the global flags on first use.
type app struct {
	stdout, stderr io.Writer
	lookupEnv      func(string) (string, bool)
	// storing is set while a dry run of a write shows the object it would
	// store, whose version the write has not given it yet (see version).
	storing bool
}

// Run runs the command line in opts and returns the process's exit code
// (see exit.go). It never panics on user input and never calls os.Exit.
func Run(ctx context.Context, opts Options) int {
	a := &app{stdout: opts.Stdout, stderr: opts.Stderr, lookupEnv: opts.LookupEnv}
	if a.lookupEnv == nil {
		a.lookupEnv = func(string) (string, bool) { return "", false }
	}
	root := a.root(opts.Version)
	err := root.Run(ctx, opts.Args)
	return a.report(err)
}

func (a *app) env(key string) string {
	v, _ := a.lookupEnv(key)
	return v
}

// root builds the command tree.
func (a *app) root(version string) *cli.Command {
	root := &cli.Command{
		Name:    "allot",
		Usage:   "operate an allot cluster: policy, live state, audit trail, backups",
		Version: version,
		Description: "allot talks to the masterd servers named by -address (or " + EnvAddress + ") through\n" +
			"the public HTTP API. Every read takes -json and prints the API's JSON; every\n" +
			"write takes -dry-run and -if-match VERSION.\n\n" +
			"Examples:\n" +
			"  allot status\n" +
			"  allot quota set eng/ml -guarantee cpus=2,mem=1024 -limit cpus=4\n" +
			"  allot task list -state TASK_RUNNING -role eng/ml\n" +
			"  ALLOT_ADDR=https://10.0.0.1:5050 ALLOT_CACERT=ca.pem allot agent list -json",
		Writer:                a.stdout,
		ErrWriter:             a.stderr,
		EnableShellCompletion: true,
		HideHelpCommand:       true,
		ConfigureShellCompletionCommand: func(c *cli.Command) {
			c.Hidden = false
			c.Usage = "print a shell completion script (bash, zsh, fish, pwsh)"
			c.Description = "Source the script to complete allot's commands and flags:\n\n" +
				"  source <(allot completion bash)                       # ~/.bashrc\n" +
				"  source <(allot completion zsh)                        # ~/.zshrc\n" +
				"  allot completion fish > ~/.config/fish/completions/allot.fish\n\n" +
				"bash's script needs the bash-completion package. Flags complete as --flag;\n" +
				"-flag works as well."
			// urfave adds this command as the tool runs, after root's
			// prepare: an unknown shell is a usage error like any other
			// unknown command, not a help page and exit 1.
			prepare(c)
		},
		// Failures are reported once, by report, with their exit code.
		ExitErrHandler: func(context.Context, *cli.Command, error) {},
		Flags:          a.globalFlags(),
		Commands: []*cli.Command{
			a.statusCommand(),
			a.quotaCommand(),
			a.roleCommand(),
			a.reservationCommand(),
			a.rateLimitCommand(),
			a.agentCommand(),
			a.frameworkCommand(),
			a.taskCommand(),
			a.auditCommand(),
			a.operatorCommand(),
			a.snapshotCommand(),
		},
	}
	prepare(root)
	return root
}

// prepare gives every command of the tree the same handling of mistakes: a
// usage error (exit 2) instead of urfave's help dump, and an action for
// the commands that only group others, which names an unknown subcommand.
func prepare(cmd *cli.Command) {
	cmd.OnUsageError = func(_ context.Context, c *cli.Command, err error, _ bool) error {
		return usageErrorf(c, "%s", plainUsage(c, err))
	}
	if cmd.Action == nil && len(cmd.Commands) > 0 {
		cmd.Action = groupAction
	}
	for _, sub := range cmd.Commands {
		prepare(sub)
	}
}

// groupAction runs when a command that only groups others is given no
// subcommand, or one it does not have.
func groupAction(_ context.Context, cmd *cli.Command) error {
	if cmd.Args().Len() == 0 {
		return usageErrorf(cmd, "%s needs a command: %s", cmd.FullName(), strings.Join(commandNames(cmd), ", "))
	}
	return usageErrorf(cmd, "%s has no command %q (it has %s)", cmd.FullName(), cmd.Args().First(),
		strings.Join(commandNames(cmd), ", "))
}

func commandNames(cmd *cli.Command) []string {
	var names []string
	for _, c := range cmd.Commands {
		if !c.Hidden && c.Name != "help" {
			names = append(names, c.Name)
		}
	}
	return names
}

// globalFlags are accepted before or after any command: `allot -json`
// is not one of them (each read takes its own -json), but -address is.
func (a *app) globalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{
			Name:    "address",
			Usage:   "comma-separated masterd `URLS`; any server will do (writes are forwarded to the leader)",
			Value:   DefaultAddress,
			Sources: a.envSource(EnvAddress),
		},
		&cli.StringFlag{
			Name: "token-file",
			Usage: "a `FILE` holding the bearer token (else the token in $" + EnvToken + ", else the file named by $" +
				EnvTokenFile + "); never a token on the command line, where ps shows it",
			TakesFile: true,
		},
		&cli.StringFlag{
			Name:      "ca-file",
			Usage:     "the PEM CA `FILE` the servers' certificates chain to, for https:// addresses",
			Sources:   a.envSource(EnvCACert),
			TakesFile: true,
		},
		&cli.StringFlag{
			Name:      "client-cert",
			Usage:     "a PEM client certificate `FILE`, for servers that verify their clients (-tls-verify-incoming)",
			Sources:   a.envSource(EnvClientCert),
			TakesFile: true,
		},
		&cli.StringFlag{
			Name:      "client-key",
			Usage:     "the PEM key `FILE` of -client-cert",
			Sources:   a.envSource(EnvClientKey),
			TakesFile: true,
		},
		&cli.BoolFlag{
			Name: "stale",
			Usage: "let any server answer a read from its own state, which may lag the leader's, even with no leader " +
				"(not for framework list and task list: only the leader has that state)",
		},
		&cli.DurationFlag{
			Name:  "retry-for",
			Usage: "how long a call keeps retrying through an election or unreachable servers, as a `DURATION`",
			Value: 10 * time.Second,
		},
	}
}

// client builds the API client from the global flags: the addresses, the
// token (-token-file, else ALLOT_TOKEN, else ALLOT_TOKEN_FILE, as consul
// ranks its own) and the TLS files.
func (a *app) client(cmd *cli.Command) (*api.Client, error) {
	addresses := api.SplitAddresses(cmd.String("address"))
	if len(addresses) == 0 {
		return nil, usageErrorf(cmd, "-address (or %s) names no server", EnvAddress)
	}
	token, err := a.token(cmd)
	if err != nil {
		return nil, err
	}
	c, err := api.NewClient(addresses, token)
	if err != nil {
		return nil, usageErrorf(cmd, "-address: %v", err)
	}
	c.RetryFor = max(cmd.Duration("retry-for"), 0)
	files := api.TLSFiles{
		CAFile:   cmd.String("ca-file"),
		CertFile: cmd.String("client-cert"),
		KeyFile:  cmd.String("client-key"),
	}
	if !files.IsZero() {
		cfg, err := files.Config()
		if err != nil {
			return nil, usageErrorf(cmd, "TLS (-ca-file, -client-cert, -client-key): %v", err)
		}
		c.SetTLS(cfg)
	}
	return c, nil
}

func (a *app) token(cmd *cli.Command) (string, error) {
	if path := cmd.String("token-file"); path != "" {
		return readToken(cmd, path, "-token-file")
	}
	if token := strings.TrimSpace(a.env(EnvToken)); token != "" {
		return token, nil
	}
	if path := a.env(EnvTokenFile); path != "" {
		return readToken(cmd, path, EnvTokenFile)
	}
	return "", nil
}

func readToken(cmd *cli.Command, path, from string) (string, error) {
	token, err := api.ReadTokenFile(path)
	if err != nil {
		// ReadTokenFile names -token-file; say where the path came from.
		msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "-token-file: "), "-token-file ")
		return "", usageErrorf(cmd, "%s: %s", from, msg)
	}
	return token, nil
}

// envSource reads a flag's default from the run's environment (not the
// process's: tests pass their own), and shows the variable in -h.
func (a *app) envSource(key string) cli.ValueSourceChain {
	return cli.NewValueSourceChain(&envSource{key: key, lookup: a.lookupEnv})
}

type envSource struct {
	key    string
	lookup func(string) (string, bool)
}

func (e *envSource) Lookup() (string, bool) { return e.lookup(e.key) }
func (e *envSource) IsFromEnv() bool        { return true }
func (e *envSource) Key() string            { return e.key }
func (e *envSource) String() string         { return fmt.Sprintf("environment variable %q", e.key) }
func (e *envSource) GoString() string       { return fmt.Sprintf("&envSource{key:%q}", e.key) }

func init() {
	// allot's programs spell long flags with one dash (masterd -http,
	// agentd -master); urfave accepts both and should show the one the
	// docs use. Only the names, before the tab, change.
	stringer := cli.FlagStringer
	cli.FlagStringer = func(f cli.Flag) string {
		names, usage, _ := strings.Cut(stringer(f), "\t")
		return strings.ReplaceAll(names, "--", "-") + "\t" + usage
	}
}
