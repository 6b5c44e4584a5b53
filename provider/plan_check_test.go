package provider

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
)

func TestRefusalDetail(t *testing.T) {
	off, on := false, true
	// As the cluster sends them: requested is the total, request this
	// write's part, others the rest's.
	shortfalls := map[string]any{"shortfalls": []any{
		map[string]any{"resource": "cpus", "requested": 12.0, "capacity": 8.0, "request": 12.0, "others": 0.0, "short_by": 4.0},
		map[string]any{"resource": "mem", "requested": 1100000.5, "capacity": 1008192.0, "request": 500000.25, "others": 600000.25, "short_by": 91808.5},
	}}
	// As servers before the parts sent them.
	totalsOnly := map[string]any{"shortfalls": []any{
		map[string]any{"resource": "mem", "requested": 2048.5, "capacity": 1024.25},
	}}
	tests := map[string]struct {
		force   *bool
		err     *api.Error
		want    []string
		notWant []string
	}{
		"capacity": {
			force: &off,
			err:   api.Errorf(api.CodeCapacityExceeded, "quota guarantees exceed the cluster's capacity").WithDetails(shortfalls),
			want: []string{
				`planned create of the quota of role "eng"`,
				"  - cpus: 12 requested by this change, capacity 8: short by 4\n",
				"  - mem: 500000.25 requested by this change + 600000.25 already held by others = 1100000.5, capacity 1008192: short by 91808.5\n",
				"Set force = true to apply it anyway.",
				"The cluster answered capacity_exceeded: quota guarantees exceed the cluster's capacity",
			},
		},
		"capacity, totals only": {
			force:   &off,
			err:     api.Errorf(api.CodeCapacityExceeded, "short").WithDetails(totalsOnly),
			want:    []string{"  - mem: 2048.5 requested, capacity 1024.25: short by 1024.25\n"},
			notWant: []string{"this change"},
		},
		"capacity, already forced": {
			force:   &on,
			err:     api.Errorf(api.CodeCapacityExceeded, "short").WithDetails(shortfalls),
			want:    []string{"short by 4"},
			notWant: []string{"force = true"},
		},
		"limit below consumption": {
			force: &off,
			err: api.Errorf(api.CodeConflict, "role eng consumes more than the new limits allow").WithDetails(map[string]any{
				"over_limit": map[string]any{"cpus": 3.0}, "consumed": map[string]any{"cpus": 7.0, "mem": 512.0},
			}),
			want: []string{"  consumed: cpus 7, mem 512\n", "  over limit: cpus 3\n", "Set force = true"},
		},
		"hierarchy": {
			force:   &off,
			err:     api.Errorf(api.CodeInvalidArgument, "role eng/ml: limit of cpus (20) exceeds the limit of role eng above it (10)"),
			want:    []string{"invalid_argument: role eng/ml: limit of cpus (20) exceeds"},
			notWant: []string{"force"},
		},
		"no force attribute": {
			err:     api.Errorf(api.CodeConflict, "conflict"),
			notWant: []string{"force"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			run := dryRun{action: actionCreate, what: quotaWhat("eng"), force: tc.force}
			detail := refusalDetail(run, tc.err)
			for _, w := range tc.want {
				if !strings.Contains(detail, w) {
					t.Errorf("detail lacks %q:\n%s", w, detail)
				}
			}
			if strings.Contains(detail, "e+") {
				t.Errorf("detail has a number with an exponent:\n%s", detail)
			}
			for _, w := range tc.notWant {
				if strings.Contains(detail, w) {
					t.Errorf("detail has %q:\n%s", w, detail)
				}
			}
		})
	}
}

func TestEffectDiagnostics(t *testing.T) {
	tests := map[string]struct {
		effects api.Effects
		want    []string // summary: detail fragment, in order
	}{
		"none": {effects: api.Effects{}},
		"one rescinded offer": {
			effects: api.Effects{RescindedOffers: 1},
			want:    []string{"Apply will rescind offers: rescinds 1 outstanding offer;"},
		},
		"rescinded offers": {
			effects: api.Effects{RescindedOffers: 3},
			want:    []string{"Apply will rescind offers: rescinds 3 outstanding offers;"},
		},
		"over limit and a warning": {
			effects: api.Effects{
				OverLimit: map[string]api.Resources{"eng": {"mem": 512, "cpus": 2.5}},
				Warnings:  []string{"role eng stays above its new limits until its tasks finish"},
			},
			want: []string{
				`Role will be over its limit: role "eng" consumes more than its limit allows (over by cpus 2.5, mem 512)`,
				"Cluster warning: warns: role eng stays above its new limits until its tasks finish",
			},
		},
		"evictions and the offers rescinded with them": {
			effects: api.Effects{RescindedOffers: 1, Evictions: []api.Eviction{
				{TaskID: "t2", FrameworkID: "fw-1", AgentID: "agent-a", Role: "batch", Resources: api.Resources{"cpus": 1, "mem": 64}},
				{TaskID: "t1", FrameworkID: "fw-1", AgentID: "agent-b", Role: "batch", Resources: api.Resources{"cpus": 0.5}},
			}},
			want: []string{
				"Apply will rescind offers: rescinds 1 outstanding offer;",
				"Apply will evict revocable tasks: kills 2 revocable tasks running on them (TASK_KILLED, REASON_CONTAINER_PREEMPTED), " +
					"youngest first, until what the role lends fits the new lending limit:\n\n" +
					"  - task t2 of framework fw-1 (role batch) on agent agent-a, holding cpus 1, mem 64\n" +
					"  - task t1 of framework fw-1 (role batch) on agent agent-b, holding cpus 0.5",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			diags := effectDiagnostics(dryRun{action: actionUpdate, what: quotaWhat("eng")}, tc.effects)
			if diags.HasError() || len(diags) != len(tc.want) {
				t.Fatalf("got %d diagnostics %v, want %d warnings", len(diags), diags, len(tc.want))
			}
			for i, w := range tc.want {
				summary, fragment, _ := strings.Cut(w, ": ")
				if diags[i].Summary() != summary || !strings.Contains(diags[i].Detail(), fragment) {
					t.Errorf("warning %d is %q: %q, want %q with %q", i, diags[i].Summary(), diags[i].Detail(), summary, fragment)
				}
			}
		})
	}
}

// TestCheckPlanSkipsAfterUnreachable: once one dry run found no server, the
// other resources of the plan warn without trying again.
func TestCheckPlanSkipsAfterUnreachable(t *testing.T) {
	// A listener that accepts and drops every connection: the client sees a
	// transport error, as with a server that died mid-call.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var accepted atomic.Int64
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			conn.Close()
		}
	}()
	client, err := api.NewClient([]string{"http://" + l.Addr().String()}, "")
	if err != nil {
		t.Fatal(err)
	}
	client.RetryFor = 200 * time.Millisecond
	data := &providerData{client: client, timeout: time.Second}
	run := dryRun{action: actionCreate, what: quotaWhat("eng"), method: http.MethodPut, path: api.QuotaPath("eng"), body: api.QuotaRequest{}}

	first := data.checkPlan(context.Background(), run)
	if first.HasError() || first.WarningsCount() != 1 || first[0].Summary() != unreachableSummary {
		t.Fatalf("first dry run: %v, want the unreachable warning", first)
	}
	tried := accepted.Load()
	if tried == 0 {
		t.Fatal("the first dry run never reached the listener")
	}
	second := data.checkPlan(context.Background(), run)
	if second.WarningsCount() != 1 || second[0].Summary() != unreachableSummary {
		t.Fatalf("second dry run: %v, want the unreachable warning", second)
	}
	if accepted.Load() != tried {
		t.Errorf("the second dry run connected again (%d connections, then %d)", tried, accepted.Load())
	}
}

// TestStrictPlanMakesAnUncheckedPlanAnError: with strict_plan, the plan that
// would only warn that the cluster could not check it fails instead.
func TestStrictPlanMakesAnUncheckedPlanAnError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there any more
	client, err := api.NewClient([]string{"http://" + addr}, "")
	if err != nil {
		t.Fatal(err)
	}
	client.RetryFor = 100 * time.Millisecond
	run := dryRun{action: actionCreate, what: quotaWhat("eng"), method: http.MethodPut, path: api.QuotaPath("eng"), body: api.QuotaRequest{}}

	lenient := (&providerData{client: client, timeout: time.Second}).checkPlan(context.Background(), run)
	if lenient.HasError() || lenient.WarningsCount() != 1 {
		t.Fatalf("without strict_plan: %v, want one warning", lenient)
	}
	strict := (&providerData{client: client, timeout: time.Second, strictPlan: true}).checkPlan(context.Background(), run)
	if strict.ErrorsCount() != 1 || strict.WarningsCount() != 0 || strict[0].Summary() != unreachableSummary ||
		!strings.Contains(strict[0].Detail(), "strict_plan") {
		t.Fatalf("with strict_plan: %v, want one error that names strict_plan", strict)
	}
}
