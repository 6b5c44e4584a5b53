package allocator

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
)

type testAgent struct {
	id, total string
	reserved  map[string]string // role → resources
}

type testQuota struct{ guarantees, limits string }

type testUsed struct{ framework, agent, role, pool, resources string }

// step is one allocation cycle. before runs first; the offered, reserved and
// numOffers checks are on the cycle's offers; then every framework responds
// as its behaviour says; consumed and headroom are checked after that.
type step struct {
	at     time.Duration
	before func(t *testing.T, a *Allocator)
	// behave changes frameworks' behaviour from this step on: "accept"
	// launches everything offered, "hold" leaves offers outstanding,
	// "decline:<duration>" hands them back with a filter that long.
	behave map[string]string
	// offered: everything each framework was offered; a framework not
	// listed must have been offered nothing (unchecked when nil).
	offered map[string]string
	// reserved: the reserved part of the offers, with the same rule.
	reserved  map[string]string
	numOffers int // unchecked when 0
	// consumed: role → quota consumption.
	consumed map[string]string
	// headroom: the headroom still required; unchecked when nil.
	headroom *string
}

type scenario struct {
	agents     []testAgent
	frameworks []Framework
	quotas     map[string]testQuota
	weights    map[string]float64
	used       []testUsed
	behave     map[string]string
	steps      []step
}

func uniformAgents(n int, total string) []testAgent {
	out := make([]testAgent, n)
	for i := range out {
		out[i] = testAgent{id: fmt.Sprintf("n%02d", i), total: total}
	}
	return out
}

func ptr(s string) *string { return &s }

func fw(id string, roles ...string) Framework {
	return Framework{ID: id, Principal: id, Roles: roles}
}

var t0 = time.Unix(1_700_000_000, 0)

func runScenario(t *testing.T, sc scenario) {
	a := New(Options{Seed: 1})
	for _, ag := range sc.agents {
		reserved := map[string]api.Resources{}
		for role, r := range ag.reserved {
			reserved[role] = res(t, r)
		}
		must(t, a.AddAgent(ag.id, ag.id+".example", res(t, ag.total), reserved))
	}
	for _, f := range sc.frameworks {
		must(t, a.AddFramework(f))
	}
	for role, q := range sc.quotas {
		var limits api.Resources
		if q.limits != "" {
			limits = res(t, q.limits)
		}
		must(t, a.SetQuota(role, res(t, q.guarantees), limits))
	}
	for role, w := range sc.weights {
		must(t, a.SetWeight(role, w))
	}
	for _, u := range sc.used {
		must(t, a.AddUsed(u.framework, u.agent, u.role, []Piece{{Role: u.pool, Resources: res(t, u.resources)}}))
	}
	behave := maps.Clone(sc.behave)
	if behave == nil {
		behave = map[string]string{}
	}
	for i, st := range sc.steps {
		now := t0.Add(st.at)
		if st.before != nil {
			st.before(t, a)
		}
		maps.Copy(behave, st.behave)
		offers := a.Allocate(now)

		offered, reserved := map[string]api.Resources{}, map[string]api.Resources{}
		for _, o := range offers {
			for _, p := range o.Pieces {
				offered[o.FrameworkID] = offered[o.FrameworkID].Add(p.Resources)
				if p.Role != api.DefaultRole {
					reserved[o.FrameworkID] = reserved[o.FrameworkID].Add(p.Resources)
				}
			}
		}
		checkByFramework(t, i, "offered", st.offered, offered)
		checkByFramework(t, i, "reserved", st.reserved, reserved)
		if st.numOffers != 0 && len(offers) != st.numOffers {
			t.Errorf("step %d: %d offers, want %d: %+v", i, len(offers), st.numOffers, offers)
		}

		for _, o := range offers {
			b := behave[o.FrameworkID]
			switch {
			case b == "" || b == "accept":
				must(t, a.Launch(o.FrameworkID, o.AgentID, o.Role, o.Pieces))
			case b == "hold":
			case strings.HasPrefix(b, "decline:"):
				d, err := time.ParseDuration(strings.TrimPrefix(b, "decline:"))
				must(t, err)
				must(t, a.Recover(o.FrameworkID, o.AgentID, o.Role, o.Pieces))
				must(t, a.Decline(o.FrameworkID, o.AgentID, sumPieces(o.Pieces), now.Add(d)))
			default:
				t.Fatalf("unknown behaviour %q", b)
			}
		}

		for role, want := range st.consumed {
			if got := a.QuotaConsumed(role); !sameResources(got, res(t, want)) {
				t.Errorf("step %d: role %s consumed %v, want %v", i, role, got, want)
			}
		}
		if st.headroom != nil {
			if got := a.Cluster().HeadroomRequired; !sameResources(got, res(t, *st.headroom)) {
				t.Errorf("step %d: headroom required %v, want %v", i, got, *st.headroom)
			}
		}
	}
}

func checkByFramework(t *testing.T, step int, what string, want map[string]string, got map[string]api.Resources) {
	t.Helper()
	if want == nil {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[id]; !ok && !got[id].IsZero() {
			t.Errorf("step %d: %s %v to %s, want nothing", step, what, got[id], id)
		}
	}
	for id, w := range want {
		if !sameResources(got[id], res(t, w)) {
			t.Errorf("step %d: %s %v to %s, want %v", step, what, got[id], id, w)
		}
	}
}

func TestScenarios(t *testing.T) {
	tests := map[string]scenario{
		// quota.txt, scenario 1: fA (rA) uses 10 CPUs and declines, fB (rB)
		// is greedy. rA's guarantee of 50 is laid away: fB never gets the
		// 40 CPUs fA is owed.
		"greedy framework cannot starve a guaranteed role": {
			agents:     uniformAgents(10, "cpus:10;mem:1000"),
			frameworks: []Framework{fw("fA", "rA"), fw("fB", "rB")},
			quotas:     map[string]testQuota{"rA": {guarantees: "cpus:50;mem:5000"}},
			used:       []testUsed{{"fA", "n00", "rA", "*", "cpus:10;mem:1000"}},
			behave:     map[string]string{"fA": "decline:1h"},
			steps: []step{
				{offered: map[string]string{"fA": "cpus:40;mem:4000", "fB": "cpus:50;mem:5000"},
					consumed: map[string]string{"rA": "cpus:10;mem:1000"},
					headroom: ptr("cpus:40;mem:4000")},
				{at: time.Second, offered: map[string]string{}, headroom: ptr("cpus:40;mem:4000")},
				{at: 2 * time.Hour, offered: map[string]string{"fA": "cpus:40;mem:4000"}},
			},
		},
		// The same without quota: DRF alone lets fB take everything fA
		// declines.
		"without a guarantee the greedy framework takes it all": {
			agents:     uniformAgents(10, "cpus:10;mem:1000"),
			frameworks: []Framework{fw("fA", "rA"), fw("fB", "rB")},
			used:       []testUsed{{"fA", "n00", "rA", "*", "cpus:10;mem:1000"}},
			behave:     map[string]string{"fA": "decline:1h"},
			steps: []step{
				{offered: map[string]string{"fA": "cpus:40;mem:4000", "fB": "cpus:50;mem:5000"}},
				{at: time.Second, offered: map[string]string{"fB": "cpus:40;mem:4000"}},
			},
		},
		// quota.txt, scenario 2: a guarantee set after fB took the cluster
		// holds what is freed for rA rather than giving it back to fB.
		"freed resources are laid away for a new guarantee": {
			agents:     uniformAgents(4, "cpus:10;mem:1000"),
			frameworks: []Framework{fw("fB", "rB")},
			steps: []step{
				{offered: map[string]string{"fB": "cpus:40;mem:4000"}},
				{at: time.Second,
					before: func(t *testing.T, a *Allocator) {
						must(t, a.SetQuota("rA", res(t, "cpus:20;mem:2000"), nil))
						for _, id := range []string{"n00", "n01", "n02"} {
							must(t, a.Release("fB", id, "rB", []Piece{{Role: "*", Resources: res(t, "cpus:10;mem:1000")}}))
						}
					},
					offered:  map[string]string{"fB": "cpus:10;mem:1000"},
					headroom: ptr("cpus:20;mem:2000")},
				{at: 2 * time.Second,
					before: func(t *testing.T, a *Allocator) {
						must(t, a.AddFramework(fw("fA", "rA")))
					},
					offered:  map[string]string{"fA": "cpus:20;mem:2000"},
					consumed: map[string]string{"rA": "cpus:20;mem:2000"},
					headroom: ptr("")},
			},
		},
		"quota limit caps a greedy role": {
			agents:     uniformAgents(10, "cpus:10;mem:1000"),
			frameworks: []Framework{fw("fA", "rA")},
			quotas:     map[string]testQuota{"rA": {guarantees: "", limits: "cpus:25;mem:2500"}},
			steps: []step{
				{offered: map[string]string{"fA": "cpus:25;mem:2500"},
					consumed: map[string]string{"rA": "cpus:25;mem:2500"}},
				{at: time.Second, offered: map[string]string{}},
			},
		},
		"limit leaves the rest to other roles": {
			agents:     uniformAgents(10, "cpus:10;mem:1000"),
			frameworks: []Framework{fw("fA", "rA"), fw("fB", "rB")},
			quotas:     map[string]testQuota{"rA": {limits: "cpus:25;mem:2500"}},
			steps: []step{
				{offered: map[string]string{"fA": "cpus:25;mem:2500", "fB": "cpus:75;mem:7500"}},
			},
		},
		"weight 2 gets twice the dominant share": {
			agents:     uniformAgents(30, "cpus:1;mem:100"),
			frameworks: []Framework{fw("fA", "a"), fw("fB", "b")},
			weights:    map[string]float64{"b": 2},
			steps: []step{
				{offered: map[string]string{"fA": "cpus:10;mem:1000", "fB": "cpus:20;mem:2000"}},
			},
		},
		"frameworks of one role share it by DRF": {
			agents:     uniformAgents(6, "cpus:1;mem:100"),
			frameworks: []Framework{fw("f1", "r"), fw("f2", "r"), fw("f3", "r")},
			steps: []step{
				{offered: map[string]string{"f1": "cpus:2;mem:200", "f2": "cpus:2;mem:200", "f3": "cpus:2;mem:200"}},
			},
		},
		"reservations go only to their role": {
			agents: []testAgent{
				{id: "n0", total: "cpus:8;mem:800", reserved: map[string]string{"db": "cpus:4;mem:400"}},
				{id: "n1", total: "cpus:8;mem:800"},
			},
			frameworks: []Framework{fw("fWeb", "web")},
			steps: []step{
				{offered: map[string]string{"fWeb": "cpus:12;mem:1200"},
					reserved: map[string]string{},
					consumed: map[string]string{"db": "cpus:4;mem:400", "web": "cpus:12;mem:1200"}},
				{at: time.Second,
					before:   func(t *testing.T, a *Allocator) { must(t, a.AddFramework(fw("fDB", "db"))) },
					offered:  map[string]string{"fDB": "cpus:4;mem:400"},
					reserved: map[string]string{"fDB": "cpus:4;mem:400"},
					consumed: map[string]string{"db": "cpus:4;mem:400"}},
			},
		},
		"reservations count toward the role's limit": {
			agents: []testAgent{
				{id: "n0", total: "cpus:8;mem:800", reserved: map[string]string{"db": "cpus:4;mem:400"}},
				{id: "n1", total: "cpus:8;mem:800"},
			},
			frameworks: []Framework{fw("fDB", "db")},
			quotas:     map[string]testQuota{"db": {limits: "cpus:6;mem:600"}},
			steps: []step{
				{offered: map[string]string{"fDB": "cpus:6;mem:600"},
					reserved: map[string]string{"fDB": "cpus:4;mem:400"},
					consumed: map[string]string{"db": "cpus:6;mem:600"}},
			},
		},
		"reservations satisfy a guarantee": {
			agents: []testAgent{
				{id: "n0", total: "cpus:8;mem:800", reserved: map[string]string{"db": "cpus:4;mem:400"}},
				{id: "n1", total: "cpus:8;mem:800"},
			},
			frameworks: []Framework{fw("fWeb", "web")},
			quotas:     map[string]testQuota{"db": {guarantees: "cpus:4;mem:400"}},
			steps: []step{
				{offered: map[string]string{"fWeb": "cpus:12;mem:1200"}, headroom: ptr("")},
			},
		},
		"a guarantee beyond the reservation lays away the rest": {
			agents: []testAgent{
				{id: "n0", total: "cpus:8;mem:800", reserved: map[string]string{"db": "cpus:4;mem:400"}},
				{id: "n1", total: "cpus:8;mem:800"},
			},
			frameworks: []Framework{fw("fWeb", "web")},
			quotas:     map[string]testQuota{"db": {guarantees: "cpus:6;mem:600"}},
			steps: []step{
				{offered: map[string]string{"fWeb": "cpus:10;mem:1000"}, headroom: ptr("cpus:2;mem:200")},
			},
		},
		"a parent's reservation goes to its descendants only": {
			agents: []testAgent{
				{id: "n0", total: "cpus:8;mem:800", reserved: map[string]string{"eng": "cpus:4;mem:400"}},
				{id: "n1", total: "cpus:8;mem:800"},
			},
			frameworks: []Framework{fw("fML", "eng/ml"), fw("fOps", "ops")},
			steps: []step{
				{reserved: map[string]string{"fML": "cpus:4;mem:400"}},
			},
		},
		"a child's reservation is out of its parent's reach": {
			agents: []testAgent{
				{id: "n0", total: "cpus:8;mem:800", reserved: map[string]string{"eng/ml": "cpus:4;mem:400"}},
			},
			frameworks: []Framework{fw("fEng", "eng")},
			steps: []step{
				{offered: map[string]string{"fEng": "cpus:4;mem:400"}, reserved: map[string]string{}},
			},
		},
		"a child's allocation counts toward its parent's limit": {
			agents:     uniformAgents(5, "cpus:4;mem:400"),
			frameworks: []Framework{fw("fML", "eng/ml"), fw("fWeb", "eng/web"), fw("fOps", "ops")},
			quotas:     map[string]testQuota{"eng": {limits: "cpus:10;mem:1000"}},
			steps: []step{
				{offered: map[string]string{"fML": "cpus:6;mem:600", "fWeb": "cpus:4;mem:400", "fOps": "cpus:10;mem:1000"},
					consumed: map[string]string{"eng": "cpus:10;mem:1000", "eng/ml": "cpus:6;mem:600"}},
			},
		},
		"a child's allocation counts toward its parent's guarantee": {
			agents:     uniformAgents(4, "cpus:4;mem:400"),
			frameworks: []Framework{fw("fML", "eng/ml"), fw("fOps", "ops")},
			quotas:     map[string]testQuota{"eng": {guarantees: "cpus:8;mem:800"}},
			used: []testUsed{
				{"fML", "n00", "eng/ml", "*", "cpus:4;mem:400"},
				{"fML", "n01", "eng/ml", "*", "cpus:4;mem:400"},
			},
			behave: map[string]string{"fML": "decline:1h"},
			steps: []step{
				{offered: map[string]string{"fOps": "cpus:8;mem:800"}, headroom: ptr("")},
			},
		},
		"a parent's guarantee is laid away for its children": {
			agents:     uniformAgents(4, "cpus:4;mem:400"),
			frameworks: []Framework{fw("fML", "eng/ml"), fw("fOps", "ops")},
			quotas:     map[string]testQuota{"eng": {guarantees: "cpus:8;mem:800"}},
			behave:     map[string]string{"fML": "decline:1h"},
			steps: []step{
				{offered: map[string]string{"fML": "cpus:8;mem:800", "fOps": "cpus:8;mem:800"}},
				{at: time.Second, offered: map[string]string{}, headroom: ptr("cpus:8;mem:800")},
			},
		},
		"a child's guarantee is kept within its parent's": {
			agents:     uniformAgents(4, "cpus:4;mem:400"),
			frameworks: []Framework{fw("fWeb", "eng/web"), fw("fOps", "ops")},
			quotas: map[string]testQuota{
				"eng":    {guarantees: "cpus:8;mem:800"},
				"eng/ml": {guarantees: "cpus:8;mem:800"},
			},
			steps: []step{
				// eng/ml is owed all of eng's guarantee, so what fWeb (in eng)
				// gets lowers nothing owed: fWeb shares the 8 CPUs beyond the
				// guarantee with fOps by DRF, and 8 stay laid away for eng/ml.
				{offered: map[string]string{"fWeb": "cpus:4;mem:400", "fOps": "cpus:4;mem:400"},
					headroom: ptr("cpus:8;mem:800")},
			},
		},
		"decline filter holds until it expires": {
			agents:     uniformAgents(1, "cpus:4;mem:400"),
			frameworks: []Framework{fw("fA", "r")},
			behave:     map[string]string{"fA": "decline:10s"},
			steps: []step{
				{offered: map[string]string{"fA": "cpus:4;mem:400"}},
				{at: 5 * time.Second, offered: map[string]string{}},
				{at: 10 * time.Second, offered: map[string]string{"fA": "cpus:4;mem:400"}},
			},
		},
		"a filtered agent goes to the next framework": {
			agents:     uniformAgents(1, "cpus:4;mem:400"),
			frameworks: []Framework{fw("fA", "r"), fw("fB", "r")},
			behave:     map[string]string{"fA": "decline:10s", "fB": "decline:0s"},
			steps: []step{
				{offered: map[string]string{"fA": "cpus:4;mem:400"}},
				{at: time.Second, offered: map[string]string{"fB": "cpus:4;mem:400"}},
				{at: 2 * time.Second, offered: map[string]string{"fB": "cpus:4;mem:400"}},
			},
		},
		"a filter is lifted when more becomes free": {
			agents:     uniformAgents(1, "cpus:4;mem:400"),
			frameworks: []Framework{fw("fA", "r")},
			used:       []testUsed{{"fA", "n00", "r", "*", "cpus:2;mem:200"}},
			behave:     map[string]string{"fA": "decline:1h"},
			steps: []step{
				{offered: map[string]string{"fA": "cpus:2;mem:200"}},
				{at: time.Second, offered: map[string]string{}},
				{at: 2 * time.Second,
					before: func(t *testing.T, a *Allocator) {
						must(t, a.Release("fA", "n00", "r", []Piece{{Role: "*", Resources: res(t, "cpus:2;mem:200")}}))
					},
					offered: map[string]string{"fA": "cpus:4;mem:400"}},
			},
		},
		"revive drops filters": {
			agents:     uniformAgents(1, "cpus:4;mem:400"),
			frameworks: []Framework{fw("fA", "r")},
			behave:     map[string]string{"fA": "decline:1h"},
			steps: []step{
				{offered: map[string]string{"fA": "cpus:4;mem:400"}},
				{at: time.Second,
					before:  func(t *testing.T, a *Allocator) { must(t, a.Revive("fA", nil)) },
					offered: map[string]string{"fA": "cpus:4;mem:400"}},
			},
		},
		"suppress and revive": {
			agents:     uniformAgents(2, "cpus:4;mem:400"),
			frameworks: []Framework{fw("fA", "r")},
			steps: []step{
				{before: func(t *testing.T, a *Allocator) { must(t, a.Suppress("fA", nil)) },
					offered: map[string]string{}},
				{at: time.Second,
					before:  func(t *testing.T, a *Allocator) { must(t, a.Revive("fA", []string{"r"})) },
					offered: map[string]string{"fA": "cpus:8;mem:800"}},
			},
		},
		"suppressing one role keeps the others": {
			agents:     uniformAgents(2, "cpus:4;mem:400"),
			frameworks: []Framework{fw("fA", "r1", "r2")},
			steps: []step{
				{before: func(t *testing.T, a *Allocator) { must(t, a.Suppress("fA", []string{"r1"})) },
					offered:  map[string]string{"fA": "cpus:8;mem:800"},
					consumed: map[string]string{"r1": "", "r2": "cpus:8;mem:800"}},
			},
		},
		"inactive agents and frameworks get nothing": {
			agents:     uniformAgents(2, "cpus:4;mem:400"),
			frameworks: []Framework{fw("fA", "r"), fw("fB", "r")},
			behave:     map[string]string{"fA": "hold", "fB": "hold"},
			steps: []step{
				{before: func(t *testing.T, a *Allocator) {
					must(t, a.DeactivateAgent("n01"))
					must(t, a.DeactivateFramework("fA"))
				},
					offered: map[string]string{"fB": "cpus:4;mem:400"}},
				{at: time.Second,
					before: func(t *testing.T, a *Allocator) {
						must(t, a.ActivateAgent("n01"))
						must(t, a.ActivateFramework("fA"))
					},
					offered: map[string]string{"fA": "cpus:4;mem:400"}},
			},
		},
		"a new reservation waits for other roles' tasks to end": {
			agents:     uniformAgents(1, "cpus:4;mem:400"),
			frameworks: []Framework{fw("fWeb", "web"), fw("fDB", "db")},
			used:       []testUsed{{"fWeb", "n00", "web", "*", "cpus:4;mem:400"}},
			steps: []step{
				{before: func(t *testing.T, a *Allocator) {
					must(t, a.UpdateAgentReservations("n00", map[string]api.Resources{"db": res(t, "cpus:2;mem:200")}))
				},
					offered:  map[string]string{},
					consumed: map[string]string{"db": "cpus:2;mem:200", "web": "cpus:4;mem:400"}},
				{at: time.Second,
					before: func(t *testing.T, a *Allocator) {
						must(t, a.Release("fWeb", "n00", "web", []Piece{{Role: "*", Resources: res(t, "cpus:4;mem:400")}}))
					},
					reserved: map[string]string{"fDB": "cpus:2;mem:200"}},
			},
		},
		"offers of both stages on one agent are one offer": {
			agents:     uniformAgents(1, "cpus:10;mem:1000"),
			frameworks: []Framework{fw("fA", "rA")},
			quotas:     map[string]testQuota{"rA": {guarantees: "cpus:2"}},
			steps: []step{
				{offered: map[string]string{"fA": "cpus:10;mem:1000"}, numOffers: 1},
			},
		},
		"nothing below the minimum allocatable is offered": {
			agents:     uniformAgents(1, "cpus:4;mem:400;disk:1000"),
			frameworks: []Framework{fw("fA", "r")},
			used:       []testUsed{{"fA", "n00", "r", "*", "cpus:4;mem:400"}},
			steps: []step{
				{offered: map[string]string{}},
			},
		},
	}
	for name, sc := range tests {
		t.Run(name, func(t *testing.T) { runScenario(t, sc) })
	}
}

func TestOfferPiecesAndAccounting(t *testing.T) {
	a := New(Options{Seed: 1})
	must(t, a.AddAgent("n0", "n0.example", res(t, "cpus:8;mem:800"), map[string]api.Resources{"db": res(t, "cpus:2;mem:200")}))
	must(t, a.AddFramework(fw("f", "db")))
	offers := a.Allocate(t0)
	if len(offers) != 1 {
		t.Fatalf("offers = %+v, want one", offers)
	}
	o := offers[0]
	if o.FrameworkID != "f" || o.AgentID != "n0" || o.Hostname != "n0.example" || o.Role != "db" {
		t.Fatalf("offer = %+v", o)
	}
	want := []Piece{
		{Role: "db", Resources: res(t, "cpus:2;mem:200")},
		{Role: "*", Resources: res(t, "cpus:6;mem:600")},
	}
	if len(o.Pieces) != 2 || o.Pieces[0].Role != want[0].Role || !sameResources(o.Pieces[0].Resources, want[0].Resources) ||
		o.Pieces[1].Role != want[1].Role || !sameResources(o.Pieces[1].Resources, want[1].Resources) {
		t.Fatalf("pieces = %+v, want %+v", o.Pieces, want)
	}

	// A task uses 1 reserved CPU and 3 unreserved; the rest is handed back.
	task := []Piece{{Role: "db", Resources: res(t, "cpus:1;mem:100")}, {Role: "*", Resources: res(t, "cpus:3;mem:300")}}
	rest := []Piece{{Role: "db", Resources: res(t, "cpus:1;mem:100")}, {Role: "*", Resources: res(t, "cpus:3;mem:300")}}
	must(t, a.Launch("f", "n0", "db", task))
	must(t, a.Recover("f", "n0", "db", rest))

	rs, ok := a.Role("db")
	if !ok {
		t.Fatal("role db unknown")
	}
	checks := map[string][2]api.Resources{
		"allocated": {rs.Allocated, res(t, "cpus:4;mem:400")},
		"offered":   {rs.Offered, res(t, "")},
		"reserved":  {rs.Reserved, res(t, "cpus:2;mem:200")},
		// 4 allocated plus the 1 reserved CPU nobody uses.
		"consumed": {rs.Consumed, res(t, "cpus:5;mem:500")},
	}
	for name, c := range checks {
		if !sameResources(c[0], c[1]) {
			t.Errorf("role %s = %v, want %v", name, c[0], c[1])
		}
	}
	if !slices.Equal(rs.Frameworks, []string{"f"}) {
		t.Errorf("frameworks = %v", rs.Frameworks)
	}
	as, _ := a.Agent("n0")
	if !sameResources(as.Free, res(t, "cpus:4;mem:400")) || !sameResources(as.Allocated, res(t, "cpus:4;mem:400")) {
		t.Errorf("agent = %+v", as)
	}

	// Handing back more than held is refused and changes nothing.
	err := a.Release("f", "n0", "db", []Piece{{Role: "db", Resources: res(t, "cpus:2")}})
	if !errors.Is(err, ErrNotAllocated) {
		t.Errorf("over-release: err = %v, want ErrNotAllocated", err)
	}
	if got := a.QuotaConsumed("db"); !sameResources(got, res(t, "cpus:5;mem:500")) {
		t.Errorf("consumed after refused release = %v", got)
	}
	must(t, a.Release("f", "n0", "db", task))
	if got := a.QuotaConsumed("db"); !sameResources(got, res(t, "cpus:2;mem:200")) {
		t.Errorf("consumed after release = %v, want the reservation", got)
	}
}

func TestErrors(t *testing.T) {
	a := New(Options{})
	must(t, a.AddAgent("n0", "h", res(t, "cpus:1;mem:100"), nil))
	must(t, a.AddFramework(fw("f", "r")))
	tests := map[string]struct {
		err  error
		want error
	}{
		"duplicate agent":        {a.AddAgent("n0", "h", nil, nil), ErrAlreadyExists},
		"duplicate framework":    {a.AddFramework(fw("f", "r")), ErrAlreadyExists},
		"bad role":               {a.AddFramework(fw("g", "/bad")), ErrInvalid},
		"quota on *":             {a.SetQuota("*", res(t, "cpus:1"), nil), ErrInvalid},
		"guarantee over limit":   {a.SetQuota("r", res(t, "cpus:2"), res(t, "cpus:1")), ErrInvalid},
		"zero weight":            {a.SetWeight("r", 0), ErrInvalid},
		"negative resource":      {a.AddAgent("n1", "h", api.Resources{"cpus": -1}, nil), ErrInvalid},
		"reservation for *":      {a.AddAgent("n2", "h", res(t, "cpus:1"), map[string]api.Resources{"*": res(t, "cpus:1")}), ErrInvalid},
		"unknown agent":          {a.RemoveAgent("nope"), ErrUnknownAgent},
		"unknown framework":      {a.Suppress("nope", nil), ErrUnknownFramework},
		"suppress unsubscribed":  {a.Suppress("f", []string{"other"}), ErrInvalid},
		"recover nothing":        {a.Recover("f", "n0", "r", []Piece{{Role: "*", Resources: res(t, "cpus:1")}}), ErrNotAllocated},
		"revocable not held":     {a.Recover("f", "n0", "r", []Piece{{Role: "*", Revocable: true, Resources: res(t, "cpus:1")}}), ErrNotAllocated},
		"throttleable reserved":  {a.Recover("f", "n0", "r", []Piece{{Role: "r", Revocable: true, Throttleable: true}}), ErrInvalid},
		"throttleable regular":   {a.Recover("f", "n0", "r", []Piece{{Role: "*", Throttleable: true}}), ErrInvalid},
		"lending limit on *":     {a.SetLendingLimit("*", nil), ErrInvalid},
		"negative lending limit": {a.SetLendingLimit("r", api.Resources{"cpus": -1}), ErrInvalid},
		"slack of unknown agent": {a.UpdateSlack("nope", res(t, "cpus:1")), ErrUnknownAgent},
		"negative slack":         {a.UpdateSlack("n0", api.Resources{"cpus": -1}), ErrInvalid},
		"reserved for a sibling": {a.AddUsed("f", "n0", "r", []Piece{{Role: "s", Resources: res(t, "cpus:1")}}), ErrInvalid},
		"used beyond the agent":  {a.AddUsed("f", "n0", "r", []Piece{{Role: "*", Resources: res(t, "cpus:2")}}), ErrInsufficient},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if !errors.Is(tc.err, tc.want) {
				t.Errorf("err = %v, want %v", tc.err, tc.want)
			}
		})
	}
}

func TestRemovalForgetsEverything(t *testing.T) {
	a := New(Options{Seed: 3})
	must(t, a.AddAgent("n0", "h", res(t, "cpus:4;mem:400"), map[string]api.Resources{"db/x": res(t, "cpus:1;mem:100")}))
	must(t, a.AddAgent("n1", "h", res(t, "cpus:4;mem:400"), nil))
	must(t, a.AddFramework(fw("f", "db/x", "web")))
	must(t, a.SetQuota("web", nil, res(t, "cpus:100")))
	for _, o := range a.Allocate(t0) {
		must(t, a.Launch(o.FrameworkID, o.AgentID, o.Role, o.Pieces))
	}
	must(t, a.Decline("f", "n0", nil, t0.Add(time.Hour)))
	must(t, a.RemoveFramework("f"))
	must(t, a.RemoveAgent("n0"))
	a.RemoveQuota("web")
	if roles := a.Roles(); len(roles) != 0 {
		t.Errorf("roles left: %+v", roles)
	}
	c := a.Cluster()
	if !sameResources(c.Total, res(t, "cpus:4;mem:400")) || !c.Allocated.IsZero() || !c.Offered.IsZero() {
		t.Errorf("cluster = %+v", c)
	}
	if len(a.filters) != 0 || len(a.frameworks) != 0 || a.eligibleCount != 0 {
		t.Errorf("left behind: %d filters, %d frameworks, %d eligible", len(a.filters), len(a.frameworks), a.eligibleCount)
	}
}

// TestConcurrentUse runs cycles, events and queries from several goroutines;
// under -race it shows the allocator guards its state.
func TestConcurrentUse(t *testing.T) {
	a := New(Options{Seed: 7})
	for i := 0; i < 20; i++ {
		must(t, a.AddAgent(fmt.Sprintf("n%d", i), "h", res(t, "cpus:4;mem:400"), nil))
	}
	for i := 0; i < 5; i++ {
		must(t, a.AddFramework(fw(fmt.Sprintf("f%d", i), fmt.Sprintf("r%d", i%2))))
	}
	must(t, a.SetQuota("r0", res(t, "cpus:20"), nil))
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < 200; i++ {
			for _, o := range a.Allocate(t0.Add(time.Duration(i) * time.Second)) {
				if err := a.Recover(o.FrameworkID, o.AgentID, o.Role, o.Pieces); err != nil {
					t.Error(err) // not Fatal: this is not the test's goroutine
					return
				}
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 200; i++ {
			_ = a.Roles()
			_ = a.Cluster()
			_ = a.QuotaConsumed("r0")
			_, _ = a.Agent("n1")
			if err := a.SetWeight("r1", float64(1+i%3)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	if c := a.Cluster(); !c.Offered.IsZero() || !c.Allocated.IsZero() {
		t.Errorf("everything was recovered, yet %+v", c)
	}
}

func TestRescindForQuota(t *testing.T) {
	offer := func(agent, cpus string) Offer {
		return Offer{AgentID: agent, Pieces: []Piece{{Role: "*", Resources: res(t, "cpus:"+cpus)}}}
	}
	outstanding := []Offer{offer("a", "2"), offer("b", "4"), offer("a", "1"), offer("c", "8"), offer("d", "1")}
	tests := map[string]struct {
		request    string
		frameworks int
		want       []int
	}{
		"nothing asked":                      {"", 0, nil},
		"every offer of the first agent":     {"cpus:1", 1, []int{0, 2}},
		"until the request is covered":       {"cpus:6", 1, []int{0, 1, 2}},
		"at least one agent per framework":   {"cpus:1", 3, []int{0, 1, 2, 3}},
		"everything when the request is big": {"cpus:100", 1, []int{0, 1, 2, 3, 4}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := RescindForQuota(outstanding, res(t, tc.request), tc.frameworks)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// RecoverOffer hands back an offer through the records the cycle added it
// to. Once those no longer hold it as made (its framework or agent went
// away, and a record may have been reused), it must do exactly what Recover
// does with the offer's pieces: the same error, the same books.
func TestRecoverOfferAsRecoverOnceItsRecordsAreGone(t *testing.T) {
	for name, change := range map[string]func(t *testing.T, a *Allocator, o Offer){
		"nothing changed": func(*testing.T, *Allocator, Offer) {},
		"framework back, offered again": func(t *testing.T, a *Allocator, o Offer) {
			must(t, a.RemoveFramework("f"))
			must(t, a.AddFramework(fw("f", "r")))
			a.Allocate(time.Now())
		},
		"framework gone, another offered the agent": func(t *testing.T, a *Allocator, o Offer) {
			must(t, a.RemoveFramework("f"))
			must(t, a.AddFramework(fw("g", "r")))
			a.Allocate(time.Now())
		},
		"offer recovered, offered again smaller": func(t *testing.T, a *Allocator, o Offer) {
			must(t, a.Recover("f", "n0", "r", o.Pieces))
			must(t, a.AddUsed("g2", "n0", "s", []Piece{{Role: api.DefaultRole, Resources: res(t, "cpus:3")}}))
			a.Allocate(time.Now())
		},
		"agent removed": func(t *testing.T, a *Allocator, o Offer) {
			must(t, a.RemoveAgent("n0"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			var books [2]string
			var errs [2]error
			for i, recoverOffer := range []bool{false, true} {
				a := New(Options{})
				must(t, a.AddAgent("n0", "h", res(t, "cpus:4;mem:400"), nil))
				must(t, a.AddFramework(fw("f", "r")))
				offers := a.Allocate(time.Now())
				if len(offers) != 1 || offers[0].held == nil {
					t.Fatalf("offers: %+v, want one regular offer", offers)
				}
				change(t, a, offers[0])
				if recoverOffer {
					errs[i] = a.RecoverOffer(offers[0])
				} else {
					errs[i] = a.Recover(offers[0].FrameworkID, offers[0].AgentID, offers[0].Role, offers[0].Pieces)
				}
				ag, _ := a.Agent("n0")
				books[i] = fmt.Sprintf("%+v %+v %+v", a.Roles(), a.Cluster(), ag)
			}
			if fmt.Sprint(errs[0]) != fmt.Sprint(errs[1]) {
				t.Errorf("RecoverOffer: %v; Recover: %v", errs[1], errs[0])
			}
			if books[0] != books[1] {
				t.Errorf("books after RecoverOffer:\n%s\nafter Recover:\n%s", books[1], books[0])
			}
		})
	}
}

// Offers of the same size share one resource map, in a cycle and in the
// cycles after it, and each map still says what its offer holds.
func TestOffersShareResourceMaps(t *testing.T) {
	a := New(Options{})
	for i := range 3 {
		must(t, a.AddAgent(fmt.Sprintf("n%d", i), "h", res(t, "cpus:4;mem:400"), nil))
	}
	must(t, a.AddAgent("small", "h", res(t, "cpus:1;mem:100"), nil))
	must(t, a.AddFramework(fw("f", "r")))
	mapOf := func(o Offer) uintptr { return reflect.ValueOf(o.Pieces[0].Resources).Pointer() }
	var first uintptr
	for cycle := range 2 {
		offers := a.Allocate(t0)
		if len(offers) != 4 {
			t.Fatalf("cycle %d: %d offers, want 4", cycle, len(offers))
		}
		for _, o := range offers {
			want := res(t, "cpus:4;mem:400")
			if o.AgentID == "small" {
				want = res(t, "cpus:1;mem:100")
			}
			if len(o.Pieces) != 1 || !sameResources(o.Pieces[0].Resources, want) {
				t.Fatalf("cycle %d: offer of %s holds %v, want %v", cycle, o.AgentID, o.Pieces, want)
			}
			if o.AgentID == "small" {
				continue
			}
			if first == 0 {
				first = mapOf(o)
			} else if mapOf(o) != first {
				t.Errorf("cycle %d: offer of %s has a map of its own", cycle, o.AgentID)
			}
		}
		for _, o := range offers {
			must(t, a.RecoverOffer(o))
		}
	}
}

// The shared maps are bounded: a builder offered more sizes than it keeps
// starts over and still answers each amount with its own resources.
func TestSharedResourceMapsBounded(t *testing.T) {
	a := New(Options{})
	var b offerBuilder
	for i := range maxSharedResources + 10 {
		want := api.Resources{"cpus": float64(i+1) / 1000, "mem": 1}
		v, err := a.toVec(want, "test")
		must(t, err)
		if got := b.resources(a, v); !sameResources(got, want) {
			t.Fatalf("amount %d: got %v, want %v", i, got, want)
		}
		if len(b.shared) > maxSharedResources {
			t.Fatalf("%d shared maps kept, at most %d", len(b.shared), maxSharedResources)
		}
	}
}
