package commands

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/allot/allot/allot/internal/output"
	"github.com/allot/allot/masterd/api"
)

func (a *app) operatorCommand() *cli.Command {
	return &cli.Command{
		Name:  "operator",
		Usage: "manage the masterd servers themselves",
		Commands: []*cli.Command{{
			Name:  "servers",
			Usage: "list the Raft servers, or remove one",
			Commands: []*cli.Command{
				{
					Name:        "list",
					Usage:       "list the servers with their addresses, suffrage and leadership",
					UsageText:   "allot operator servers list [-json]",
					Description: "-json prints GET /v1/cluster.\n\nExample:\n  allot operator servers list",
					Flags:       readFlags(),
					Action:      a.serversList,
				},
				{
					Name:      "remove",
					Usage:     "remove a server from the Raft cluster (a dead one, or one being retired)",
					ArgsUsage: "ID",
					UsageText: "allot operator servers remove ID",
					Description: "The server stops counting toward the quorum. Remove one at a time and check\n" +
						"`allot operator servers list` in between.\n\n" +
						"Example:\n  allot operator servers remove m3",
					Action: a.serversRemove,
				},
			},
		}},
	}
}

func (a *app) serversList(ctx context.Context, cmd *cli.Command) error {
	if _, err := args(cmd); err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	cl, err := c.Cluster(ctx, readOptions(cmd))
	if err != nil {
		return err
	}
	sortServers(cl.Servers)
	return a.show(cmd, cl, func() error {
		t := output.NewTable(a.stdout, "ID", "API ADDRESS", "RAFT ADDRESS", "SUFFRAGE", "LEADER", "STORE VERSION")
		for _, s := range cl.Servers {
			version := output.None
			if s.StoreVersion != 0 {
				version = strconv.FormatUint(uint64(s.StoreVersion), 10)
			}
			t.Row(s.ID, s.APIAddress, s.RaftAddress, strings.ToLower(s.Suffrage), output.YesNo(s.Leader), version)
		}
		return t.Flush()
	})
}

func (a *app) serversRemove(ctx context.Context, cmd *cli.Command) error {
	in, err := args(cmd, "ID")
	if err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	if err := c.RemoveServer(ctx, in[0]); err != nil {
		return err
	}
	return a.removed(cmd, "server "+in[0])
}

// sortServers orders servers by id, as people number them: m2 before m10.
// The API lists them in the Raft configuration's order, which is the order
// they joined in (m1, m3, m2), and a table is read by id.
func sortServers(servers []api.Server) {
	slices.SortStableFunc(servers, func(x, y api.Server) int { return api.CompareNatural(x.ID, y.ID) })
}
