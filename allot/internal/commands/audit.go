package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/allot/allot/allot/internal/output"
	"github.com/allot/allot/masterd/api"
)

func (a *app) auditCommand() *cli.Command {
	return &cli.Command{
		Name:      "audit",
		Usage:     "show the audit trail of policy changes: who changed what, before → after",
		UsageText: "allot audit [-since INDEX] [-follow [-interval 1s]] [-json]",
		Description: "Each entry: its Raft index, time (UTC), principal, action, object and what\n" +
			"changed (\"guarantees.cpus: 2→4\"; \"+ …\" for a creation, \"- …\" for a removal).\n" +
			"-follow keeps polling for new entries until Ctrl-C, which ends it with exit 0;\n" +
			"with -json it prints one entry per line (NDJSON) instead of {\"entries\": […]}.\n\n" +
			"Examples:\n" +
			"  allot audit -since 120\n" +
			"  allot audit -follow",
		Flags: readFlags(
			&cli.Uint64Flag{Name: "since", Usage: "only entries with an index above `INDEX`", HideDefault: true},
			&cli.BoolFlag{Name: "follow", Usage: "keep printing new entries as they are written"},
			&cli.DurationFlag{Name: "interval", Usage: "how often -follow asks for new entries (a `DURATION`)", Value: time.Second},
		),
		Action: a.audit,
	}
}

func (a *app) audit(ctx context.Context, cmd *cli.Command) error {
	if _, err := args(cmd); err != nil {
		return err
	}
	interval := cmd.Duration("interval")
	if interval <= 0 {
		return usageErrorf(cmd, "-interval %v: want a positive duration", interval)
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	after := cmd.Uint64("since")
	entries, _, err := auditPage(ctx, c, cmd, after)
	if err != nil {
		return err
	}
	follow, asJSON := cmd.Bool("follow"), cmd.Bool("json")
	if !follow {
		return a.show(cmd, api.AuditList{Entries: nonNil(entries)}, func() error {
			t := a.auditTable()
			for _, e := range entries {
				auditRow(t, e)
			}
			return t.Flush()
		})
	}

	// Follow: print each page as it comes, then ask for what is after the
	// last entry seen. Rows come a few at a time, so they cannot be aligned
	// on all of them as a table is: fixed widths instead.
	if !asJSON {
		fmt.Fprintf(a.stdout, auditFormat, "INDEX", "TIME", "PRINCIPAL", "ACTION", "OBJECT", "CHANGE")
	}
	var last *api.AuditEntry // the last entry printed
	for {
		if err := a.printFollowed(entries, asJSON); err != nil {
			return err
		}
		if n := len(entries); n > 0 {
			last = &entries[n-1]
		}
		select {
		case <-ctx.Done():
			return nil // Ctrl-C ends a follow: that is how it is meant to end.
		case <-time.After(interval):
		}
		entries, err = a.nextEntries(ctx, c, cmd, after, last)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// nextEntries is one poll of -follow: the entries after the last one
// printed (after the -since index before any was). A restore replaces the
// trail with the backup's, whose indexes may lie below those seen: asked
// for what is after them, it would answer nothing, ever, or skip its own
// entries. So the poll asks from the last entry printed on, which must come
// back first and unchanged; when it does not, or the state's index
// (X-Allot-Index) is below it, the trail was replaced, and -follow says so
// on stderr (stdout may be NDJSON) and follows the new trail from its
// start, as tail -F follows a replaced file.
func (a *app) nextEntries(ctx context.Context, c *api.Client, cmd *cli.Command, since uint64, last *api.AuditEntry) ([]api.AuditEntry, error) {
	if last == nil {
		entries, _, err := auditPage(ctx, c, cmd, since)
		return entries, err
	}
	entries, index, err := auditPage(ctx, c, cmd, last.Index-1)
	if err != nil {
		return nil, err
	}
	if index >= last.Index && len(entries) > 0 && sameAuditEntry(entries[0], *last) {
		return entries[1:], nil
	}
	fmt.Fprintf(a.stderr, "Notice: the audit trail was replaced (a backup was restored): entry %d is gone; "+
		"following the new trail from its start\n", last.Index)
	entries, _, err = auditPage(ctx, c, cmd, 0)
	return entries, err
}

// auditPage asks for the entries after index after, and the Raft index of
// the state that answered.
func auditPage(ctx context.Context, c *api.Client, cmd *cli.Command, after uint64) ([]api.AuditEntry, uint64, error) {
	q := url.Values{"after": {strconv.FormatUint(after, 10)}}
	if readOptions(cmd).Stale {
		q.Set("stale", "true")
	}
	var out api.AuditList
	meta, err := c.Do(ctx, api.Request{Method: http.MethodGet, Path: "/v1/audit", Query: q}, &out)
	return out.Entries, meta.Index, err
}

// sameAuditEntry tells whether two entries are one: a restored trail's
// entry at the same index is another change.
func sameAuditEntry(x, y api.AuditEntry) bool {
	return x.Index == y.Index && x.Time.Equal(y.Time) && x.Principal == y.Principal && x.Action == y.Action &&
		x.Object == y.Object && bytes.Equal(x.Before, y.Before) && bytes.Equal(x.After, y.After)
}

// auditFormat lays out the rows of -follow.
const auditFormat = "%-8s  %-20s  %-12s  %-20s  %-20s  %s\n"

func (a *app) auditTable() *output.Table {
	return output.NewTable(a.stdout, "INDEX", "TIME", "PRINCIPAL", "ACTION", "OBJECT", "CHANGE")
}

func auditRow(t *output.Table, e api.AuditEntry) {
	t.Row(auditCells(e)...)
}

func auditCells(e api.AuditEntry) []string {
	return []string{strconv.FormatUint(e.Index, 10), formatTime(e.Time), output.OrNone(e.Principal), e.Action, e.Object,
		output.OrNone(output.Diff(e.Before, e.After))}
}

// printFollowed prints the entries of one poll of -follow: NDJSON, or rows.
func (a *app) printFollowed(entries []api.AuditEntry, asJSON bool) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetEscapeHTML(false)
	for _, e := range entries {
		if asJSON {
			if err := enc.Encode(e); err != nil {
				return fmt.Errorf("write JSON: %w", err)
			}
			continue
		}
		cells := auditCells(e)
		args := make([]any, len(cells))
		for i, c := range cells {
			args[i] = c
		}
		if _, err := fmt.Fprintf(a.stdout, auditFormat, args...); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
	return nil
}
