package commands

import (
	"strings"
	"testing"
)

// With no leader (two of three servers killed), a read fails after
// -retry-for, and the same read with -stale is answered by the server left
// from its own state. status -stale shows what that server knows and does
// not count frameworks and tasks, which only a leader has; framework list
// and task list refuse -stale.
func TestStaleReads(t *testing.T) {
	c := startCluster(t, 3)
	ok(t, clusterEnv(c), "quota", "set", "st-eng", "-limit", "cpus=2")

	survivor := c.Followers()[0]
	e := env{EnvAddress: c.Address(survivor)}
	if c.Token() != "" {
		e[EnvToken] = c.Token()
	}
	// The write is committed; wait until the survivor has applied it too.
	waitFor(t, "the quota on the survivor", func() bool {
		return run(t, e, "-stale", "quota", "get", "st-eng").code == 0
	})
	for i := 0; i < c.N(); i++ {
		if i != survivor {
			if err := c.Kill(i); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(t, "the survivor to know it has no leader", func() bool {
		return run(t, e, "-retry-for", "0s", "quota", "get", "st-eng").code == ExitUnavailable
	})

	r := ok(t, e, "-stale", "quota", "get", "st-eng")
	if !rowHas(r.stdout, "Limits", "cpus:2") {
		t.Errorf("quota get -stale:\n%s", r)
	}
	ok(t, e, "quota", "list", "-stale") // after the command too
	r = ok(t, e, "-stale", "status")
	for _, row := range [][]string{{"Frameworks", "- (the leader's live state: not read with -stale)"}, {c.ID(survivor), c.Address(survivor)}} {
		if !rowHas(r.stdout, row...) {
			t.Errorf("status -stale lacks %q:\n%s", row, r)
		}
	}
	var st Status
	decode(t, &st, e, "-stale", "status", "-json")
	if st.Frameworks != nil || st.Tasks != nil || len(st.Cluster.Servers) != 3 {
		t.Errorf("status -stale -json = %+v", st)
	}
	for _, cmd := range [][]string{{"framework", "list"}, {"task", "list"}} {
		msg := fails(t, ExitUsage, e, append([]string{"-stale"}, cmd...)...)
		if !strings.Contains(msg, strings.Join(cmd, " ")+" reads the leader's live state") {
			t.Errorf("%s -stale: %q", cmd, msg)
		}
	}
}
