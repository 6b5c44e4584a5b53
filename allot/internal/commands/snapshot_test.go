package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// A backup saved through the tool from a 3-server cluster restores through
// the tool into a fresh cluster: the objects come back with their versions
// and the audit trail with them (the snapshot's own tests compare the
// whole state; this checks the CLI's path). save never leaves a partial
// file under the final name.
func TestSnapshotSaveAndRestore(t *testing.T) {
	src := startCluster(t, 3, testcluster.WithArgs("-test-hooks"))
	e := clusterEnv(src)
	admitAgent(t, client(t, src), "snap-node", api.Resources{"cpus": 8, "mem": 8192})
	ok(t, e, "quota", "set", "snap-eng", "-guarantee", "cpus=2", "-limit", "cpus=4")
	ok(t, e, "role", "set", "snap-eng", "-weight", "2", "-lending-limit", "cpus=1")
	ok(t, e, "reservation", "set", "snap-db", "-agent", "snap-node", "-role", "db", "-resources", "cpus=1")
	ok(t, e, "ratelimit", "set", "snap-spark", "-qps", "10")
	ok(t, e, "ratelimit", "default", "set", "-qps", "50")

	var quota api.Quota
	var role api.Role
	var reservation api.Reservation
	var audit api.AuditList
	decode(t, &quota, e, "quota", "get", "snap-eng", "-json")
	decode(t, &role, e, "role", "get", "snap-eng", "-json")
	decode(t, &reservation, e, "reservation", "get", "snap-db", "-json")
	decode(t, &audit, e, "audit", "-json")

	dir := t.TempDir()
	file := filepath.Join(dir, "backup.snap")
	r := ok(t, e, "snapshot", "save", file)
	var index uint64
	if _, err := fmt.Sscanf(r.stdout, "Saved a snapshot at index %d to ", &index); err != nil || index < role.Version {
		t.Fatalf("save printed %q (index %d, the role is at version %d)", r.stdout, index, role.Version)
	}
	if !strings.Contains(r.stdout, file) {
		t.Errorf("save does not name the file: %q", r.stdout)
	}
	if _, err := os.Stat(file + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("save left %s.tmp behind: %v", file, err)
	}

	// A save that fails leaves neither the file nor the temporary one.
	failed := filepath.Join(dir, "failed.snap")
	fails(t, ExitUnavailable, env{EnvAddress: "http://127.0.0.1:1"}, "-retry-for", "0s", "snapshot", "save", failed)
	for _, p := range []string{failed, failed + ".tmp"} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("a failed save left %s: %v", p, err)
		}
	}

	dst := startCluster(t, 1)
	de := clusterEnv(dst)
	fails(t, ExitNotFound, de, "quota", "get", "snap-eng")

	// A dry run checks the file on the cluster and changes nothing.
	ok(t, de, "quota", "set", "snap-dst", "-limit", "cpus=1")
	var dstAudit api.AuditList
	decode(t, &dstAudit, de, "audit", "-json")
	r = ok(t, de, "snapshot", "restore", "-dry-run", file)
	if want := fmt.Sprintf("Dry run: nothing was changed. The cluster would restore the snapshot in %s: its state would be at index %d.", file, index); !strings.Contains(r.stdout, want) {
		t.Errorf("restore -dry-run printed %q, want %q", r.stdout, want)
	}
	fails(t, ExitNotFound, de, "quota", "get", "snap-eng")
	ok(t, de, "quota", "get", "snap-dst")
	var afterDry api.AuditList
	decode(t, &afterDry, de, "audit", "-json")
	if !reflect.DeepEqual(afterDry, dstAudit) {
		t.Errorf("the audit trail after a dry run is %+v, was %+v", afterDry, dstAudit)
	}
	// audit -follow, running through the restore, notices that the trail
	// was replaced and follows the new one from its start.
	followCtx, stop := context.WithCancel(context.Background())
	defer stop()
	var followOut, followErr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Run(followCtx, Options{Args: []string{"allot", "audit", "-follow", "-json", "-interval", "50ms"},
			Stdout: &followOut, Stderr: &followErr, LookupEnv: func(k string) (string, bool) { v, ok := de[k]; return v, ok }})
	}()
	waitFor(t, "-follow to print the trail before the restore", func() bool {
		return strings.Contains(followOut.String(), `"quota/snap-dst"`)
	})

	r = ok(t, de, "snapshot", "restore", file)
	if want := fmt.Sprintf("the cluster's state is at index %d", index); !strings.Contains(r.stdout, want) {
		t.Errorf("restore printed %q, want %q", r.stdout, want)
	}
	waitFor(t, "-follow to print the restored trail", func() bool {
		return strings.Contains(followOut.String(), `"quota/snap-eng"`)
	})
	stop()
	if code := <-done; code != 0 {
		t.Errorf("audit -follow ended with exit %d", code)
	}
	notice := "Notice: the audit trail was replaced (a backup was restored)"
	if got := followErr.String(); !strings.HasPrefix(got, notice) || strings.Count(got, "\n") != 1 {
		t.Errorf("-follow's stderr is %q, want the one line %q…", got, notice)
	}
	// Every line of stdout is still an entry (the notice stays out of the NDJSON).
	for _, line := range strings.Split(strings.TrimSpace(followOut.String()), "\n") {
		var entry api.AuditEntry
		if err := json.Unmarshal([]byte(line), &entry); err != nil || entry.Index == 0 {
			t.Errorf("-follow -json printed %q: %v", line, err)
		}
	}

	var gotQuota api.Quota
	var gotRole api.Role
	var gotReservation api.Reservation
	var gotAudit api.AuditList
	decode(t, &gotQuota, de, "quota", "get", "snap-eng", "-json")
	decode(t, &gotRole, de, "role", "get", "snap-eng", "-json")
	decode(t, &gotReservation, de, "reservation", "get", "snap-db", "-json")
	decode(t, &gotAudit, de, "audit", "-json")
	if !reflect.DeepEqual(gotQuota, quota) {
		t.Errorf("restored quota %+v, saved %+v", gotQuota, quota)
	}
	if gotRole.Weight != role.Weight || !reflect.DeepEqual(gotRole.LendingLimit, role.LendingLimit) || gotRole.Version != role.Version {
		t.Errorf("restored role %+v, saved %+v", gotRole, role)
	}
	if gotReservation.Version != reservation.Version || !reflect.DeepEqual(gotReservation.Resources, reservation.Resources) {
		t.Errorf("restored reservation %+v, saved %+v", gotReservation, reservation)
	}
	if len(gotAudit.Entries) < len(audit.Entries) {
		t.Fatalf("restored %d audit entries, saved %d", len(gotAudit.Entries), len(audit.Entries))
	}
	for i, want := range audit.Entries {
		if !sameEntry(gotAudit.Entries[i], want) {
			t.Errorf("restored audit entry %d = %+v, saved %+v", i, gotAudit.Entries[i], want)
		}
	}
}

// A file that is no backup is refused, and the cluster keeps its state.
func TestSnapshotRestoreRefusesGarbage(t *testing.T) {
	c := shared(t)
	e := clusterEnv(c)
	ok(t, e, "quota", "set", "snapbad-eng", "-limit", "cpus=1")
	garbage := filepath.Join(t.TempDir(), "garbage.snap")
	if err := os.WriteFile(garbage, []byte("not a backup\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dry := range [][]string{{"-dry-run"}, nil} {
		args := append(append([]string{"snapshot", "restore"}, dry...), garbage)
		if msg := fails(t, ExitFailed, e, args...); !strings.Contains(msg, "not an allot backup") {
			t.Errorf("restore %v of garbage says %q, not what is wrong", dry, msg)
		}
	}
	ok(t, e, "quota", "get", "snapbad-eng")
	ok(t, e, "quota", "delete", "snapbad-eng")
	fails(t, ExitUsage, e, "snapshot", "restore", t.TempDir())
}
