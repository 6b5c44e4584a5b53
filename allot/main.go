// Command allot is the operator's command-line tool for an allot cluster:
// status, policy (quotas, roles, reservations, rate limits), live state
// (agents, frameworks, tasks), the audit trail, servers and backups. See
// docs/guides/cli.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/allot/allot/allot/internal/commands"
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	// Ctrl-C cancels the call in flight; `allot audit -follow` ends on it
	// with exit 0.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := commands.Run(ctx, commands.Options{
		Version:   version,
		Args:      os.Args,
		Stdout:    os.Stdout,
		Stderr:    os.Stderr,
		LookupEnv: os.LookupEnv,
	})
	stop()
	os.Exit(code)
}
