package qos

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/allot/allot/agentd/internal/qos/qostest"
	"github.com/allot/allot/masterd/api"
)

// The real-machine tests skip through qostest, shared with the agent's.
var (
	requirePSI      = qostest.RequirePSI
	requireStressNG = qostest.RequireStressNG
)

// fakeProc is a /proc in a temp dir: a controller reads what the test writes.
type fakeProc string

func newFakeProc(t *testing.T) fakeProc {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "pressure"), 0o755); err != nil {
		t.Fatal(err)
	}
	return fakeProc(dir)
}

func (p fakeProc) write(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(string(p), name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (p fakeProc) loadavg(t *testing.T, load5, load15 float64) {
	t.Helper()
	p.write(t, "loadavg", fmtLoad(load5, load15))
}

func fmtLoad(load5, load15 float64) string {
	return "0.50 " + ftoa(load5) + " " + ftoa(load15) + " 2/311 4242\n"
}

// psiFile writes a PSI file with these avg10s (the other fields as a
// kernel writes them).
func psiFile(some, full float64) string {
	return "some avg10=" + ftoa(some) + " avg60=1.00 avg300=0.50 total=123456\n" +
		"full avg10=" + ftoa(full) + " avg60=0.50 avg300=0.20 total=65432\n"
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// at is a fixed instant tests count from.
var at = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// task is a running task for selection tests: started minutes before at.
func task(id string, startedMinutesAgo int, revocable, throttleable bool, cpus, mem float64) Task {
	return Task{
		ContainerID:  id,
		TaskID:       "task-" + id,
		Revocable:    revocable,
		Throttleable: throttleable,
		StartedAt:    at.Add(-time.Duration(startedMinutesAgo) * time.Minute),
		Requests:     api.Resources{"cpus": 1, "mem": 128},
		Used:         api.Resources{"cpus": cpus, "mem": mem},
	}
}

func ids(cs []Correction) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ContainerID
	}
	return out
}

func nan() float64 { return math.NaN() }
