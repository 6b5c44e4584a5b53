// Package history records what the chaos clients did: one Op per request,
// with invoke and complete times from one monotonic clock on this machine
// (nothing is compared across servers' clocks), saved as JSON for replay.
package history

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"
)

// Kind is what an operation did to its key.
type Kind string

const (
	Read  Kind = "read"  // GET /v1/ratelimits/{key}
	Write Kind = "write" // PUT /v1/ratelimits/{key} {"qps": value}
	CAS   Kind = "cas"   // the same PUT with If-Match: IfVersion
)

// Outcome is what the client learned about an operation.
type Outcome string

const (
	// OK: the server answered 2xx (or 404 for a read of an absent key).
	OK Outcome = "ok"
	// Fail: the operation definitely did not take effect (refused before it
	// was sent, a 412 on CAS, a 4xx).
	Fail Outcome = "fail"
	// Unknown: it may or may not have taken effect (a timeout, a connection
	// cut after the request was sent, 503 no_leader on a write), as Jepsen
	// models indeterminate operations.
	Unknown Outcome = "unknown"
)

// Op is one client request and its answer.
type Op struct {
	Client int    `json:"client"`
	Server int    `json:"server"` // index of the server it was sent to
	Key    string `json:"key"`
	Kind   Kind   `json:"kind"`
	// Value is what a write or CAS sets: unique in the run, so that a read
	// names the write it saw. 0 means "absent" and is never written.
	Value     uint64 `json:"value,omitempty"`
	IfVersion uint64 `json:"if_version,omitempty"` // CAS only
	// Final marks the reads made after every fault was healed.
	Final bool `json:"final,omitempty"`

	Invoke   time.Duration `json:"invoke_ns"`   // since the run's start
	Complete time.Duration `json:"complete_ns"` // since the run's start

	Outcome Outcome `json:"outcome"`
	// OutValue and OutVersion are what the server answered: the object's
	// qps and version for a read (0, 0 when absent) and for a write or CAS
	// (its own value and the Raft index it was stored at).
	OutValue   uint64 `json:"out_value,omitempty"`
	OutVersion uint64 `json:"out_version,omitempty"`
	// Mismatch marks a CAS the server refused with 412 because the key was
	// not at IfVersion: unlike a refused connection, it says something
	// about the key's state.
	Mismatch bool   `json:"mismatch,omitempty"`
	Error    string `json:"error,omitempty"`
}

// IsWrite reports whether op changes its key when it takes effect.
func (op Op) IsWrite() bool { return op.Kind == Write || op.Kind == CAS }

func (op Op) String() string {
	s := fmt.Sprintf("client %d → server %d: %s %s", op.Client, op.Server, op.Kind, op.Key)
	switch op.Kind {
	case Write:
		s += fmt.Sprintf(" := %d", op.Value)
	case CAS:
		s += fmt.Sprintf(" := %d if version %d", op.Value, op.IfVersion)
	}
	s += fmt.Sprintf(" [%s, %s] %s", op.Invoke, op.Complete, op.Outcome)
	if op.Outcome == OK {
		s += fmt.Sprintf(" {value %d, version %d}", op.OutValue, op.OutVersion)
	}
	if op.Error != "" {
		s += " (" + op.Error + ")"
	}
	return s
}

// Recorder collects the Ops of concurrent clients against one clock.
type Recorder struct {
	start time.Time // carries Go's monotonic reading; Since uses it

	mu  sync.Mutex
	ops []Op
}

// NewRecorder starts the run's clock.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Now is the time since the run's start, monotonic.
func (r *Recorder) Now() time.Duration { return time.Since(r.start) }

// Add records a completed operation.
func (r *Recorder) Add(op Op) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// Ops returns the recorded operations ordered by invocation.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	ops := append([]Op(nil), r.ops...)
	r.mu.Unlock()
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Invoke < ops[j].Invoke })
	return ops
}

// Save writes ops as indented JSON to path.
func Save(path string, ops []Op) error {
	data, err := json.MarshalIndent(ops, "", "  ")
	if err != nil {
		return fmt.Errorf("encode history: %w", err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("save history %s: %w", path, err)
	}
	return nil
}

// Load reads a history saved by Save, to check it again.
func Load(path string) ([]Op, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load history: %w", err)
	}
	var ops []Op
	if err := json.Unmarshal(data, &ops); err != nil {
		return nil, fmt.Errorf("load history %s: %w", path, err)
	}
	return ops, nil
}
