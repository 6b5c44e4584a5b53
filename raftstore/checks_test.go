package raftstore

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/allot/allot/masterd/api"
)

// bigAgent admits enough capacity that the capacity heuristic stays out of
// the way of the hierarchy tests.
var bigAgent = admit("big", api.Resources{"cpus": 1000, "mem": 1e6, "disk": 1e6, "gpus": 100})

func TestQuotaSet(t *testing.T) {
	tests := map[string]struct {
		setup    []Command
		cmd      Command
		wantCode string
		// want is the stored quota, without its version.
		want *api.Quota
	}{
		"create": {
			cmd:  quotaSet("eng", api.Resources{"cpus": 10}, api.Resources{"cpus": 20, "mem": 4096}),
			want: &api.Quota{Role: "eng", Guarantees: api.Resources{"cpus": 10}, Limits: api.Resources{"cpus": 20, "mem": 4096}},
		},
		"update in place replaces both maps": {
			setup: []Command{quotaSet("eng", api.Resources{"cpus": 10, "mem": 100}, api.Resources{"cpus": 20})},
			cmd:   quotaSet("eng", api.Resources{"mem": 50}, nil),
			want:  &api.Quota{Role: "eng", Guarantees: api.Resources{"mem": 50}, Limits: api.Resources{}},
		},
		"values rounded to 0.001": {
			cmd:  quotaSet("eng", api.Resources{"cpus": 0.5004}, api.Resources{"cpus": 1.2345}),
			want: &api.Quota{Role: "eng", Guarantees: api.Resources{"cpus": 0.5}, Limits: api.Resources{"cpus": 1.235}},
		},
		"nil maps stored as empty": {
			cmd:  quotaSet("eng", nil, nil),
			want: &api.Quota{Role: "eng", Guarantees: api.Resources{}, Limits: api.Resources{}},
		},
		"guarantee without a limit for that resource": {
			cmd:  quotaSet("eng", api.Resources{"cpus": 10, "mem": 64}, api.Resources{"cpus": 10}),
			want: &api.Quota{Role: "eng", Guarantees: api.Resources{"cpus": 10, "mem": 64}, Limits: api.Resources{"cpus": 10}},
		},
		"guarantee above limit": {
			cmd:      quotaSet("eng", api.Resources{"cpus": 10.001}, api.Resources{"cpus": 10}),
			wantCode: api.CodeInvalidArgument,
		},
		"guarantee above limit after rounding is equal": {
			cmd:  quotaSet("eng", api.Resources{"cpus": 10.0004}, api.Resources{"cpus": 10}),
			want: &api.Quota{Role: "eng", Guarantees: api.Resources{"cpus": 10}, Limits: api.Resources{"cpus": 10}},
		},
		"negative guarantee": {
			cmd:      quotaSet("eng", api.Resources{"cpus": -1}, nil),
			wantCode: api.CodeInvalidArgument,
		},
		"negative limit": {
			cmd:      quotaSet("eng", nil, api.Resources{"mem": -0.5}),
			wantCode: api.CodeInvalidArgument,
		},
		"NaN guarantee": {
			cmd:      quotaSet("eng", api.Resources{"cpus": math.NaN()}, nil),
			wantCode: api.CodeInvalidArgument,
		},
		"infinite limit": {
			cmd:      quotaSet("eng", nil, api.Resources{"cpus": math.Inf(1)}),
			wantCode: api.CodeInvalidArgument,
		},
		"huge limit": {
			cmd:      quotaSet("eng", nil, api.Resources{"cpus": 1e16}),
			wantCode: api.CodeInvalidArgument,
		},
		"bad resource name": {
			cmd:      quotaSet("eng", api.Resources{"CPUs": 1}, nil),
			wantCode: api.CodeInvalidArgument,
		},
		"default role": {
			cmd:      quotaSet("*", api.Resources{"cpus": 1}, nil),
			wantCode: api.CodeInvalidArgument,
		},
		"empty role": {
			cmd:      quotaSet("", nil, nil),
			wantCode: api.CodeInvalidArgument,
		},
		"role with empty component": {
			cmd:      quotaSet("eng//ml", nil, nil),
			wantCode: api.CodeInvalidArgument,
		},
		"role with dot-dot component": {
			cmd:      quotaSet("eng/..", nil, nil),
			wantCode: api.CodeInvalidArgument,
		},
		"role with leading slash": {
			cmd:      quotaSet("/eng", nil, nil),
			wantCode: api.CodeInvalidArgument,
		},
		"role too long": {
			cmd:      quotaSet(strings.Repeat("r", 257), nil, nil),
			wantCode: api.CodeInvalidArgument,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := NewState()
			mustApply(t, s, bigAgent)
			mustApply(t, s, tc.setup...)
			res := applyNext(t, s, tc.cmd)
			wantCode(t, res, tc.wantCode)
			if tc.want == nil {
				return
			}
			want := *tc.want
			want.Version = res.Index
			got, ok := s.Quota(want.Role)
			if !ok || !reflect.DeepEqual(got, want) {
				t.Fatalf("stored quota %+v (found %v), want %+v", got, ok, want)
			}
			if obj, ok := res.Object.(api.Quota); !ok || !reflect.DeepEqual(obj, want) {
				t.Fatalf("result object %#v, want %+v", res.Object, want)
			}
		})
	}
}

// TestQuotaHierarchy covers the rules between a role and its ancestors: a
// child's limit never exceeds a limit above it, and the guarantees of a
// role's nearest children with a quota fit in its own guarantee.
func TestQuotaHierarchy(t *testing.T) {
	g := func(cpus float64) api.Resources { return api.Resources{"cpus": cpus} }
	tests := map[string]struct {
		setup    []Command
		cmd      Command
		wantCode string
	}{
		"child limit equal to parent's": {
			setup: []Command{quotaSet("eng", nil, g(10))},
			cmd:   quotaSet("eng/ml", nil, g(10)),
		},
		"child limit above parent's": {
			setup:    []Command{quotaSet("eng", nil, g(10))},
			cmd:      quotaSet("eng/ml", nil, g(10.001)),
			wantCode: api.CodeInvalidArgument,
		},
		"child limit above grandparent's, no quota in between": {
			setup:    []Command{quotaSet("eng", nil, g(10))},
			cmd:      quotaSet("eng/ml/train", nil, g(11)),
			wantCode: api.CodeInvalidArgument,
		},
		"child limit above grandparent's, middle quota leaves the resource unlimited": {
			setup: []Command{
				quotaSet("eng", nil, g(10)),
				quotaSet("eng/ml", nil, api.Resources{"mem": 100}),
			},
			cmd:      quotaSet("eng/ml/train", nil, g(11)),
			wantCode: api.CodeInvalidArgument,
		},
		"child without a limit under a limited parent": {
			setup: []Command{quotaSet("eng", nil, g(10))},
			cmd:   quotaSet("eng/ml", nil, api.Resources{"mem": 1}),
		},
		"child limit on a resource the parent leaves unlimited": {
			setup: []Command{quotaSet("eng", nil, g(10))},
			cmd:   quotaSet("eng/ml", nil, api.Resources{"mem": 1e6}),
		},
		"lowering parent limit below a child's": {
			setup: []Command{
				quotaSet("eng", nil, g(10)),
				quotaSet("eng/ml", nil, g(8)),
			},
			cmd:      quotaSet("eng", nil, g(7)),
			wantCode: api.CodeInvalidArgument,
		},
		"lowering grandparent limit below a grandchild's": {
			setup: []Command{
				quotaSet("eng", nil, g(10)),
				quotaSet("eng/ml", nil, nil),
				quotaSet("eng/ml/train", nil, g(8)),
			},
			cmd:      quotaSet("eng", nil, g(7)),
			wantCode: api.CodeInvalidArgument,
		},
		"adding a parent limit below an existing child's": {
			setup:    []Command{quotaSet("eng/ml", nil, g(8))},
			cmd:      quotaSet("eng", nil, g(7)),
			wantCode: api.CodeInvalidArgument,
		},
		"children's guarantees fit the parent's": {
			setup: []Command{
				quotaSet("eng", g(10), nil),
				quotaSet("eng/ml", g(6), nil),
			},
			cmd: quotaSet("eng/web", g(4), nil),
		},
		"children's guarantees above the parent's": {
			setup: []Command{
				quotaSet("eng", g(10), nil),
				quotaSet("eng/ml", g(6), nil),
			},
			cmd:      quotaSet("eng/web", g(4.001), nil),
			wantCode: api.CodeInvalidArgument,
		},
		"child guarantee on a resource the parent does not guarantee": {
			setup:    []Command{quotaSet("eng", g(10), nil)},
			cmd:      quotaSet("eng/ml", api.Resources{"mem": 1}, nil),
			wantCode: api.CodeInvalidArgument,
		},
		"updating a child counts its new guarantee, not old plus new": {
			setup: []Command{
				quotaSet("eng", g(10), nil),
				quotaSet("eng/ml", g(6), nil),
				quotaSet("eng/web", g(4), nil),
			},
			cmd: quotaSet("eng/ml", g(6), g(6)),
		},
		"lowering the parent's guarantee below its children's sum": {
			setup: []Command{
				quotaSet("eng", g(10), nil),
				quotaSet("eng/ml", g(6), nil),
				quotaSet("eng/web", g(4), nil),
			},
			cmd:      quotaSet("eng", g(9.999), nil),
			wantCode: api.CodeInvalidArgument,
		},
		"adding a parent below its existing children's sum": {
			setup: []Command{
				quotaSet("eng/ml", g(6), nil),
				quotaSet("eng/web", g(4), nil),
			},
			cmd:      quotaSet("eng", g(9), nil),
			wantCode: api.CodeInvalidArgument,
		},
		"grandchildren count toward the grandparent without a quota in between": {
			setup: []Command{
				quotaSet("eng", g(10), nil),
				quotaSet("eng/ml/train", g(6), nil),
			},
			cmd:      quotaSet("eng/web", g(5), nil),
			wantCode: api.CodeInvalidArgument,
		},
		"a middle quota takes over its children": {
			setup: []Command{
				quotaSet("eng", g(10), nil),
				quotaSet("eng/ml/train", g(6), nil),
			},
			// eng/ml's 6 replaces eng/ml/train's 6 in eng's sum.
			cmd: quotaSet("eng/ml", g(6), nil),
		},
		"a middle quota below the children it takes over": {
			setup: []Command{
				quotaSet("eng", g(10), nil),
				quotaSet("eng/ml/train", g(6), nil),
			},
			cmd:      quotaSet("eng/ml", g(5), nil),
			wantCode: api.CodeInvalidArgument,
		},
		"siblings of other parents do not count": {
			setup: []Command{
				quotaSet("eng", g(10), nil),
				quotaSet("ops", g(10), nil),
				quotaSet("ops/db", g(10), nil),
				quotaSet("engineering", g(10), nil),
			},
			cmd: quotaSet("eng/ml", g(10), nil),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := NewState()
			mustApply(t, s, bigAgent)
			mustApply(t, s, tc.setup...)
			wantCode(t, applyNext(t, s, tc.cmd), tc.wantCode)
			checkInvariants(t, s)
		})
	}
}

func TestQuotaDelete(t *testing.T) {
	g := func(cpus float64) api.Resources { return api.Resources{"cpus": cpus} }
	tests := map[string]struct {
		setup    []Command
		del      string
		wantCode string
		// then runs after the delete; its outcomes show what the delete did
		// to the hierarchy.
		then     []Command
		thenCode []string
	}{
		"existing": {
			setup: []Command{quotaSet("eng", g(1), nil)},
			del:   "eng",
		},
		"missing": {
			del:      "eng",
			wantCode: api.CodeNotFound,
		},
		"a role without quota whose child has one": {
			setup:    []Command{quotaSet("eng/ml", g(1), nil)},
			del:      "eng",
			wantCode: api.CodeNotFound,
		},
		"a middle quota: grandchildren now count toward the grandparent": {
			setup: []Command{
				quotaSet("eng", g(10), nil),
				quotaSet("eng/ml", g(6), nil),
				quotaSet("eng/ml/train", g(2), nil),
			},
			del: "eng/ml",
			// eng's children are now eng/ml/train (2) and eng/web: 8 fits, 9 does not.
			then:     []Command{quotaSet("eng/web", g(9), nil), quotaSet("eng/web", g(8), nil)},
			thenCode: []string{api.CodeInvalidArgument, ""},
		},
		"a middle quota: grandchildren's limits now judged against the grandparent": {
			setup: []Command{
				quotaSet("eng", nil, g(10)),
				quotaSet("eng/ml", nil, g(6)),
				quotaSet("eng/ml/train", nil, g(6)),
			},
			del:      "eng/ml",
			then:     []Command{quotaSet("eng", nil, g(5.999)), quotaSet("eng", nil, g(6))},
			thenCode: []string{api.CodeInvalidArgument, ""},
		},
		"a parent: its children become top level": {
			setup: []Command{
				quotaSet("eng", g(10), g(10)),
				quotaSet("eng/ml", g(10), g(10)),
			},
			del:      "eng",
			then:     []Command{quotaSet("eng/ml", g(20), g(20))},
			thenCode: []string{""},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := NewState()
			mustApply(t, s, bigAgent)
			mustApply(t, s, tc.setup...)
			res := applyNext(t, s, &QuotaDelete{WriteMeta: meta(), Role: tc.del})
			wantCode(t, res, tc.wantCode)
			if tc.wantCode == "" {
				if _, ok := s.Quota(tc.del); ok {
					t.Fatalf("quota %s still stored after delete", tc.del)
				}
				if q, ok := res.Object.(api.Quota); !ok || q.Role != tc.del {
					t.Fatalf("result object %#v, want the deleted quota", res.Object)
				}
			}
			for i, c := range tc.then {
				wantCode(t, applyNext(t, s, c), tc.thenCode[i])
			}
			checkInvariants(t, s)
		})
	}
}

// TestQuotaDeleteJudgesInheritedState covers a state written before the
// hierarchy rules were as strict as now (as an old snapshot could hold): a
// delete that would put a grandchild under a smaller limit is refused.
func TestQuotaDeleteJudgesInheritedState(t *testing.T) {
	s := NewState()
	s.putQuota(api.Quota{Role: "eng", Guarantees: api.Resources{}, Limits: api.Resources{"cpus": 10}, Version: 1})
	s.putQuota(api.Quota{Role: "eng/ml", Guarantees: api.Resources{"cpus": 8}, Limits: api.Resources{"cpus": 20}, Version: 2})
	s.putQuota(api.Quota{Role: "eng/ml/train", Guarantees: api.Resources{"cpus": 8}, Limits: api.Resources{"cpus": 20}, Version: 3})
	s.index = 3
	// eng's guarantee of nothing cannot hold eng/ml/train's 8 cpus.
	wantCode(t, applyNext(t, s, &QuotaDelete{WriteMeta: meta(), Role: "eng/ml"}), api.CodeInvalidArgument)
}

func TestQuotaCapacity(t *testing.T) {
	// request is the write's own guarantee, others the other roles'.
	type shortfall struct {
		resource                  string
		request, others, capacity float64
	}
	tests := map[string]struct {
		setup      []Command
		cmd        Command
		wantCode   string
		shortfalls []shortfall
	}{
		"fits": {
			setup: []Command{admit("n1", api.Resources{"cpus": 4, "mem": 100}), admit("n2", api.Resources{"cpus": 6, "mem": 100})},
			cmd:   quotaSet("eng", api.Resources{"cpus": 10, "mem": 200}, nil),
		},
		"no agents, zero guarantee": {
			cmd: quotaSet("eng", api.Resources{"cpus": 0}, api.Resources{"cpus": 5}),
		},
		"no agents, any guarantee": {
			cmd:        quotaSet("eng", api.Resources{"cpus": 0.001}, nil),
			wantCode:   api.CodeCapacityExceeded,
			shortfalls: []shortfall{{"cpus", 0.001, 0, 0}},
		},
		"sum of roles above capacity": {
			setup: []Command{
				admit("n1", api.Resources{"cpus": 10, "mem": 100}),
				quotaSet("eng", api.Resources{"cpus": 8}, nil),
			},
			cmd:        quotaSet("ops", api.Resources{"cpus": 2.5, "mem": 50}, nil),
			wantCode:   api.CodeCapacityExceeded,
			shortfalls: []shortfall{{"cpus", 2.5, 8, 10}},
		},
		"several shortfalls in name order": {
			setup: []Command{admit("n1", api.Resources{"cpus": 10, "mem": 100})},
			cmd:   quotaSet("eng", api.Resources{"mem": 101, "cpus": 11, "gpus": 1}, nil),
			shortfalls: []shortfall{
				{"cpus", 11, 0, 10},
				{"gpus", 1, 0, 0},
				{"mem", 101, 0, 100},
			},
			wantCode: api.CodeCapacityExceeded,
		},
		"forced": {
			setup: []Command{admit("n1", api.Resources{"cpus": 10})},
			cmd:   forcedQuotaSet("eng", api.Resources{"cpus": 11}, nil),
		},
		"an update counts the role once": {
			setup: []Command{
				admit("n1", api.Resources{"cpus": 10}),
				quotaSet("eng", api.Resources{"cpus": 8}, nil),
			},
			cmd: quotaSet("eng", api.Resources{"cpus": 10}, nil),
		},
		"children are part of their parent's guarantee": {
			setup: []Command{
				admit("n1", api.Resources{"cpus": 10}),
				quotaSet("eng", api.Resources{"cpus": 10}, nil),
			},
			cmd: quotaSet("eng/ml", api.Resources{"cpus": 10}, nil),
		},
		"a child without a parent quota counts": {
			setup: []Command{
				admit("n1", api.Resources{"cpus": 10}),
				quotaSet("eng", api.Resources{"cpus": 6}, nil),
			},
			cmd:        quotaSet("ops/db", api.Resources{"cpus": 5}, nil),
			wantCode:   api.CodeCapacityExceeded,
			shortfalls: []shortfall{{"cpus", 5, 6, 10}},
		},
		"over-committed cluster: lowering a guarantee": {
			setup: []Command{
				admit("n1", api.Resources{"cpus": 10}),
				forcedQuotaSet("eng", api.Resources{"cpus": 15}, nil),
			},
			cmd: quotaSet("eng", api.Resources{"cpus": 12}, nil),
		},
		"over-committed cluster: raising a guarantee": {
			setup: []Command{
				admit("n1", api.Resources{"cpus": 10}),
				forcedQuotaSet("eng", api.Resources{"cpus": 15}, nil),
			},
			cmd:        quotaSet("eng", api.Resources{"cpus": 15.5}, nil),
			wantCode:   api.CodeCapacityExceeded,
			shortfalls: []shortfall{{"cpus", 15.5, 0, 10}},
		},
		"over-committed cluster: limits-only change to an over-committed role": {
			setup: []Command{
				admit("n1", api.Resources{"cpus": 10}),
				forcedQuotaSet("eng", api.Resources{"cpus": 15}, nil),
			},
			cmd: quotaSet("eng", api.Resources{"cpus": 15}, api.Resources{"cpus": 30}),
		},
		"over-committed on cpus: raising mem that fits": {
			setup: []Command{
				admit("n1", api.Resources{"cpus": 10, "mem": 100}),
				forcedQuotaSet("eng", api.Resources{"cpus": 15}, nil),
			},
			cmd: quotaSet("ops", api.Resources{"mem": 100}, nil),
		},
		"over-committed cluster: a new role with any of the short resource": {
			setup: []Command{
				admit("n1", api.Resources{"cpus": 10, "mem": 100}),
				forcedQuotaSet("eng", api.Resources{"cpus": 15}, nil),
			},
			cmd:        quotaSet("ops", api.Resources{"cpus": 1, "mem": 1}, nil),
			wantCode:   api.CodeCapacityExceeded,
			shortfalls: []shortfall{{"cpus", 1, 15, 10}},
		},
		"capacity shrank when an agent left": {
			setup: []Command{
				admit("n1", api.Resources{"cpus": 10}),
				admit("n2", api.Resources{"cpus": 10}),
				quotaSet("eng", api.Resources{"cpus": 15}, nil),
				&AgentRemove{WriteMeta: meta(), ID: "id-n2"},
			},
			cmd:        quotaSet("ops", api.Resources{"cpus": 1}, nil),
			wantCode:   api.CodeCapacityExceeded,
			shortfalls: []shortfall{{"cpus", 1, 15, 10}},
		},
		"capacity follows a re-admitted agent's new resources": {
			setup: []Command{
				admit("n1", api.Resources{"cpus": 10}),
				admit("n1", api.Resources{"cpus": 20}),
			},
			cmd: quotaSet("eng", api.Resources{"cpus": 20}, nil),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := NewState()
			mustApply(t, s, tc.setup...)
			res := applyNext(t, s, tc.cmd)
			wantCode(t, res, tc.wantCode)
			if tc.wantCode != api.CodeCapacityExceeded {
				return
			}
			if res.Err.Status != 409 {
				t.Errorf("status %d, want 409", res.Err.Status)
			}
			var want []any
			for _, sf := range tc.shortfalls {
				total := api.RoundScalar(sf.request + sf.others)
				want = append(want, map[string]any{"resource": sf.resource, "requested": total, "capacity": sf.capacity,
					"request": sf.request, "others": sf.others, "short_by": api.RoundScalar(total - sf.capacity)})
			}
			if got := res.Err.Details["shortfalls"]; !reflect.DeepEqual(got, want) {
				t.Fatalf("details shortfalls %#v, want %#v", got, want)
			}
		})
	}
}

func TestRoleSet(t *testing.T) {
	tests := map[string]struct {
		cmd      *RoleSet
		wantCode string
		want     RolePolicy
	}{
		"weight": {
			cmd:  &RoleSet{WriteMeta: meta(), Role: "eng/ml", Weight: 2.5},
			want: RolePolicy{Role: "eng/ml", Weight: 2.5},
		},
		"smallest weight": {
			cmd:  &RoleSet{WriteMeta: meta(), Role: "eng", Weight: math.SmallestNonzeroFloat64},
			want: RolePolicy{Role: "eng", Weight: math.SmallestNonzeroFloat64},
		},
		"largest weight": {
			cmd:  &RoleSet{WriteMeta: meta(), Role: "eng", Weight: 1e6},
			want: RolePolicy{Role: "eng", Weight: 1e6},
		},
		"lending limit rounded": {
			cmd:  &RoleSet{WriteMeta: meta(), Role: "eng", Weight: 1, LendingLimit: api.Resources{"cpus": 8.00049}},
			want: RolePolicy{Role: "eng", Weight: 1, LendingLimit: api.Resources{"cpus": 8}},
		},
		"zero weight":     {cmd: &RoleSet{WriteMeta: meta(), Role: "eng", Weight: 0}, wantCode: api.CodeInvalidArgument},
		"negative weight": {cmd: &RoleSet{WriteMeta: meta(), Role: "eng", Weight: -1}, wantCode: api.CodeInvalidArgument},
		"NaN weight":      {cmd: &RoleSet{WriteMeta: meta(), Role: "eng", Weight: math.NaN()}, wantCode: api.CodeInvalidArgument},
		"infinite weight": {cmd: &RoleSet{WriteMeta: meta(), Role: "eng", Weight: math.Inf(1)}, wantCode: api.CodeInvalidArgument},
		"weight too big":  {cmd: &RoleSet{WriteMeta: meta(), Role: "eng", Weight: 1e6 + 1}, wantCode: api.CodeInvalidArgument},
		"bad role":        {cmd: &RoleSet{WriteMeta: meta(), Role: "eng ml", Weight: 1}, wantCode: api.CodeInvalidArgument},
		"negative lending limit": {
			cmd:      &RoleSet{WriteMeta: meta(), Role: "eng", Weight: 1, LendingLimit: api.Resources{"cpus": -1}},
			wantCode: api.CodeInvalidArgument,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := NewState()
			res := applyNext(t, s, tc.cmd)
			wantCode(t, res, tc.wantCode)
			if tc.wantCode != "" {
				if _, ok := s.roles[tc.cmd.Role]; ok {
					t.Fatalf("rejected role stored")
				}
				return
			}
			want := tc.want
			want.Version = res.Index
			if got, ok := s.RolePolicy(tc.cmd.Role); !ok || !reflect.DeepEqual(got, want) {
				t.Fatalf("role policy %+v (configured %v), want %+v", got, ok, want)
			}
		})
	}
}

func TestRoleDefaultsAndDelete(t *testing.T) {
	s := NewState()
	if p, ok := s.RolePolicy("eng"); ok || !reflect.DeepEqual(p, RolePolicy{Role: "eng", Weight: api.DefaultWeight}) {
		t.Fatalf("never configured: %+v, %v; want weight 1 and version 0", p, ok)
	}
	wantCode(t, applyNext(t, s, &RoleDelete{WriteMeta: meta(), Role: "eng"}), api.CodeNotFound)
	mustApply(t, s, &RoleSet{WriteMeta: meta(), Role: "eng", Weight: 3, LendingLimit: api.Resources{"cpus": 1}})
	res := mustApply(t, s, &RoleDelete{WriteMeta: meta(), Role: "eng"})
	if p, ok := res.Object.(RolePolicy); !ok || p.Weight != 3 {
		t.Fatalf("delete result %#v, want the old policy", res.Object)
	}
	if p, ok := s.RolePolicy("eng"); ok || p.Weight != 1 || p.Version != 0 || p.LendingLimit != nil {
		t.Fatalf("after delete: %+v, %v; want the default", p, ok)
	}
	if n := len(s.RolePolicies()); n != 0 {
		t.Fatalf("%d role policies after delete", n)
	}
}

func TestReservationSet(t *testing.T) {
	n1 := admit("node-1", api.Resources{"cpus": 8, "mem": 1024})
	tests := map[string]struct {
		setup      []Command
		cmd        *ReservationSet
		wantCode   string
		wantStatus string
		shortfalls []any
	}{
		"fits": {
			setup:      []Command{n1},
			cmd:        reserve("db", "node-1", "db", api.Resources{"cpus": 4, "mem": 512}),
			wantStatus: api.ReservationActive,
		},
		"exactly the agent": {
			setup:      []Command{n1},
			cmd:        reserve("db", "node-1", "db", api.Resources{"cpus": 8, "mem": 1024}),
			wantStatus: api.ReservationActive,
		},
		"agent not admitted": {
			setup:    []Command{n1},
			cmd:      reserve("db", "node-2", "db", api.Resources{"cpus": 1}),
			wantCode: api.CodeConflict,
		},
		"agent removed": {
			setup:    []Command{n1, &AgentRemove{WriteMeta: meta(), ID: "id-node-1"}},
			cmd:      reserve("db", "node-1", "db", api.Resources{"cpus": 1}),
			wantCode: api.CodeConflict,
		},
		"agent named by id": {
			setup:    []Command{n1},
			cmd:      reserve("db", "id-node-1", "db", api.Resources{"cpus": 1}),
			wantCode: api.CodeConflict,
		},
		"more than the agent": {
			setup:      []Command{n1},
			cmd:        reserve("db", "node-1", "db", api.Resources{"cpus": 9, "mem": 1}),
			wantCode:   api.CodeCapacityExceeded,
			shortfalls: []any{map[string]any{"resource": "cpus", "requested": 9.0, "capacity": 8.0, "request": 9.0, "others": 0.0, "short_by": 1.0}},
		},
		"a resource the agent lacks": {
			setup:      []Command{n1},
			cmd:        reserve("db", "node-1", "db", api.Resources{"gpus": 1}),
			wantCode:   api.CodeCapacityExceeded,
			shortfalls: []any{map[string]any{"resource": "gpus", "requested": 1.0, "capacity": 0.0, "request": 1.0, "others": 0.0, "short_by": 1.0}},
		},
		"together with another reservation": {
			setup: []Command{n1, reserve("web", "node-1", "web", api.Resources{"cpus": 6, "mem": 1000})},
			cmd:   reserve("db", "node-1", "db", api.Resources{"cpus": 3, "mem": 25}),
			shortfalls: []any{
				map[string]any{"resource": "cpus", "requested": 9.0, "capacity": 8.0, "request": 3.0, "others": 6.0, "short_by": 1.0},
				map[string]any{"resource": "mem", "requested": 1025.0, "capacity": 1024.0, "request": 25.0, "others": 1000.0, "short_by": 1.0},
			},
			wantCode: api.CodeCapacityExceeded,
		},
		"reservations on other agents do not count": {
			setup: []Command{
				n1, admit("node-2", api.Resources{"cpus": 8}),
				reserve("web", "node-2", "web", api.Resources{"cpus": 8}),
			},
			cmd:        reserve("db", "node-1", "db", api.Resources{"cpus": 8}),
			wantStatus: api.ReservationActive,
		},
		"an update does not count its old size": {
			setup:      []Command{n1, reserve("db", "node-1", "db", api.Resources{"cpus": 6})},
			cmd:        reserve("db", "node-1", "db", api.Resources{"cpus": 8}),
			wantStatus: api.ReservationActive,
		},
		"forced past the agent": {
			setup: []Command{n1, reserve("web", "node-1", "web", api.Resources{"cpus": 6})},
			cmd: func() *ReservationSet {
				c := reserve("db", "node-1", "db", api.Resources{"cpus": 4})
				c.Force = true
				return c
			}(),
			wantStatus: api.ReservationPending,
		},
		"forced but fits": {
			setup: []Command{n1},
			cmd: func() *ReservationSet {
				c := reserve("db", "node-1", "db", api.Resources{"cpus": 4})
				c.Force = true
				return c
			}(),
			wantStatus: api.ReservationActive,
		},
		"forced before the agent is admitted": {
			cmd: func() *ReservationSet {
				c := reserve("db", "node-1", "db", api.Resources{"cpus": 4})
				c.Force = true
				return c
			}(),
			wantStatus: api.ReservationPending,
		},
		"nothing reserved": {
			setup:    []Command{n1},
			cmd:      reserve("db", "node-1", "db", api.Resources{"cpus": 0}),
			wantCode: api.CodeInvalidArgument,
		},
		"no resources": {
			setup:    []Command{n1},
			cmd:      reserve("db", "node-1", "db", nil),
			wantCode: api.CodeInvalidArgument,
		},
		"negative": {
			setup:    []Command{n1},
			cmd:      reserve("db", "node-1", "db", api.Resources{"cpus": -1, "mem": 2}),
			wantCode: api.CodeInvalidArgument,
		},
		"bad name": {
			setup:    []Command{n1},
			cmd:      reserve("db/1", "node-1", "db", api.Resources{"cpus": 1}),
			wantCode: api.CodeInvalidArgument,
		},
		"bad role": {
			setup:    []Command{n1},
			cmd:      reserve("db", "node-1", "*", api.Resources{"cpus": 1}),
			wantCode: api.CodeInvalidArgument,
		},
		"empty agent": {
			setup:    []Command{n1},
			cmd:      reserve("db", "", "db", api.Resources{"cpus": 1}),
			wantCode: api.CodeInvalidArgument,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := NewState()
			mustApply(t, s, tc.setup...)
			res := applyNext(t, s, tc.cmd)
			wantCode(t, res, tc.wantCode)
			if tc.wantCode == api.CodeCapacityExceeded {
				if got := res.Err.Details["shortfalls"]; !reflect.DeepEqual(got, tc.shortfalls) {
					t.Fatalf("shortfalls %#v, want %#v", got, tc.shortfalls)
				}
			}
			if tc.wantCode != "" {
				return
			}
			want := api.Reservation{Name: tc.cmd.Name, Agent: tc.cmd.Agent, Role: tc.cmd.Role,
				Resources: tc.cmd.Resources.Normalized(), Version: res.Index, Status: tc.wantStatus}
			if got, ok := s.Reservation(tc.cmd.Name); !ok || !reflect.DeepEqual(got, want) {
				t.Fatalf("stored %+v (found %v), want %+v", got, ok, want)
			}
			if got := res.Object; !reflect.DeepEqual(got, want) {
				t.Fatalf("result object %+v, want %+v", got, want)
			}
			checkInvariants(t, s)
		})
	}
}

// TestReservationStatusRefresh follows reservation statuses as the agent and
// the other reservations on it change.
func TestReservationStatusRefresh(t *testing.T) {
	force := func(c *ReservationSet) *ReservationSet { c.Force = true; return c }
	type step struct {
		cmd  Command
		want map[string]string // reservation → status after the step
	}
	tests := map[string][]step{
		"re-admitted with more resources": {
			{admit("n1", api.Resources{"cpus": 4}), nil},
			{reserve("a", "n1", "db", api.Resources{"cpus": 3}), map[string]string{"a": "active"}},
			{force(reserve("b", "n1", "db", api.Resources{"cpus": 3})), map[string]string{"a": "active", "b": "pending"}},
			{admit("n1", api.Resources{"cpus": 6}), map[string]string{"a": "active", "b": "active"}},
			{admit("n1", api.Resources{"cpus": 5}), map[string]string{"a": "active", "b": "pending"}},
		},
		"another reservation deleted": {
			{admit("n1", api.Resources{"cpus": 4}), nil},
			{reserve("a", "n1", "db", api.Resources{"cpus": 3}), nil},
			{force(reserve("b", "n1", "db", api.Resources{"cpus": 2})), map[string]string{"a": "active", "b": "pending"}},
			{&ReservationDelete{WriteMeta: meta(), Name: "a"}, map[string]string{"b": "active"}},
		},
		"agent removed and re-admitted": {
			{admit("n1", api.Resources{"cpus": 4}), nil},
			{reserve("a", "n1", "db", api.Resources{"cpus": 3}), map[string]string{"a": "active"}},
			{&AgentRemove{WriteMeta: meta(), ID: "id-n1"}, map[string]string{"a": "pending"}},
			{admit("n1", api.Resources{"cpus": 2}), map[string]string{"a": "pending"}},
			{admit("n1", api.Resources{"cpus": 3}), map[string]string{"a": "active"}},
		},
		"a reservation moved to another agent frees the first": {
			{admit("n1", api.Resources{"cpus": 4}), nil},
			{admit("n2", api.Resources{"cpus": 4}), nil},
			{reserve("a", "n1", "db", api.Resources{"cpus": 3}), nil},
			{force(reserve("b", "n1", "db", api.Resources{"cpus": 3})), map[string]string{"a": "active", "b": "pending"}},
			{reserve("a", "n2", "db", api.Resources{"cpus": 3}), map[string]string{"a": "active", "b": "active"}},
		},
		"older reservations claim first": {
			{admit("n1", api.Resources{"cpus": 4}), nil},
			{reserve("z", "n1", "db", api.Resources{"cpus": 3}), nil},
			{force(reserve("a", "n1", "db", api.Resources{"cpus": 3})), map[string]string{"z": "active", "a": "pending"}},
			// Shrinking the agent below both keeps the older one... until it
			// no longer fits either.
			{admit("n1", api.Resources{"cpus": 3}), map[string]string{"z": "active", "a": "pending"}},
			{admit("n1", api.Resources{"cpus": 2}), map[string]string{"z": "pending", "a": "pending"}},
		},
		"a smaller later reservation fits beside a pending one": {
			{admit("n1", api.Resources{"cpus": 4}), nil},
			{force(reserve("a", "n1", "db", api.Resources{"cpus": 5})), map[string]string{"a": "pending"}},
			// The check counts pending reservations, so c needs force even
			// though it fits in what is actually free.
			{force(reserve("c", "n1", "db", api.Resources{"cpus": 1})), map[string]string{"a": "pending", "c": "active"}},
		},
	}
	for name, steps := range tests {
		t.Run(name, func(t *testing.T) {
			s := NewState()
			for i, st := range steps {
				mustApply(t, s, st.cmd)
				for res, want := range st.want {
					got, ok := s.Reservation(res)
					if !ok || got.Status != want {
						t.Fatalf("step %d (%s): reservation %s status %q (found %v), want %q", i, st.cmd.Type(), res, got.Status, ok, want)
					}
				}
				checkInvariants(t, s)
			}
		})
	}
}

func TestReservationDelete(t *testing.T) {
	s := NewState()
	wantCode(t, applyNext(t, s, &ReservationDelete{WriteMeta: meta(), Name: "db"}), api.CodeNotFound)
	mustApply(t, s, admit("n1", api.Resources{"cpus": 4}), reserve("db", "n1", "db", api.Resources{"cpus": 1}))
	res := mustApply(t, s, &ReservationDelete{WriteMeta: meta(), Name: "db"})
	if r, ok := res.Object.(api.Reservation); !ok || r.Name != "db" {
		t.Fatalf("delete result %#v", res.Object)
	}
	if _, ok := s.Reservation("db"); ok {
		t.Fatal("reservation still stored")
	}
	wantCode(t, applyNext(t, s, &ReservationDelete{WriteMeta: meta(), Name: "db"}), api.CodeNotFound)
}

func TestFillRateLimitDefaults(t *testing.T) {
	intp := func(v int) *int { return &v }
	tests := map[string]struct {
		qps             *float64
		burst, capacity *int
		wantBurst       int
		wantCapacity    int
	}{
		"no qps":                   {wantBurst: 0, wantCapacity: 1000},
		"fractional qps":           {qps: qps(0.5), wantBurst: 1, wantCapacity: 1000},
		"tiny qps":                 {qps: qps(1e-9), wantBurst: 1, wantCapacity: 1000},
		"whole qps":                {qps: qps(10), wantBurst: 10, wantCapacity: 1000},
		"qps rounded up":           {qps: qps(55.5), wantBurst: 56, wantCapacity: 1000},
		"burst given":              {qps: qps(55.5), burst: intp(3), wantBurst: 3, wantCapacity: 1000},
		"capacity zero kept":       {qps: qps(1), capacity: intp(0), wantBurst: 1, wantCapacity: 0},
		"burst without qps kept":   {burst: intp(5), wantBurst: 5, wantCapacity: 1000},
		"invalid qps left to fail": {qps: qps(-1), wantBurst: 0, wantCapacity: 1000},
		"NaN qps left to fail":     {qps: qps(math.NaN()), wantBurst: 0, wantCapacity: 1000},
		// The default never exceeds what a burst may be, so a valid qps
		// with no burst is always valid.
		"largest qps": {qps: qps(1e9), wantBurst: maxBurstOrCapacity, wantCapacity: 1000},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			gotQPS, burst, capacity := FillRateLimitDefaults(tc.qps, tc.burst, tc.capacity)
			if gotQPS != tc.qps || burst != tc.wantBurst || capacity != tc.wantCapacity {
				t.Fatalf("got (%v, %d, %d), want (%v, %d, %d)", gotQPS, burst, capacity, tc.qps, tc.wantBurst, tc.wantCapacity)
			}
			// Whatever qps the check accepts with an explicit burst, it
			// accepts with the default one.
			if checkRateLimitValues("x", tc.qps, 1, capacity) == nil {
				if e := checkRateLimitValues("x", tc.qps, burst, capacity); e != nil {
					t.Fatalf("defaults filled in for a valid qps are invalid: %v", e)
				}
			}
		})
	}
}

func TestRateLimitSet(t *testing.T) {
	set := func(principal string, q *float64, burst, capacity int) *RateLimitSet {
		return &RateLimitSet{WriteMeta: meta(), Principal: principal, QPS: q, Burst: burst, Capacity: capacity}
	}
	tests := map[string]struct {
		cmd      *RateLimitSet
		wantCode string
	}{
		"throttled":                  {cmd: set("spark", qps(55.5), 56, 1000)},
		"unthrottled":                {cmd: set("spark", nil, 0, 1000)},
		"zero capacity":              {cmd: set("spark", qps(1), 1, 0)},
		"principal with punctuation": {cmd: set("svc:spark@prod.example-1", qps(1), 1, 0)},
		"largest values":             {cmd: set("spark", qps(1e9), 1<<24, 1<<24)},
		"zero qps":                   {cmd: set("spark", qps(0), 1, 1000), wantCode: api.CodeInvalidArgument},
		"negative qps":               {cmd: set("spark", qps(-1), 1, 1000), wantCode: api.CodeInvalidArgument},
		"NaN qps":                    {cmd: set("spark", qps(math.NaN()), 1, 1000), wantCode: api.CodeInvalidArgument},
		"infinite qps":               {cmd: set("spark", qps(math.Inf(1)), 1, 1000), wantCode: api.CodeInvalidArgument},
		"qps too large":              {cmd: set("spark", qps(1e9+1), 1, 1000), wantCode: api.CodeInvalidArgument},
		"zero burst with qps":        {cmd: set("spark", qps(1), 0, 1000), wantCode: api.CodeInvalidArgument},
		"negative burst":             {cmd: set("spark", nil, -1, 1000), wantCode: api.CodeInvalidArgument},
		"burst too large":            {cmd: set("spark", qps(1), 1<<24+1, 1000), wantCode: api.CodeInvalidArgument},
		"negative capacity":          {cmd: set("spark", qps(1), 1, -1), wantCode: api.CodeInvalidArgument},
		"capacity too large":         {cmd: set("spark", qps(1), 1, 1<<24+1), wantCode: api.CodeInvalidArgument},
		"empty principal":            {cmd: set("", qps(1), 1, 1), wantCode: api.CodeInvalidArgument},
		"principal with a slash":     {cmd: set("a/b", qps(1), 1, 1), wantCode: api.CodeInvalidArgument},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := NewState()
			res := applyNext(t, s, tc.cmd)
			wantCode(t, res, tc.wantCode)
			if tc.wantCode != "" {
				return
			}
			want := api.RateLimit{Principal: tc.cmd.Principal, QPS: tc.cmd.QPS, Burst: tc.cmd.Burst, Capacity: tc.cmd.Capacity, Version: res.Index}
			if got, ok := s.RateLimit(tc.cmd.Principal); !ok || !reflect.DeepEqual(got, want) {
				t.Fatalf("stored %+v (found %v), want %+v", got, ok, want)
			}
		})
	}
}

func TestRateLimitDefault(t *testing.T) {
	s := NewState()
	if _, ok := s.RateLimitDefault(); ok {
		t.Fatal("empty state has a default rate limit")
	}
	wantCode(t, applyNext(t, s, &RateLimitDefaultDelete{WriteMeta: meta()}), api.CodeNotFound)
	wantCode(t, applyNext(t, s, &RateLimitDefaultSet{WriteMeta: meta(), QPS: qps(0), Burst: 1}), api.CodeInvalidArgument)
	wantCode(t, applyNext(t, s, &RateLimitDefaultSet{WriteMeta: meta(), QPS: qps(1), Burst: 1, Capacity: -1}), api.CodeInvalidArgument)
	res := mustApply(t, s, &RateLimitDefaultSet{WriteMeta: meta(), QPS: qps(33.3), Burst: 34, Capacity: 1000})
	want := api.RateLimitDefault{QPS: qps(33.3), Burst: 34, Capacity: 1000, Version: res.Index}
	if got, ok := s.RateLimitDefault(); !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("default %+v, want %+v", got, want)
	}
	res = mustApply(t, s, &RateLimitDefaultSet{WriteMeta: meta(), Burst: 0, Capacity: 5})
	if got, _ := s.RateLimitDefault(); got.QPS != nil || got.Capacity != 5 || got.Version != res.Index {
		t.Fatalf("unthrottled default %+v", got)
	}
	mustApply(t, s, &RateLimitDefaultDelete{WriteMeta: meta()})
	if _, ok := s.RateLimitDefault(); ok {
		t.Fatal("default survived its delete")
	}
}

func TestRateLimitConfigReplace(t *testing.T) {
	limit := func(principal string, q *float64, burst, capacity int) RateLimitSet {
		return RateLimitSet{Principal: principal, QPS: q, Burst: burst, Capacity: capacity}
	}
	existing := []Command{
		&RateLimitSet{WriteMeta: meta(), Principal: "old", QPS: qps(1), Burst: 1, Capacity: 1},
		&RateLimitSet{WriteMeta: meta(), Principal: "spark", QPS: qps(1), Burst: 1, Capacity: 1},
		&RateLimitDefaultSet{WriteMeta: meta(), QPS: qps(2), Burst: 2, Capacity: 2},
	}
	tests := map[string]struct {
		cmd         *RateLimitConfigReplace
		wantCode    string
		wantLimits  []string // principals after the replace
		wantDefault bool
	}{
		"replace all": {
			cmd: &RateLimitConfigReplace{WriteMeta: meta(), Limits: []RateLimitSet{
				limit("spark", qps(55.5), 56, 1000), limit("batch", nil, 0, 10),
			}, Default: &RateLimitDefaultSet{QPS: qps(33.3), Burst: 34, Capacity: 1000}},
			wantLimits:  []string{"batch", "spark"},
			wantDefault: true,
		},
		"empty clears everything": {
			cmd:        &RateLimitConfigReplace{WriteMeta: meta()},
			wantLimits: []string{},
		},
		"duplicate principal": {
			cmd: &RateLimitConfigReplace{WriteMeta: meta(), Limits: []RateLimitSet{
				limit("spark", qps(1), 1, 1), limit("batch", qps(1), 1, 1), limit("spark", qps(2), 2, 2),
			}},
			wantCode: api.CodeInvalidArgument,
		},
		"one bad entry among good ones": {
			cmd: &RateLimitConfigReplace{WriteMeta: meta(), Limits: []RateLimitSet{
				limit("spark", qps(1), 1, 1), limit("batch", qps(-1), 1, 1),
			}},
			wantCode: api.CodeInvalidArgument,
		},
		"bad principal": {
			cmd:      &RateLimitConfigReplace{WriteMeta: meta(), Limits: []RateLimitSet{limit("", qps(1), 1, 1)}},
			wantCode: api.CodeInvalidArgument,
		},
		"bad default": {
			cmd: &RateLimitConfigReplace{WriteMeta: meta(), Limits: []RateLimitSet{limit("spark", qps(1), 1, 1)},
				Default: &RateLimitDefaultSet{QPS: qps(1), Burst: 0}},
			wantCode: api.CodeInvalidArgument,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := NewState()
			mustApply(t, s, existing...)
			res := applyNext(t, s, tc.cmd)
			wantCode(t, res, tc.wantCode)
			if tc.wantCode != "" {
				return
			}
			var got []string
			for _, l := range s.RateLimits() {
				got = append(got, l.Principal)
				if l.Version != res.Index {
					t.Errorf("limit %s version %d, want %d", l.Principal, l.Version, res.Index)
				}
			}
			if len(got) != len(tc.wantLimits) || (len(got) > 0 && !reflect.DeepEqual(got, tc.wantLimits)) {
				t.Fatalf("principals %v, want %v", got, tc.wantLimits)
			}
			d, ok := s.RateLimitDefault()
			if ok != tc.wantDefault || (ok && d.Version != res.Index) {
				t.Fatalf("default %+v (set %v), want set %v at version %d", d, ok, tc.wantDefault, res.Index)
			}
			if cfg, ok := res.Object.(api.RateLimitConfig); !ok || !reflect.DeepEqual(cfg, s.RateLimitConfig()) {
				t.Fatalf("result object %#v, want the new configuration %#v", res.Object, s.RateLimitConfig())
			}
		})
	}
}

func TestRateLimitConfigTooLarge(t *testing.T) {
	c := &RateLimitConfigReplace{WriteMeta: meta()}
	for i := range maxLimitsInConfig + 1 {
		c.Limits = append(c.Limits, RateLimitSet{Principal: fmt.Sprintf("p%d", i), QPS: qps(1), Burst: 1})
	}
	if _, e := NewState().Check(c); e == nil || e.Code != api.CodeInvalidArgument {
		t.Fatalf("%d principals: %v, want invalid_argument", len(c.Limits), e)
	}
	c.Limits = c.Limits[:maxLimitsInConfig]
	if _, e := NewState().Check(c); e != nil {
		t.Fatalf("%d principals: %v", len(c.Limits), e)
	}
}

func TestRateLimitConfigFormat(t *testing.T) {
	s := NewState()
	if got := s.RateLimitConfig(); got.Limits == nil || len(got.Limits) != 0 || got.AggregateDefaultQPS != nil {
		t.Fatalf("empty configuration %+v, want an empty non-nil list and no default", got)
	}
	mustApply(t, s, &RateLimitConfigReplace{WriteMeta: meta(), Limits: []RateLimitSet{
		{Principal: "spark", QPS: qps(55.5), Burst: 56, Capacity: 1000},
		{Principal: "batch", Capacity: 10},
	}, Default: &RateLimitDefaultSet{QPS: qps(33.3), Burst: 34, Capacity: 900}})
	b, c := func(v int) *int { return &v }, func(v int) *int { return &v }
	want := api.RateLimitConfig{
		Limits: []api.RateLimitConfigLimit{
			{Principal: "batch", Burst: b(0), Capacity: c(10), Version: 1},
			{Principal: "spark", QPS: qps(55.5), Burst: b(56), Capacity: c(1000), Version: 1},
		},
		AggregateDefaultQPS: qps(33.3), AggregateDefaultBurst: b(34), AggregateDefaultCapacity: c(900),
	}
	if got := s.RateLimitConfig(); !reflect.DeepEqual(got, want) {
		t.Fatalf("configuration %+v, want %+v", got, want)
	}

	// Each limit carries its own version: a write to one leaves the other's.
	mustApply(t, s, &RateLimitSet{WriteMeta: meta(), Principal: "spark", QPS: qps(5), Burst: 5, Capacity: 1000})
	want.Limits[1] = api.RateLimitConfigLimit{Principal: "spark", QPS: qps(5), Burst: b(5), Capacity: c(1000), Version: 2}
	if got := s.RateLimitConfig(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after a write to spark: configuration %+v, want %+v", got, want)
	}
}

func TestRateLimitDelete(t *testing.T) {
	s := NewState()
	wantCode(t, applyNext(t, s, &RateLimitDelete{WriteMeta: meta(), Principal: "spark"}), api.CodeNotFound)
	mustApply(t, s, &RateLimitSet{WriteMeta: meta(), Principal: "spark", QPS: qps(1), Burst: 1})
	mustApply(t, s, &RateLimitDelete{WriteMeta: meta(), Principal: "spark"})
	if _, ok := s.RateLimit("spark"); ok {
		t.Fatal("rate limit survived its delete")
	}
}

// TestPreconditions runs If-Match and If-None-Match on every kind of object
// that carries a version.
func TestPreconditions(t *testing.T) {
	type kind struct {
		setup   []Command
		set     func(WriteMeta) Command
		del     func(WriteMeta) Command
		version func(*State) (uint64, bool)
	}
	kinds := map[string]kind{
		"quota": {
			setup: []Command{admit("n1", api.Resources{"cpus": 10})},
			set: func(m WriteMeta) Command {
				return &QuotaSet{WriteMeta: m, Role: "eng", Guarantees: api.Resources{"cpus": 1}}
			},
			del:     func(m WriteMeta) Command { return &QuotaDelete{WriteMeta: m, Role: "eng"} },
			version: func(s *State) (uint64, bool) { q, ok := s.Quota("eng"); return q.Version, ok },
		},
		"role": {
			set:     func(m WriteMeta) Command { return &RoleSet{WriteMeta: m, Role: "eng", Weight: 2} },
			del:     func(m WriteMeta) Command { return &RoleDelete{WriteMeta: m, Role: "eng"} },
			version: func(s *State) (uint64, bool) { p, ok := s.RolePolicy("eng"); return p.Version, ok },
		},
		"reservation": {
			setup: []Command{admit("n1", api.Resources{"cpus": 10})},
			set: func(m WriteMeta) Command {
				return &ReservationSet{WriteMeta: m, Name: "db", Agent: "n1", Role: "db", Resources: api.Resources{"cpus": 1}}
			},
			del:     func(m WriteMeta) Command { return &ReservationDelete{WriteMeta: m, Name: "db"} },
			version: func(s *State) (uint64, bool) { r, ok := s.Reservation("db"); return r.Version, ok },
		},
		"rate limit": {
			set: func(m WriteMeta) Command {
				return &RateLimitSet{WriteMeta: m, Principal: "spark", QPS: qps(1), Burst: 1, Capacity: 1}
			},
			del:     func(m WriteMeta) Command { return &RateLimitDelete{WriteMeta: m, Principal: "spark"} },
			version: func(s *State) (uint64, bool) { l, ok := s.RateLimit("spark"); return l.Version, ok },
		},
		"default rate limit": {
			set: func(m WriteMeta) Command {
				return &RateLimitDefaultSet{WriteMeta: m, QPS: qps(1), Burst: 1, Capacity: 1}
			},
			del:     func(m WriteMeta) Command { return &RateLimitDefaultDelete{WriteMeta: m} },
			version: func(s *State) (uint64, bool) { d, ok := s.RateLimitDefault(); return d.Version, ok },
		},
	}
	type step struct {
		write    func(k kind, version uint64) Command
		isDelete bool
		wantCode string
	}
	set := func(m func(uint64) WriteMeta, code string) step {
		return step{write: func(k kind, v uint64) Command { return k.set(m(v)) }, wantCode: code}
	}
	del := func(m func(uint64) WriteMeta, code string) step {
		return step{write: func(k kind, v uint64) Command { return k.del(m(v)) }, isDelete: true, wantCode: code}
	}
	current := func(v uint64) WriteMeta { return ifMatch(v) }
	stale := func(v uint64) WriteMeta { return ifMatch(v + 1) }
	none := func(uint64) WriteMeta { return ifNoneMatch() }
	plain := func(uint64) WriteMeta { return meta() }
	scenarios := map[string][]step{
		"create only if absent": {
			set(none, ""),
			set(none, api.CodePreconditionFailed),
			set(plain, ""),
		},
		"If-Match on a missing object": {
			set(func(uint64) WriteMeta { return ifMatch(1) }, api.CodePreconditionFailed),
			del(func(uint64) WriteMeta { return ifMatch(1) }, api.CodeNotFound),
		},
		"update at the current version": {
			set(plain, ""),
			set(stale, api.CodePreconditionFailed),
			set(current, ""),
			// Any other version, older ones included, is stale.
			set(func(v uint64) WriteMeta { return ifMatch(v - 1) }, api.CodePreconditionFailed),
		},
		"delete at the current version": {
			set(plain, ""),
			del(stale, api.CodePreconditionFailed),
			del(none, api.CodePreconditionFailed),
			del(current, ""),
			del(plain, api.CodeNotFound),
			set(none, ""),
		},
	}
	for kindName, k := range kinds {
		for scenario, steps := range scenarios {
			t.Run(kindName+"/"+scenario, func(t *testing.T) {
				s := NewState()
				mustApply(t, s, k.setup...)
				for i, st := range steps {
					v, _ := k.version(s)
					c := st.write(k, v)
					res := applyNext(t, s, c)
					if (res.Err == nil) != (st.wantCode == "") || (res.Err != nil && res.Err.Code != st.wantCode) {
						t.Fatalf("step %d (%s %+v): error %v, want code %q", i, c.Type(), Meta(c), res.Err, st.wantCode)
					}
					if res.Err != nil {
						continue
					}
					v, ok := k.version(s)
					if st.isDelete && ok {
						t.Fatalf("step %d: object still exists after its delete", i)
					}
					if !st.isDelete && (!ok || v != res.Index) {
						t.Fatalf("step %d: version %d (exists %v), want the index %d", i, v, ok, res.Index)
					}
				}
			})
		}
	}
}

func TestFrameworkSet(t *testing.T) {
	valid := func(edit func(c *FrameworkSet)) *FrameworkSet {
		c := &FrameworkSet{WriteMeta: meta(), ID: "fw-1", Name: "spark", Principal: "spark-sched",
			Roles: []string{"eng/ml"}, Capabilities: []string{api.CapabilityRevocableResources}, FailoverTimeoutSeconds: 3600}
		if edit != nil {
			edit(c)
		}
		return c
	}
	tests := map[string]struct {
		cmd *FrameworkSet
		// wantErr is part of the invalid_argument message; empty for a valid command.
		wantErr string
	}{
		"every field":             {cmd: valid(nil)},
		"default role":            {cmd: valid(func(c *FrameworkSet) { c.Roles = []string{api.DefaultRole} })},
		"default role and others": {cmd: valid(func(c *FrameworkSet) { c.Roles = []string{"eng", api.DefaultRole, "eng/ml"} })},
		"no principal":            {cmd: valid(func(c *FrameworkSet) { c.Principal = "" })},
		"no capabilities":         {cmd: valid(func(c *FrameworkSet) { c.Capabilities = nil })},
		"no failover timeout":     {cmd: valid(func(c *FrameworkSet) { c.FailoverTimeoutSeconds = 0 })},
		"id with colon and at":    {cmd: valid(func(c *FrameworkSet) { c.ID = "9f1c-0001:spark@prod" })},
		"name with spaces":        {cmd: valid(func(c *FrameworkSet) { c.Name = "Spark on allot (prod)" })},
		"name of 256 bytes":       {cmd: valid(func(c *FrameworkSet) { c.Name = strings.Repeat("é", 128) })},
		"huge finite failover":    {cmd: valid(func(c *FrameworkSet) { c.FailoverTimeoutSeconds = math.MaxFloat64 })},
		"fractional failover":     {cmd: valid(func(c *FrameworkSet) { c.FailoverTimeoutSeconds = 0.5 })},
		"empty id":                {cmd: valid(func(c *FrameworkSet) { c.ID = "" }), wantErr: "framework id"},
		"id with a slash":         {cmd: valid(func(c *FrameworkSet) { c.ID = "a/b" }), wantErr: "framework id"},
		"id too long":             {cmd: valid(func(c *FrameworkSet) { c.ID = strings.Repeat("f", 257) }), wantErr: "framework id is longer"},
		"empty name":              {cmd: valid(func(c *FrameworkSet) { c.Name = "" }), wantErr: "framework fw-1: name must not be empty"},
		"name of 257 bytes":       {cmd: valid(func(c *FrameworkSet) { c.Name = strings.Repeat("é", 128) + "x" }), wantErr: "name is longer than 256 bytes"},
		"no roles":                {cmd: valid(func(c *FrameworkSet) { c.Roles = nil }), wantErr: "at least one role"},
		"principal with a space":  {cmd: valid(func(c *FrameworkSet) { c.Principal = "a b" }), wantErr: "principal"},
		"too many roles": {cmd: valid(func(c *FrameworkSet) {
			c.Roles = nil
			for i := range 129 {
				c.Roles = append(c.Roles, fmt.Sprintf("r%d", i))
			}
		}), wantErr: "at most 128 roles"},
		"repeated capability": {cmd: valid(func(c *FrameworkSet) {
			c.Capabilities = []string{api.CapabilityRevocableResources, api.CapabilityRevocableResources}
		}), wantErr: "appears more than once"},
		"empty roles":                {cmd: valid(func(c *FrameworkSet) { c.Roles = []string{} }), wantErr: "at least one role"},
		"invalid role":               {cmd: valid(func(c *FrameworkSet) { c.Roles = []string{"eng", "a//b"} }), wantErr: `roles[1]: role "a//b"`},
		"empty role":                 {cmd: valid(func(c *FrameworkSet) { c.Roles = []string{""} }), wantErr: "roles[0]"},
		"dot role":                   {cmd: valid(func(c *FrameworkSet) { c.Roles = []string{"eng/.."} }), wantErr: "roles[0]"},
		"star inside a role":         {cmd: valid(func(c *FrameworkSet) { c.Roles = []string{"eng/*"} }), wantErr: "roles[0]"},
		"duplicate role":             {cmd: valid(func(c *FrameworkSet) { c.Roles = []string{"eng", "ops", "eng"} }), wantErr: "role eng appears more than once"},
		"duplicate default role":     {cmd: valid(func(c *FrameworkSet) { c.Roles = []string{"*", "*"} }), wantErr: "role * appears more than once"},
		"unknown capability":         {cmd: valid(func(c *FrameworkSet) { c.Capabilities = []string{"REVOCABLE_RESOURCES", "GPU_RESOURCES"} }), wantErr: `capabilities[1]: unknown capability "GPU_RESOURCES"`},
		"agent capability":           {cmd: valid(func(c *FrameworkSet) { c.Capabilities = []string{api.CapabilityTaskResourceLimits} }), wantErr: "TASK_RESOURCE_LIMITS"},
		"lower-case capability":      {cmd: valid(func(c *FrameworkSet) { c.Capabilities = []string{"revocable_resources"} }), wantErr: "revocable_resources"},
		"negative failover timeout":  {cmd: valid(func(c *FrameworkSet) { c.FailoverTimeoutSeconds = -1 }), wantErr: "failover_timeout_seconds"},
		"NaN failover timeout":       {cmd: valid(func(c *FrameworkSet) { c.FailoverTimeoutSeconds = math.NaN() }), wantErr: "failover_timeout_seconds"},
		"infinite failover timeout":  {cmd: valid(func(c *FrameworkSet) { c.FailoverTimeoutSeconds = math.Inf(1) }), wantErr: "failover_timeout_seconds"},
		"-infinite failover timeout": {cmd: valid(func(c *FrameworkSet) { c.FailoverTimeoutSeconds = math.Inf(-1) }), wantErr: "failover_timeout_seconds"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := NewState()
			res := applyNext(t, s, tc.cmd)
			if tc.wantErr != "" {
				wantCode(t, res, api.CodeInvalidArgument)
				if !strings.Contains(res.Err.Message, tc.wantErr) {
					t.Fatalf("error %q, want one containing %q", res.Err.Message, tc.wantErr)
				}
				if _, ok := s.Framework(tc.cmd.ID); ok {
					t.Fatal("rejected framework stored")
				}
				return
			}
			wantCode(t, res, "")
			c := tc.cmd
			want := FrameworkRecord{ID: c.ID, Name: c.Name, Principal: c.Principal, Roles: c.Roles, Capabilities: c.Capabilities,
				FailoverTimeoutSeconds: c.FailoverTimeoutSeconds, RegisteredAt: testTime, Version: res.Index}
			if got, ok := s.Framework(c.ID); !ok || !reflect.DeepEqual(got, want) {
				t.Fatalf("framework %+v (registered %v), want %+v", got, ok, want)
			}
		})
	}
}
