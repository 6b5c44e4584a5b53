package commands

import (
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/allot/allot/masterd/api"
)

// Quotas through the tool: set, get, list (each -json decoded and checked
// against the API), a dry run that stores nothing, -if-match, the
// capacity heuristic, delete.
func TestQuotaCommands(t *testing.T) {
	c := shared(t)
	e := clusterEnv(c)
	cl := client(t, c)
	ctx := context.Background()
	admitAgent(t, cl, "quota-node", api.Resources{"cpus": 8, "mem": 8192})

	// A dry run of a new quota answers what would be stored; nothing is.
	var dr api.DryRun
	decode(t, &dr, e, "quota", "set", "q-eng/ml", "-guarantee", "cpus=2,mem=1024", "-limit", "cpus=4", "-dry-run", "-json")
	var would api.Quota
	if err := json.Unmarshal(dr.Object, &would); err != nil || !dr.DryRun || would.Role != "q-eng/ml" ||
		!reflect.DeepEqual(would.Guarantees, api.Resources{"cpus": 2, "mem": 1024}) {
		t.Fatalf("dry run = %+v (object %+v, %v)", dr, would, err)
	}
	if _, err := cl.Quota(ctx, "q-eng/ml", api.ReadOptions{}); !api.IsNotFound(err) {
		t.Fatalf("after a dry run the quota is there (%v): the dry run stored it", err)
	}
	text := ok(t, e, "quota", "set", "q-eng/ml", "-guarantee", "cpus=2,mem=1024", "-limit", "cpus=4", "-dry-run")
	for _, want := range []string{"Dry run: nothing was changed", "cpus:2 mem:1024", "Rescinded offers"} {
		if !strings.Contains(text.stdout, want) {
			t.Errorf("dry run text lacks %q:\n%s", want, text)
		}
	}
	// The write has not given the object a version yet.
	if !rowHas(text.stdout, "Version", "set when stored") {
		t.Errorf("dry run text does not say the version is set when stored:\n%s", text)
	}
	fails(t, ExitNotFound, e, "quota", "get", "q-eng/ml")

	// Set, then get and list agree with the API.
	var set api.Quota
	decode(t, &set, e, "quota", "set", "q-eng/ml", "-guarantee", "cpus=2,mem=1024", "-limit", "cpus:4", "-json")
	stored, err := cl.Quota(ctx, "q-eng/ml", api.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(set, *stored) || !reflect.DeepEqual(stored.Limits, api.Resources{"cpus": 4}) {
		t.Fatalf("set printed %+v, the API has %+v", set, stored)
	}
	var got api.Quota
	decode(t, &got, e, "quota", "get", "q-eng/ml", "-json")
	if !reflect.DeepEqual(got, *stored) {
		t.Errorf("get -json = %+v, the API has %+v", got, stored)
	}
	var list api.QuotaList
	decode(t, &list, e, "quota", "list", "--json") // urfave's spelling works too
	all, err := cl.Quotas(ctx, api.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(list.Quotas, all) {
		t.Errorf("list -json = %+v, the API has %+v", list.Quotas, all)
	}
	table := ok(t, e, "quota", "list").stdout
	if !strings.Contains(table, "ROLE") || !rowHas(table, "q-eng/ml", "cpus:2 mem:1024", "cpus:4", strconv.FormatUint(stored.Version, 10)) {
		t.Errorf("quota list:\n%s", table)
	}

	// A dry run of a change leaves the version where it was.
	ok(t, e, "quota", "set", "q-eng/ml", "-guarantee", "cpus=3", "-dry-run")
	if now, _ := cl.Quota(ctx, "q-eng/ml", api.ReadOptions{}); now.Version != stored.Version || now.Guarantees["cpus"] != 2 {
		t.Fatalf("a dry run changed the quota: %+v, was %+v", now, stored)
	}

	// -if-match: a stale version is refused (412 → exit 4) and changes
	// nothing; the current one passes.
	stale := strconv.FormatUint(stored.Version-1, 10)
	msg := fails(t, ExitConflict, e, "quota", "set", "q-eng/ml", "-guarantee", "cpus=3", "-if-match", stale)
	if !strings.Contains(msg, "If-Match") {
		t.Errorf("a failed -if-match says %q", msg)
	}
	fails(t, ExitConflict, e, "quota", "set", "q-eng/ml", "-guarantee", "cpus=3", "-if-match", stale, "-dry-run")
	fails(t, ExitConflict, e, "quota", "delete", "q-eng/ml", "-if-match", stale)
	decode(t, &set, e, "quota", "set", "q-eng/ml", "-guarantee", "cpus=3", "-limit", "cpus=4",
		"-if-match", strconv.FormatUint(stored.Version, 10), "-json")
	if set.Guarantees["cpus"] != 3 || set.Version <= stored.Version {
		t.Errorf("set with the right -if-match = %+v", set)
	}

	// Guarantees past the agents' capacity: 409 → exit 4, unless -force.
	msg = fails(t, ExitConflict, e, "quota", "set", "q-big", "-guarantee", "cpus=100000")
	if !strings.Contains(msg, "cpus") {
		t.Errorf("capacity error %q does not name the resource", msg)
	}
	ok(t, e, "quota", "set", "q-big", "-guarantee", "cpus=100000", "-force")
	ok(t, e, "quota", "delete", "q-big")

	// Delete: a dry run keeps it, a delete removes it, a second one is 404.
	dr = api.DryRun{}
	decode(t, &dr, e, "quota", "delete", "q-eng/ml", "-dry-run", "-json")
	ok(t, e, "quota", "get", "q-eng/ml")
	r := ok(t, e, "quota", "delete", "q-eng/ml")
	if !strings.Contains(r.stdout, "Removed the quota of role q-eng/ml") {
		t.Errorf("delete says %q", r.stdout)
	}
	fails(t, ExitNotFound, e, "quota", "get", "q-eng/ml")
	fails(t, ExitNotFound, e, "quota", "delete", "q-eng/ml")
}

// rowHas reports whether one line of table holds every cell, in order.
func rowHas(table string, cells ...string) bool {
	for _, line := range strings.Split(table, "\n") {
		fields := strings.Split(line, "  ")
		var got []string
		for _, f := range fields {
			if f = strings.TrimSpace(f); f != "" {
				got = append(got, f)
			}
		}
		i := 0
		for _, g := range got {
			if i < len(cells) && g == cells[i] {
				i++
			}
		}
		if i == len(cells) {
			return true
		}
	}
	return false
}

// Roles through the tool: set with a weight and a lending limit, get and
// list against the API, a dry run, delete (a reset).
func TestRoleCommands(t *testing.T) {
	c := shared(t)
	e := clusterEnv(c)
	cl := client(t, c)
	ctx := context.Background()

	var set api.Role
	decode(t, &set, e, "role", "set", "r-eng", "-weight", "2.5", "-lending-limit", "cpus=1", "-json")
	stored, err := cl.Role(ctx, "r-eng", api.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stored.Weight != 2.5 || !reflect.DeepEqual(stored.LendingLimit, api.Resources{"cpus": 1}) || set.Version != stored.Version {
		t.Fatalf("set printed %+v, the API has %+v", set, stored)
	}
	var got api.Role
	decode(t, &got, e, "role", "get", "r-eng", "-json")
	if !reflect.DeepEqual(got, *stored) {
		t.Errorf("get -json = %+v, the API has %+v", got, stored)
	}
	var list api.RoleList
	decode(t, &list, e, "role", "list", "-json")
	all, err := cl.Roles(ctx, api.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(list.Roles, all) {
		t.Errorf("list -json = %+v, the API has %+v", list.Roles, all)
	}
	if table := ok(t, e, "role", "list").stdout; !rowHas(table, "r-eng", "2.5", "cpus:1") {
		t.Errorf("role list:\n%s", table)
	}
	if text := ok(t, e, "role", "get", "r-eng").stdout; !strings.Contains(text, "Lending limit") || !rowHas(text, "Weight", "2.5") {
		t.Errorf("role get:\n%s", text)
	}

	// set replaces: without -lending-limit the cap is gone; a dry run first
	// shows that and stores nothing. Its text does not show the version
	// stored now as the one the write would store.
	var dr api.DryRun
	decode(t, &dr, e, "role", "set", "r-eng", "-weight", "3", "-dry-run", "-json")
	if now, _ := cl.Role(ctx, "r-eng", api.ReadOptions{}); now.Weight != 2.5 || now.Version != stored.Version {
		t.Fatalf("a dry run changed the role: %+v", now)
	}
	text := ok(t, e, "role", "set", "r-eng", "-weight", "3", "-dry-run").stdout
	if !rowHas(text, "Version", "set when stored") || rowHas(text, "Version", strconv.FormatUint(stored.Version, 10)) {
		t.Errorf("role set -dry-run:\n%s", text)
	}
	// A delete's dry run shows the version of what it would remove.
	if text := ok(t, e, "role", "delete", "r-eng", "-dry-run").stdout; !rowHas(text, "Version", strconv.FormatUint(stored.Version, 10)) {
		t.Errorf("role delete -dry-run:\n%s", text)
	}
	// A role never configured has no version: -, not 0.
	if text := ok(t, e, "role", "get", "r-never").stdout; !rowHas(text, "Version", "-") {
		t.Errorf("role get of a role never configured:\n%s", text)
	}
	if text := ok(t, e, "role", "set", "r-eng", "-weight", "3").stdout; !rowHas(text, "Lending limit", "no cap") {
		t.Errorf("role set without -lending-limit:\n%s", text)
	}

	fails(t, ExitConflict, e, "role", "delete", "r-eng", "-if-match", "1")
	ok(t, e, "role", "delete", "r-eng")
	if now, _ := cl.Role(ctx, "r-eng", api.ReadOptions{}); now.Weight != api.DefaultWeight || now.LendingLimit != nil {
		t.Errorf("after delete the role is %+v, want the defaults", now)
	}
}

// Reservations through the tool, on an agent admitted through the test
// hook: the agent must be admitted and have room (409 → exit 4) unless
// -force, which stores a pending one.
func TestReservationCommands(t *testing.T) {
	c := shared(t)
	e := clusterEnv(c)
	cl := client(t, c)
	ctx := context.Background()
	admitAgent(t, cl, "res-node", api.Resources{"cpus": 4, "mem": 4096})

	fails(t, ExitConflict, e, "reservation", "set", "res-db", "-agent", "res-nosuch", "-role", "db", "-resources", "cpus=1")
	msg := fails(t, ExitConflict, e, "reservation", "set", "res-db", "-agent", "res-node", "-role", "db", "-resources", "cpus=64")
	if !strings.Contains(msg, "Hint: pass -force to do it anyway") {
		t.Errorf("a reservation that does not fit: %q, want a hint at -force", msg)
	}

	var dr api.DryRun
	decode(t, &dr, e, "reservation", "set", "res-db", "-agent", "res-node", "-role", "db", "-resources", "cpus=1,mem=512", "-dry-run", "-json")
	fails(t, ExitNotFound, e, "reservation", "get", "res-db")

	var set api.Reservation
	decode(t, &set, e, "reservation", "set", "res-db", "-agent", "res-node", "-role", "db", "-resources", "cpus=1,mem=512", "-json")
	stored, err := cl.Reservation(ctx, "res-db", api.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(set, *stored) || stored.Status != api.ReservationActive {
		t.Fatalf("set printed %+v, the API has %+v", set, stored)
	}
	var got api.Reservation
	decode(t, &got, e, "reservation", "get", "res-db", "-json")
	var list api.ReservationList
	decode(t, &list, e, "reservation", "list", "-json")
	all, err := cl.Reservations(ctx, api.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, *stored) || !reflect.DeepEqual(list.Reservations, all) {
		t.Errorf("get -json = %+v and list -json = %+v; the API has %+v and %+v", got, list.Reservations, stored, all)
	}
	if table := ok(t, e, "reservation", "list").stdout; !rowHas(table, "res-db", "res-node", "db", "cpus:1 mem:512", "active") {
		t.Errorf("reservation list:\n%s", table)
	}

	var forced api.Reservation
	decode(t, &forced, e, "reservation", "set", "res-big", "-agent", "res-node", "-role", "db", "-resources", "cpus=64", "-force", "-json")
	if forced.Status != api.ReservationPending {
		t.Errorf("a forced reservation past the agent is %+v, want pending", forced)
	}
	ok(t, e, "reservation", "delete", "res-big")
	ok(t, e, "reservation", "delete", "res-db", "-if-match", strconv.FormatUint(stored.Version, 10))
	fails(t, ExitNotFound, e, "reservation", "delete", "res-db")
}

// Rate limits through the tool: a principal's, a labeled one, the
// aggregate default, and the whole configuration.
func TestRateLimitCommands(t *testing.T) {
	c := shared(t)
	e := clusterEnv(c)
	cl := client(t, c)
	ctx := context.Background()

	var set api.RateLimit
	decode(t, &set, e, "ratelimit", "set", "rl-spark", "-qps", "10", "-burst", "20", "-capacity", "100", "-json")
	stored, err := cl.RateLimit(ctx, "rl-spark", api.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(set, *stored) || *stored.QPS != 10 || stored.Burst != 20 || stored.Capacity != 100 {
		t.Fatalf("set printed %+v, the API has %+v", set, stored)
	}
	// Flags left out take the server's defaults; no -qps counts without
	// throttling.
	var counted api.RateLimit
	decode(t, &counted, e, "ratelimit", "set", "rl-counted", "-json")
	if counted.QPS != nil || counted.Capacity != api.DefaultRateLimitCapacity {
		t.Errorf("a limit without flags is %+v, want counted (no qps) with the default capacity", counted)
	}
	if text := ok(t, e, "ratelimit", "get", "rl-counted").stdout; !rowHas(text, "QPS", "unthrottled") {
		t.Errorf("ratelimit get of a counted principal:\n%s", text)
	}

	var labeled api.RateLimit
	decode(t, &labeled, e, "ratelimit", "set", "rl-spark", "-label", "batch", "-qps", "2", "-json")
	want, err := cl.LabeledRateLimit(ctx, "rl-spark", "batch", api.ReadOptions{})
	if err != nil || !reflect.DeepEqual(labeled, *want) {
		t.Fatalf("labeled set printed %+v, the API has %+v (%v)", labeled, want, err)
	}
	var got api.RateLimit
	decode(t, &got, e, "ratelimit", "get", "rl-spark", "-label", "batch", "-json")
	if !reflect.DeepEqual(got, *want) {
		t.Errorf("labeled get -json = %+v, want %+v", got, want)
	}

	var def api.RateLimitDefault
	decode(t, &def, e, "ratelimit", "default", "set", "-qps", "33.3", "-json")
	wantDef, err := cl.RateLimitDefault(ctx, api.ReadOptions{})
	if err != nil || !reflect.DeepEqual(def, *wantDef) || def.Burst != 34 {
		t.Fatalf("default set printed %+v, the API has %+v (%v)", def, wantDef, err)
	}
	decode(t, &def, e, "ratelimit", "default", "get", "-json")

	var cfg api.RateLimitConfig
	decode(t, &cfg, e, "ratelimit", "list", "-json")
	wantCfg, err := cl.RateLimitConfig(ctx, api.ReadOptions{})
	if err != nil || !reflect.DeepEqual(cfg, *wantCfg) {
		t.Fatalf("list -json = %+v, the API has %+v (%v)", cfg, wantCfg, err)
	}
	table := ok(t, e, "ratelimit", "list").stdout
	if !rowHas(table, "rl-spark", "-", "10", "20", "100") || !rowHas(table, "rl-spark", "batch", "2") ||
		!rowHas(table, "rl-counted", "unthrottled") || !rowHas(table, "(default)", "33.3", "34") {
		t.Errorf("ratelimit list:\n%s", table)
	}

	// Deletes: a dry run keeps the limit; the label's and the principal's
	// go separately; the default last.
	ok(t, e, "ratelimit", "delete", "rl-spark", "-dry-run")
	ok(t, e, "ratelimit", "delete", "rl-spark", "-label", "batch")
	fails(t, ExitNotFound, e, "ratelimit", "get", "rl-spark", "-label", "batch")
	ok(t, e, "ratelimit", "get", "rl-spark")
	ok(t, e, "ratelimit", "delete", "rl-spark")
	ok(t, e, "ratelimit", "delete", "rl-counted")
	fails(t, ExitNotFound, e, "ratelimit", "get", "rl-spark")
	ok(t, e, "ratelimit", "default", "delete", "-if-match", strconv.FormatUint(def.Version, 10))
	fails(t, ExitNotFound, e, "ratelimit", "default", "get")
}
