package commands

import (
	"context"
	"math"
	"strconv"

	"github.com/urfave/cli/v3"

	"github.com/allot/allot/allot/internal/output"
	"github.com/allot/allot/masterd/api"
)

// unthrottled is how a limit without qps reads: its calls are counted, not
// throttled.
const unthrottled = "unthrottled"

func (a *app) rateLimitCommand() *cli.Command {
	labelFlag := func(usage string) *cli.StringFlag {
		return &cli.StringFlag{Name: "label", Usage: usage}
	}
	limitFlags := func() []cli.Flag {
		return []cli.Flag{
			&cli.FloatFlag{Name: "qps", Usage: "calls per second (default: none: the calls are counted, not throttled)", HideDefault: true},
			&cli.IntFlag{Name: "burst", Usage: "`N` calls allowed at once (default: max(1, ceil(qps)))", HideDefault: true},
			&cli.IntFlag{Name: "capacity", Usage: "`N` calls queued past the burst before 429s; 0 queues none (default: 1000)", HideDefault: true},
		}
	}
	return &cli.Command{
		Name:  "ratelimit",
		Usage: "list, show, set and delete the API rate limits of principals, and the aggregate default",
		Commands: []*cli.Command{
			{
				Name:        "list",
				Usage:       "list every principal's limit and the aggregate default",
				UsageText:   "allot ratelimit list [-json]",
				Description: "-json prints the whole configuration in the Mesos rates.json format.\n\nExample:\n  allot ratelimit list",
				Flags:       readFlags(),
				Action:      a.rateLimitList,
			},
			{
				Name:        "get",
				Usage:       "show one principal's limit (or that of its frameworks with -label)",
				ArgsUsage:   "PRINCIPAL",
				UsageText:   "allot ratelimit get [-label LABEL] [-json] PRINCIPAL",
				Description: "Example:\n  allot ratelimit get spark",
				Flags:       readFlags(labelFlag("the limit of the principal's frameworks with this `LABEL`")),
				Action:      a.rateLimitGet,
			},
			{
				Name:      "set",
				Usage:     "set one principal's limit (replaces it)",
				ArgsUsage: "PRINCIPAL",
				UsageText: "allot ratelimit set [-qps Q] [-burst N] [-capacity N] [-label LABEL] [-dry-run] [-if-match VERSION] [-json] PRINCIPAL",
				Description: "The change takes effect on every server at once, without dropping queued calls.\n" +
					"With -label it limits only the principal's frameworks with that label, which\n" +
					"stay under the principal's own limit too.\n\n" +
					"Examples:\n" +
					"  allot ratelimit set spark -qps 10 -burst 20 -capacity 100\n" +
					"  allot ratelimit set spark -label batch -qps 2",
				Flags:  writeFlags(append(limitFlags(), labelFlag("limit only the principal's frameworks with this `LABEL`"))...),
				Action: a.rateLimitSet,
			},
			{
				Name:        "delete",
				Usage:       "remove one principal's limit (its calls then share the aggregate default)",
				ArgsUsage:   "PRINCIPAL",
				UsageText:   "allot ratelimit delete [-label LABEL] [-dry-run] [-if-match VERSION] PRINCIPAL",
				Description: "Example:\n  allot ratelimit delete spark",
				Flags:       writeFlags(labelFlag("remove the limit of the principal's frameworks with this `LABEL`")),
				Action:      a.rateLimitDelete,
			},
			{
				Name:  "default",
				Usage: "show, set and delete the aggregate default limit every principal not named shares",
				Commands: []*cli.Command{
					{
						Name:        "get",
						Usage:       "show the aggregate default limit",
						UsageText:   "allot ratelimit default get [-json]",
						Description: "Example:\n  allot ratelimit default get",
						Flags:       readFlags(),
						Action:      a.rateLimitDefaultGet,
					},
					{
						Name:        "set",
						Usage:       "set the aggregate default limit (replaces it)",
						UsageText:   "allot ratelimit default set [-qps Q] [-burst N] [-capacity N] [-dry-run] [-if-match VERSION] [-json]",
						Description: "Example:\n  allot ratelimit default set -qps 33.3 -burst 40",
						Flags:       writeFlags(limitFlags()...),
						Action:      a.rateLimitDefaultSet,
					},
					{
						Name:        "delete",
						Usage:       "remove the aggregate default: principals not named are no longer throttled",
						UsageText:   "allot ratelimit default delete [-dry-run] [-if-match VERSION]",
						Description: "Example:\n  allot ratelimit default delete",
						Flags:       writeFlags(),
						Action:      a.rateLimitDefaultDelete,
					},
				},
			},
		},
	}
}

func (a *app) rateLimitList(ctx context.Context, cmd *cli.Command) error {
	if _, err := args(cmd); err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	cfg, err := c.RateLimitConfig(ctx, readOptions(cmd))
	if err != nil {
		return err
	}
	cfg.Limits = nonNil(cfg.Limits)
	return a.show(cmd, cfg, func() error {
		t := output.NewTable(a.stdout, "PRINCIPAL", "LABEL", "QPS", "BURST", "CAPACITY")
		for _, l := range cfg.Limits {
			t.Row(l.Principal, l.Label, qps(l.QPS), optionalInt(l.Burst), optionalInt(l.Capacity))
		}
		if cfg.AggregateDefaultQPS != nil || cfg.AggregateDefaultBurst != nil || cfg.AggregateDefaultCapacity != nil {
			t.Row("(default)", "", qps(cfg.AggregateDefaultQPS), optionalInt(cfg.AggregateDefaultBurst),
				optionalInt(cfg.AggregateDefaultCapacity))
		}
		return t.Flush()
	})
}

func qps(v *float64) string {
	if v == nil {
		return unthrottled
	}
	return output.Number(*v)
}

func optionalInt(v *int) string {
	if v == nil {
		return output.None
	}
	return strconv.Itoa(*v)
}

func (a *app) rateLimitGet(ctx context.Context, cmd *cli.Command) error {
	principal, label, err := principalArgs(cmd)
	if err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	var l *api.RateLimit
	if label != "" {
		l, err = c.LabeledRateLimit(ctx, principal, label, readOptions(cmd))
	} else {
		l, err = c.RateLimit(ctx, principal, readOptions(cmd))
	}
	if err != nil {
		return err
	}
	return a.show(cmd, l, func() error { return a.showRateLimit(l) })
}

func (a *app) showRateLimit(l *api.RateLimit) error {
	return output.Fields(a.stdout,
		"Principal", l.Principal,
		"Label", output.OrNone(l.Label),
		"QPS", qps(l.QPS),
		"Burst", strconv.Itoa(l.Burst),
		"Capacity", strconv.Itoa(l.Capacity),
		"Version", a.version(l.Version))
}

func (a *app) rateLimitSet(ctx context.Context, cmd *cli.Command) error {
	principal, label, err := principalArgs(cmd)
	if err != nil {
		return err
	}
	req, err := rateLimitRequest(cmd)
	if err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	path := api.RateLimitPath(principal)
	if label != "" {
		path = api.LabeledRateLimitPath(principal, label)
	}
	return put(ctx, a, cmd, c, path, req, func() (*api.RateLimit, error) {
		if label != "" {
			return c.PutLabeledRateLimit(ctx, principal, label, req, writeOptions(cmd))
		}
		return c.PutRateLimit(ctx, principal, req, writeOptions(cmd))
	}, a.showRateLimit)
}

func (a *app) rateLimitDelete(ctx context.Context, cmd *cli.Command) error {
	principal, label, err := principalArgs(cmd)
	if err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	path, what := api.RateLimitPath(principal), "the rate limit of principal "+principal
	if label != "" {
		path, what = api.LabeledRateLimitPath(principal, label), what+" for label "+label
	}
	return remove(ctx, a, cmd, c, path, what, func() error {
		if label != "" {
			return c.DeleteLabeledRateLimit(ctx, principal, label, writeOptions(cmd))
		}
		return c.DeleteRateLimit(ctx, principal, writeOptions(cmd))
	}, a.showRateLimit)
}

func (a *app) rateLimitDefaultGet(ctx context.Context, cmd *cli.Command) error {
	if _, err := args(cmd); err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	d, err := c.RateLimitDefault(ctx, readOptions(cmd))
	if err != nil {
		return err
	}
	return a.show(cmd, d, func() error { return a.showRateLimitDefault(d) })
}

func (a *app) showRateLimitDefault(d *api.RateLimitDefault) error {
	return output.Fields(a.stdout,
		"QPS", qps(d.QPS),
		"Burst", strconv.Itoa(d.Burst),
		"Capacity", strconv.Itoa(d.Capacity),
		"Version", a.version(d.Version))
}

func (a *app) rateLimitDefaultSet(ctx context.Context, cmd *cli.Command) error {
	if _, err := args(cmd); err != nil {
		return err
	}
	req, err := rateLimitRequest(cmd)
	if err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	return put(ctx, a, cmd, c, api.RateLimitDefaultPath, req,
		func() (*api.RateLimitDefault, error) { return c.PutRateLimitDefault(ctx, req, writeOptions(cmd)) },
		a.showRateLimitDefault)
}

func (a *app) rateLimitDefaultDelete(ctx context.Context, cmd *cli.Command) error {
	if _, err := args(cmd); err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	return remove(ctx, a, cmd, c, api.RateLimitDefaultPath, "the aggregate default rate limit",
		func() error { return c.DeleteRateLimitDefault(ctx, writeOptions(cmd)) }, a.showRateLimitDefault)
}

// principalArgs are the PRINCIPAL argument and the -label flag, checked.
func principalArgs(cmd *cli.Command) (principal, label string, err error) {
	if principal, err = nameArg(cmd, "PRINCIPAL", "principal"); err != nil {
		return "", "", err
	}
	if cmd.IsSet("label") {
		label = cmd.String("label")
		if err := validName(cmd, "-label", label); err != nil {
			return "", "", err
		}
	}
	return principal, label, nil
}

// rateLimitRequest sends only the flags given: the server fills the rest
// with its documented defaults.
func rateLimitRequest(cmd *cli.Command) (api.RateLimitRequest, error) {
	var req api.RateLimitRequest
	if cmd.IsSet("qps") {
		v := cmd.Float("qps")
		if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
			return req, usageErrorf(cmd, "-qps %v: want a number above 0 (leave it out to count calls without throttling)", v)
		}
		req.QPS = &v
	}
	for _, f := range []struct {
		name string
		dst  **int
	}{{"burst", &req.Burst}, {"capacity", &req.Capacity}} {
		if !cmd.IsSet(f.name) {
			continue
		}
		v := int(cmd.Int(f.name))
		if v < 0 {
			return req, usageErrorf(cmd, "-%s %d: must not be negative", f.name, v)
		}
		*f.dst = &v
	}
	return req, nil
}
