package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/allot/allot/masterd/agentsim"
	"github.com/allot/allot/masterd/api"
)

// borrower is a framework with REVOCABLE_RESOURCES that runs revocable tasks
// on the reservations other roles lend, on a simulated agent.
type borrower struct {
	t       *testing.T
	agent   *agentsim.Agent
	session *api.SchedulerSession
	// statuses holds the updates read while waiting for something else.
	statuses []api.TaskStatus
}

func newBorrower(t *testing.T, c *accCluster, agent *agentsim.Agent, role string) *borrower {
	t.Helper()
	// The session lives as long as this context: until the test ends.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	client, err := api.NewSchedulerClient(c.Addresses(), accToken)
	if err != nil {
		t.Fatal(err)
	}
	s, err := client.Subscribe(ctx, api.FrameworkInfo{Name: "acc-borrower", Principal: "acc-borrower", Roles: []string{role},
		Capabilities: []string{api.CapabilityRevocableResources}, FailoverTimeoutSeconds: 60})
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	b := &borrower{t: t, agent: agent, session: s}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.Teardown(ctx)
		s.Close()
	})
	return b
}

// next reads events until want accepts one, keeping the status updates it
// passes.
func (b *borrower) next(ctx context.Context, what string, want func(api.Event) bool) api.Event {
	b.t.Helper()
	for {
		select {
		case e, ok := <-b.session.Events():
			if !ok {
				b.t.Fatalf("waiting for %s: the framework's stream ended: %v", what, b.session.Err())
			}
			if want(e) {
				return e
			}
			if e.Type == api.EventUpdate {
				b.statuses = append(b.statuses, e.Update.Status)
			}
		case <-ctx.Done():
			b.t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}

// launch runs a revocable task on the next revocable offer of the agent and
// waits until it runs.
func (b *borrower) launch(taskID string, res api.Resources) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	agentID := b.agent.AgentID()
	e := b.next(ctx, "a revocable offer", func(e api.Event) bool {
		return e.Type == api.EventOffers && e.Offers.Offers[0].AgentID == agentID && e.Offers.Offers[0].Resources[0].Revocable
	})
	task := api.TaskInfo{TaskID: taskID, Name: taskID, AgentID: agentID, Resources: res, Revocable: true,
		Command: &api.CommandInfo{Value: "serve"}}
	zero := 0.0
	if err := b.session.Accept(ctx, []string{e.Offers.Offers[0].ID},
		[]api.Operation{{Type: api.OperationLaunch, Launch: &api.Launch{Tasks: []api.TaskInfo{task}}}}, &api.Filters{RefuseSeconds: &zero}); err != nil {
		b.t.Fatalf("accept: %v", err)
	}
	if err := b.agent.WaitState(ctx, taskID, api.TaskRunning); err != nil {
		b.t.Fatalf("task %s: %v", taskID, err)
	}
}

// status waits for an update of the task in state.
func (b *borrower) status(taskID, state string) api.TaskStatus {
	b.t.Helper()
	for _, st := range b.statuses {
		if st.TaskID == taskID && st.State == state {
			return st
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return b.next(ctx, taskID+" "+state, func(e api.Event) bool {
		return e.Type == api.EventUpdate && e.Update.Status.TaskID == taskID && e.Update.Status.State == state
	}).Update.Status
}

// TestAccRoleResource_lendingLimitEvicts: a plan that lowers a role's
// lending limit below what it lends now warns and names the revocable tasks
// apply would evict; apply evicts exactly those, youngest first.
func TestAccRoleResource_lendingLimitEvicts(t *testing.T) {
	c := sharedCluster(t)
	const (
		node    = "acc-lend-node"
		lender  = "acc-lend/db"
		tenants = "acc-lend/batch"
	)
	agent, err := agentsim.New(c.Addresses(), accToken, api.AgentInfo{Name: node, Hostname: node + ".test",
		Resources: api.Resources{"cpus": 4, "mem": 1024}, Capabilities: []string{api.CapabilityRevocableResources}}, agentsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := agent.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.Stop)
	if err := agent.Client().WaitRegistered(ctx, 1); err != nil {
		t.Fatal(err)
	}

	config := func(lending string) string {
		return c.providerConfig() + fmt.Sprintf(`
resource "allot_role" "test" {
  name = %q
  %s
}
resource "allot_reservation" "test" {
  name      = "acc-lend-reservation"
  agent     = %q
  role      = allot_role.test.name
  resources = { cpus = 4, mem = 1024 }
}
`, lender, lending, node)
	}
	lowered := config(`lending_limit = { cpus = 1.5, mem = 1024 }`)
	var b *borrower
	task := api.Resources{"cpus": 1, "mem": 128}
	rec := &diagRecorder{}
	const addr = "allot_role.test"

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(rec),
		CheckDestroy:             resource.ComposeAggregateTestCheckFunc(checkRoleReset(c, lender), checkNoReservation(c, "acc-lend-reservation")),
		Steps: []resource.TestStep{
			{
				// The whole agent is reserved for a role that runs
				// nothing: all of it is lent, without a cap.
				Config: config(""),
				Check:  checkLendingLimit(c, lender, nil),
			},
			{
				// Two borrowers run on the loan; room for one is left.
				PreConfig: func() {
					b = newBorrower(t, c, agent, tenants)
					b.launch("t-old", task)
					b.launch("t-young", task)
					rec.reset()
				},
				Config: lowered,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
						// Only the youngest: the detail ends with its line.
						expectPlanWarning(rec, "allot_role", "Apply will evict revocable tasks", regexp.MustCompile(
							`(?s)kills 1 revocable task running on them.*\n  - task t-young of framework \S+ \(role acc-lend/batch\) `+
								`on agent \S+, holding cpus 1, mem 128$`)),
					},
				},
				Check: func(*terraform.State) error {
					st := b.status("t-young", api.TaskKilled)
					if st.Reason != api.ReasonContainerPreempted || !regexp.MustCompile(`role acc-lend/db .*cpus:1\.5`).MatchString(st.Message) {
						return fmt.Errorf("t-young: %s %s (%s), want %s naming the role and its new limit",
							st.State, st.Reason, st.Message, api.ReasonContainerPreempted)
					}
					if s := agent.State("t-old"); s != api.TaskRunning {
						return fmt.Errorf("t-old is %s, want it still running", s)
					}
					return checkLendingLimit(c, lender, api.Resources{"cpus": 1.5, "mem": 1024})(nil)
				},
			},
			{
				// Within the limit now: nothing to plan, nothing to evict.
				PreConfig: rec.reset,
				Config:    lowered,
				PlanOnly:  true,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PostApplyPostRefresh: []plancheck.PlanCheck{expectNoPlanWarning(rec, "allot_role")},
				},
			},
		},
	})
}
