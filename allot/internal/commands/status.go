package commands

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/allot/allot/allot/internal/output"
	"github.com/allot/allot/masterd/api"
)

// Status is what `allot status -json` prints: GET /v1/cluster as the API
// answers it, and counts from the agents, frameworks and tasks lists.
type Status struct {
	Cluster *api.Cluster `json:"cluster"`
	Agents  AgentCounts  `json:"agents"`
	// Frameworks and Tasks (by state) come from the leader's live state:
	// null with -stale, which does not ask the leader.
	Frameworks *int           `json:"frameworks"`
	Tasks      map[string]int `json:"tasks"`
}

// AgentCounts counts the admitted agents.
type AgentCounts struct {
	Connected int `json:"connected"`
	Total     int `json:"total"`
}

func (a *app) statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show the cluster: servers, leader, recovery, resource totals, agents, frameworks, tasks",
		UsageText: "allot status [-json]",
		Description: "Totals come from GET /v1/cluster: capacity and reserved from the replicated\n" +
			"state, allocated, offered and revocable from the leader's live state (shown\n" +
			"as - when the server asked could not reach the leader).\n\n" +
			"Example:\n  allot status",
		Flags:  readFlags(),
		Action: a.status,
	}
}

func (a *app) status(ctx context.Context, cmd *cli.Command) error {
	if _, err := args(cmd); err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	st, err := gatherStatus(ctx, c, readOptions(cmd))
	if err != nil {
		return err
	}
	return a.show(cmd, st, func() error { return a.printStatus(st) })
}

func gatherStatus(ctx context.Context, c *api.Client, opts api.ReadOptions) (*Status, error) {
	cluster, err := c.Cluster(ctx, opts)
	if err != nil {
		return nil, err
	}
	sortServers(cluster.Servers)
	st := &Status{Cluster: cluster}
	agents, err := c.Agents(ctx, opts)
	if err != nil {
		return nil, err
	}
	for _, ag := range agents {
		st.Agents.Total++
		if ag.Connected {
			st.Agents.Connected++
		}
	}
	if opts.Stale {
		// Only the leader knows frameworks and tasks; -stale is for when
		// there may be none.
		return st, nil
	}
	frameworks, err := c.Frameworks(ctx)
	if err != nil {
		return nil, err
	}
	st.Frameworks = new(len(frameworks))
	tasks, err := c.Tasks(ctx)
	if err != nil {
		return nil, err
	}
	st.Tasks = map[string]int{}
	for _, t := range tasks {
		st.Tasks[t.State]++
	}
	return st, nil
}

func (a *app) printStatus(st *Status) error {
	cl := st.Cluster
	leader := "none known"
	if cl.Leader != nil && cl.Leader.ID != "" {
		leader = cl.Leader.ID + " (" + cl.Leader.APIAddress + ")"
	}
	if err := output.Fields(a.stdout,
		"Leader", leader,
		"Recovery", recovery(cl.Recovery),
		"Agents", fmt.Sprintf("%d connected, %d admitted", st.Agents.Connected, st.Agents.Total),
		"Frameworks", leaderCount(st.Frameworks),
		"Tasks", taskCounts(st.Tasks),
	); err != nil {
		return err
	}

	fmt.Fprintln(a.stdout, "\nServers")
	t := output.NewTable(a.stdout, "ID", "API ADDRESS", "RAFT ADDRESS", "SUFFRAGE", "LEADER")
	for _, s := range cl.Servers {
		t.Row(s.ID, s.APIAddress, s.RaftAddress, strings.ToLower(s.Suffrage), output.YesNo(s.Leader))
	}
	if err := t.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(a.stdout, "\nResources")
	totals := []struct {
		name string
		r    api.Resources
	}{
		{"CAPACITY", cl.Total}, {"ALLOCATED", cl.Allocated}, {"OFFERED", cl.Offered}, {"RESERVED", cl.Reserved},
		{"REVOCABLE", cl.Revocable}, {"REVOCABLE ALLOCATED", cl.RevocableAllocated},
	}
	names := map[string]bool{}
	header := []string{"RESOURCE"}
	for _, total := range totals {
		header = append(header, total.name)
		for name := range total.r {
			names[name] = true
		}
	}
	t = output.NewTable(a.stdout, header...)
	for _, name := range sortedKeys(names) {
		row := []string{name}
		for _, total := range totals {
			row = append(row, amount(total.r, name))
		}
		t.Row(row...)
	}
	return t.Flush()
}

// amount is one cell of the resources table: - when the total is unknown
// (null: the leader's live state was out of reach), 0 when it holds none.
func amount(r api.Resources, name string) string {
	if r == nil {
		return output.None
	}
	return output.Number(r[name])
}

func recovery(r api.Recovery) string {
	if !r.Active {
		return "no (offers flow)"
	}
	s := fmt.Sprintf("yes: %d of %d agents re-registered", r.Reregistered, r.Expected)
	if r.Deadline != nil {
		s += ", offers resume by " + formatTime(*r.Deadline)
	}
	return s
}

// notAsked stands for a count of the leader's live state that -stale did
// not ask for.
const notAsked = "- (the leader's live state: not read with -stale)"

func leaderCount(n *int) string {
	if n == nil {
		return notAsked
	}
	return strconv.Itoa(*n)
}

// taskCounts writes "3 TASK_RUNNING, 1 TASK_FAILED", in the states' order.
func taskCounts(byState map[string]int) string {
	switch {
	case byState == nil:
		return notAsked
	case len(byState) == 0:
		return "none"
	}
	states := sortedKeys(byState)
	order := func(s string) int {
		for i, known := range api.TaskStates {
			if s == known {
				return i
			}
		}
		return len(api.TaskStates)
	}
	sort.SliceStable(states, func(i, j int) bool { return order(states[i]) < order(states[j]) })
	parts := make([]string, 0, len(states))
	for _, s := range states {
		parts = append(parts, fmt.Sprintf("%d %s", byState[s], s))
	}
	return strings.Join(parts, ", ")
}
