package raftstore

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/hashicorp/raft"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// sampleCommands has one command of every type with every field set.
func sampleCommands() map[MessageType]Command {
	m := WriteMeta{Time: time.Date(2025, 3, 1, 12, 0, 0, 123000000, time.UTC), Principal: "alice",
		IfMatch: 42, IfNoneMatch: true, Force: true}
	return map[MessageType]Command{
		QuotaSetType: &QuotaSet{WriteMeta: m, Role: "eng/ml",
			Guarantees: api.Resources{"cpus": 1.5, "mem": 1024}, Limits: api.Resources{"cpus": 3}},
		QuotaDeleteType: &QuotaDelete{WriteMeta: m, Role: "eng/ml"},
		RoleSetType:     &RoleSet{WriteMeta: m, Role: "eng", Weight: 2.5, LendingLimit: api.Resources{"cpus": 8}},
		RoleDeleteType:  &RoleDelete{WriteMeta: m, Role: "eng"},
		ReservationSetType: &ReservationSet{WriteMeta: m, Name: "db-node-1", Agent: "node-1", Role: "db",
			Resources: api.Resources{"cpus": 4, "mem": 8192}},
		ReservationDeleteType:      &ReservationDelete{WriteMeta: m, Name: "db-node-1"},
		RateLimitSetType:           &RateLimitSet{WriteMeta: m, Principal: "spark", QPS: qps(55.5), Burst: 10, Capacity: 1000},
		RateLimitDeleteType:        &RateLimitDelete{WriteMeta: m, Principal: "spark"},
		RateLimitDefaultSetType:    &RateLimitDefaultSet{WriteMeta: m, QPS: qps(33.3), Burst: 40, Capacity: 900},
		RateLimitDefaultDeleteType: &RateLimitDefaultDelete{WriteMeta: m},
		RateLimitConfigReplaceType: &RateLimitConfigReplace{WriteMeta: m,
			Limits: []RateLimitSet{
				{Principal: "spark", QPS: qps(55.5), Burst: 56, Capacity: 1000},
				{Principal: "batch", Capacity: 10},
			},
			Default: &RateLimitDefaultSet{QPS: qps(33.3), Burst: 34, Capacity: 1000}},
		AgentAdmitType: &AgentAdmit{WriteMeta: m, ID: "a1", Name: "node-1", Hostname: "node-1.example.net",
			Resources: api.Resources{"cpus": 8, "mem": 16384}, Capabilities: []string{"TASK_RESOURCE_LIMITS"}},
		AgentRemoveType:  &AgentRemove{WriteMeta: m, ID: "a1"},
		ServerSetType:    &ServerSet{WriteMeta: m, ID: "m1", RaftAddress: "10.0.0.1:7000", APIAddress: "http://10.0.0.1:5050"},
		ServerRemoveType: &ServerRemove{WriteMeta: m, ID: "m1"},
		// The framework's principal differs from the write's author, so a
		// log encoding that loses either shows up in the round trip.
		FrameworkSetType: &FrameworkSet{WriteMeta: m, ID: "fw-1", Name: "spark", Principal: "spark-sched",
			Roles: []string{"*", "eng/ml"}, Capabilities: []string{"REVOCABLE_RESOURCES"}, FailoverTimeoutSeconds: 604800.5},
		FrameworkRemoveType: &FrameworkRemove{WriteMeta: m, ID: "fw-1"},
		ACLBootstrapType:    &ACLBootstrap{WriteMeta: m, Accessor: "0123456789abcdef0123456789abcdef", SecretHash: sampleHash(1)},
		ACLPolicySetType: &ACLPolicySet{WriteMeta: m, Name: "eng-ops", Description: "operators of eng",
			Rules: []api.ACLRule{{Object: "quota", Access: "write", Roles: []string{"eng/*"}}, {Object: "cluster", Access: "read"}}},
		ACLPolicyDeleteType: &ACLPolicyDelete{WriteMeta: m, Name: "eng-ops"},
		// The token's principal differs from the write's author, as the
		// framework's does.
		ACLTokenSetType: &ACLTokenSet{WriteMeta: m, Accessor: "ci-deploy", Description: "CI", Policies: []string{"eng-ops", "readers"},
			Principal: "ci", Management: true, SecretHash: sampleHash(2)},
		ACLTokenDeleteType: &ACLTokenDelete{WriteMeta: m, Accessor: "ci-deploy"},
	}
}

// sampleHash is a hash with every byte set, from seed on.
func sampleHash(seed byte) SecretHash {
	var h SecretHash
	for i := range h {
		h[i] = seed + byte(i)
	}
	return h
}

// sampleCommandsV3 is sampleCommands with the fields of store version 3
// set: labels on the rate-limit commands.
func sampleCommandsV3() map[MessageType]Command {
	samples := sampleCommands()
	for _, c := range samples {
		Meta(c).Rules = 3
	}
	samples[RateLimitSetType].(*RateLimitSet).Label = "etl"
	samples[RateLimitDeleteType].(*RateLimitDelete).Label = "etl"
	samples[RateLimitConfigReplaceType].(*RateLimitConfigReplace).Limits[1].Label = "etl"
	return samples
}

// sampleCommandsV2 is sampleCommands with the fields of store version 2 set.
func sampleCommandsV2() map[MessageType]Command {
	samples := sampleCommands()
	for _, c := range samples {
		Meta(c).Rules = 2
	}
	return samples
}

// allTypes lists every type the package knows, in order.
func allTypes() []MessageType {
	var types []MessageType
	for t := range registry {
		types = append(types, t)
	}
	slices.Sort(types)
	return types
}

func TestMessageTypes(t *testing.T) {
	types := allTypes()
	samples := sampleCommands()
	for i, mt := range types {
		if mt != MessageType(i+1) {
			t.Errorf("types are not numbered 1, 2, … without gaps: %d at position %d", mt, i)
		}
		if got := registry[mt].new().Type(); got != mt {
			t.Errorf("registry[%d].new().Type() = %d", mt, got)
		}
		if since := registry[mt].since; since < 1 || since > StoreVersion {
			t.Errorf("type %s: since version %d, want 1..%d", mt, since, StoreVersion)
		}
		if _, ok := samples[mt]; !ok {
			t.Errorf("type %s has no sample command: add one to sampleCommands", mt)
		}
		if mt&IgnoreUnknownTypeFlag != 0 {
			t.Errorf("type %d collides with IgnoreUnknownTypeFlag", mt)
		}
	}
	if got := MessageType(99).String(); got != "type(99)" {
		t.Errorf("unknown type renders as %q", got)
	}
	if got := QuotaSetType.String(); got != "quota.set" {
		t.Errorf("QuotaSetType renders as %q", got)
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	// The version 3 samples carry a stamp, so a command field that hides
	// one of WriteMeta's in the JSON shows up here.
	for mt, c := range sampleCommandsV3() {
		t.Run(mt.String(), func(t *testing.T) {
			data, err := Encode(c)
			if err != nil {
				t.Fatal(err)
			}
			if MessageType(data[0]) != mt {
				t.Fatalf("type byte %d, want %d", data[0], mt)
			}
			got, err := Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c) {
				t.Fatalf("decoded\n%#v\nwant\n%#v", got, c)
			}
			if *Meta(got) != *Meta(c) {
				t.Fatalf("meta %+v, want %+v", *Meta(got), *Meta(c))
			}
			// A flagged known type is still read: the flag only matters to
			// servers that do not know the type.
			flagged, err := Decode(append([]byte{data[0] | byte(IgnoreUnknownTypeFlag)}, data[1:]...))
			if err != nil || !reflect.DeepEqual(flagged, c) {
				t.Fatalf("flagged decode %#v, %v", flagged, err)
			}
		})
	}
}

// TestCommandEncodingGolden pins the bytes written to the Raft log: servers
// replay old logs, so the encoding of a command may only grow.
func TestCommandEncodingGolden(t *testing.T) {
	for version, samples := range map[uint32]map[MessageType]Command{1: sampleCommands(), 2: sampleCommandsV2(), 3: sampleCommandsV3()} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			testCommandEncodingGolden(t, filepath.Join("testdata", fmt.Sprintf("commands-v%d.txt", version)), version, samples)
		})
	}
}

// testCommandEncodingGolden pins the types of store version version and
// older: those a release of that version wrote.
func testCommandEncodingGolden(t *testing.T, path string, version uint32, samples map[MessageType]Command) {
	var buf bytes.Buffer
	for _, mt := range allTypes() {
		if registry[mt].since > version {
			continue
		}
		data, err := Encode(samples[mt])
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&buf, "%d %s\n", data[0], data[1:])
	}
	compareGolden(t, path, buf.Bytes())

	// Every line of the golden file decodes to the sample.
	golden, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(golden)), "\n") {
		// The payload may hold spaces (a description).
		num, payload, _ := strings.Cut(line, " ")
		typ, err := strconv.ParseUint(num, 10, 8)
		if err != nil {
			t.Fatalf("golden line %q: %v", line, err)
		}
		c, err := Decode(append([]byte{byte(typ)}, payload...))
		if err != nil {
			t.Fatalf("golden line %q: %v", line, err)
		}
		if !reflect.DeepEqual(c, samples[MessageType(typ)]) {
			t.Fatalf("golden line %q decodes to %#v", line, c)
		}
	}
}

func TestEncodeRejectsUnencodable(t *testing.T) {
	_, err := Encode(quotaSet("eng", api.Resources{"cpus": math.NaN()}, nil))
	if err == nil || !strings.Contains(err.Error(), "quota.set") {
		t.Fatalf("encode NaN: %v, want an error naming the command", err)
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := map[string]struct {
		data        []byte
		wantUnknown bool
	}{
		"empty":                  {data: nil},
		"type zero":              {data: []byte{0, '{', '}'}, wantUnknown: true},
		"unknown type":           {data: []byte{99, '{', '}'}, wantUnknown: true},
		"unknown flagged type":   {data: []byte{99 | 128, '{', '}'}, wantUnknown: true},
		"known type, no payload": {data: []byte{byte(QuotaSetType)}},
		"known type, garbage":    {data: append([]byte{byte(QuotaSetType)}, "not json"...)},
		"known type, wrong type": {data: append([]byte{byte(QuotaSetType)}, `{"role": 5}`...)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := Decode(tc.data)
			if err == nil {
				t.Fatalf("decoded %#v", c)
			}
			var unknown *unknownTypeError
			if errors.As(err, &unknown) != tc.wantUnknown {
				t.Fatalf("error %v: unknown type %v, want %v", err, !tc.wantUnknown, tc.wantUnknown)
			}
		})
	}
}

func TestFSMApplyUnknownAndUndecodable(t *testing.T) {
	tests := map[string]struct {
		log       raft.Log
		wantPanic string
	}{
		"unknown type": {
			log:       raft.Log{Index: 7, Type: raft.LogCommand, Data: []byte{99, '{', '}'}},
			wantPanic: "raft log index 7: unknown command type 99",
		},
		"unknown type flagged ignorable": {
			log: raft.Log{Index: 7, Type: raft.LogCommand, Data: []byte{99 | byte(IgnoreUnknownTypeFlag), '{', '}'}},
		},
		"undecodable payload": {
			log:       raft.Log{Index: 7, Type: raft.LogCommand, Data: append([]byte{byte(QuotaSetType)}, "{"...)},
			wantPanic: "raft log index 7: decode quota.set",
		},
		"empty entry": {
			log:       raft.Log{Index: 7, Type: raft.LogCommand},
			wantPanic: "raft log index 7: decode command: empty log entry",
		},
		"not a command": {
			log: raft.Log{Index: 7, Type: raft.LogNoop, Data: []byte{99}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := NewFSM(nil)
			f.Apply(logEntry(t, 1, &ServerSet{WriteMeta: meta(), ID: "m1", RaftAddress: "r", APIAddress: "a"}))
			var before bytes.Buffer
			f.Read(func(s *State) { _ = WriteSnapshot(&before, s) })

			var got any
			panicked := func() (recovered any) {
				defer func() { recovered = recover() }()
				got = f.Apply(&tc.log)
				return nil
			}()
			if tc.wantPanic == "" {
				if panicked != nil {
					t.Fatalf("panicked: %v", panicked)
				}
				if got != nil {
					t.Fatalf("skipped entry answered %#v", got)
				}
			} else {
				err, ok := panicked.(error)
				if !ok || !strings.HasPrefix(err.Error(), tc.wantPanic) {
					t.Fatalf("panic %v, want one starting %q", panicked, tc.wantPanic)
				}
			}
			var after bytes.Buffer
			f.Read(func(s *State) { _ = WriteSnapshot(&after, s) })
			if !bytes.Equal(before.Bytes(), after.Bytes()) {
				t.Fatalf("state changed:\n%s\n%s", before.Bytes(), after.Bytes())
			}
		})
	}
}

func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	// A golden file pins what a release wrote: -update creates a missing one
	// and never rewrites one (a new format gets a new file).
	if _, err := os.Stat(path); *update && errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("output differs from %s, which a release wrote and later releases must read: keep the old format readable, write a new one under a new version (go test -update creates its golden file).\ngot:\n%s\nwant:\n%s",
			path, got, want)
	}
}
