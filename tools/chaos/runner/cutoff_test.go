package runner

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/allot/allot/masterd/testcluster"
	"github.com/allot/allot/tools/chaos/history"
	"github.com/allot/allot/tools/chaos/workload"
)

// TestCutOffReadsAreCaught isolates a real leader and reads from it while
// it is cut off: the linearizable read must be refused (masterd's side of
// the check), and a read it does answer (here a ?stale=true one, which is
// allowed to be stale, recorded as if it were linearizable) must be what
// the check reports, so the check is known to fire on a real answer.
func TestCutOffReadsAreCaught(t *testing.T) {
	testcluster.RequireNetns(t)
	c := testcluster.Start(t, 3, testcluster.WithNetns())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	rec := history.NewRecorder()
	client := &workload.Client{Addrs: c.Addresses(), Keys: workload.Keys(1), Rec: rec, Values: &workload.Values{}}
	key := client.Keys[0]
	if op := client.Write(key, 0, 0); op.Outcome != history.OK {
		t.Fatalf("first write: %s", op)
	}
	cfg := Config{Interval: time.Second, Log: hclog.NewNullLogger()}
	a, err := inject(ctx, cfg, c, lookup(t, "partition-leader")[0], 1, rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.report.cutOff) != 1 {
		t.Fatalf("%s cut off %v, want the old leader alone", a.fault, a.report.CutOff)
	}
	cut := a.report.cutOff[0]

	linearizable := client.Read(key, cut, false)
	if linearizable.Outcome == history.OK {
		t.Errorf("%s answered a linearizable read while cut off: %s", c.ID(cut), linearizable)
	}
	stale := history.Op{Client: 1, Server: cut, Key: key, Kind: history.Read, Invoke: rec.Now()}
	resp, err := http.Get(c.Address(cut) + "/v1/ratelimits/" + key + "?stale=true")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	stale.Complete = rec.Now()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stale read from cut-off %s: %s, want 200 (its own state)", c.ID(cut), resp.Status)
	}
	stale.Outcome = history.OK
	rec.Add(stale)

	if err := heal(ctx, cfg, a, rec); err != nil {
		t.Fatal(err)
	}
	if err := waitLeader(ctx, c); err != nil {
		t.Fatal(err)
	}
	a.report.Recovered = rec.Now()
	measure(&a.report, rec.Ops())
	if len(a.report.CutOffReads) != 1 || a.report.CutOffReads[0].Client != 1 {
		t.Fatalf("reads reported as served cut off: %v; want only the one answered (%s)", a.report.CutOffReads, stale)
	}
	t.Logf("%s refused in %s: %s", c.ID(cut), linearizable.Complete-linearizable.Invoke, linearizable.Error)
}
