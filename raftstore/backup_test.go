package raftstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
)

// backupTime is the time written into test backups, fixed so that the golden
// file compares byte for byte.
var backupTime = time.Date(2025, 3, 2, 8, 30, 0, 0, time.UTC)

// richStateV3 is richCommands and aclCommands under store version 3: every
// kind of object, the ACL state and labeled limits.
func richStateV3(t testing.TB) *State {
	t.Helper()
	f := NewFSM(nil)
	for i, c := range append(richCommands(), aclCommands()...) {
		if c.validate(3) == nil {
			Meta(c).Rules = 3
		}
		f.Apply(logEntry(t, uint64(i+1), c))
	}
	var s *State
	f.Read(func(st *State) { s = st.clone() })
	return s
}

func backupBytes(t testing.TB, s *State) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteBackup(&buf, s, "m1", backupTime); err != nil {
		t.Fatalf("write backup: %v", err)
	}
	return buf.Bytes()
}

// TestBackupGolden pins the backup file: the golden backup of the rich
// state reads back to that state, header and all, and a backup of each
// store version's state reads back to it.
func TestBackupGolden(t *testing.T) {
	s := richStateV3(t)
	got := backupBytes(t, s)
	compareGolden(t, filepath.Join("testdata", "backup-v1.snap"), got)
	restored, h, err := ReadBackup(bytes.NewReader(mustRead(t, filepath.Join("testdata", "backup-v1.snap"))))
	if err != nil {
		t.Fatal(err)
	}
	want := api.SnapshotHeader{StoreVersion: StoreVersion, RulesVersion: 3, Format: 3, Index: s.Index(), Server: "m1", CreatedAt: backupTime}
	if h != want {
		t.Errorf("header %+v, want %+v", h, want)
	}
	if !reflect.DeepEqual(restored, s) {
		t.Fatalf("the golden backup reads back as another state:\n%+v\nwant\n%+v", restored, s)
	}
	// Its state document is the snapshot the FSM writes.
	if doc := snapshotBytes(t, s); !bytes.Contains(got, doc) {
		t.Error("the backup does not hold the FSM's snapshot document")
	}

	for rules, st := range map[uint32]*State{1: richStateUnder(t, 1), 2: richStateUnder(t, 2), 3: s} {
		back, h, err := ReadBackup(bytes.NewReader(backupBytes(t, st)))
		if err != nil {
			t.Fatalf("store version %d: %v", rules, err)
		}
		if h.RulesVersion != rules || h.Format != int(rules) || !reflect.DeepEqual(back, st) {
			t.Errorf("store version %d: header %+v, or the state read back differs", rules, h)
		}
	}
}

// withChecksum ends body with the checksum line that matches it: a file
// altered on purpose rather than damaged.
func withChecksum(body string) []byte {
	sum := sha256.Sum256([]byte(body))
	return []byte(body + "sha256 " + hex.EncodeToString(sum[:]) + "\n")
}

// TestReadBackupRefuses: every way a file can be wrong is refused with an
// error that says which, and the state read so far goes nowhere.
func TestReadBackupRefuses(t *testing.T) {
	good := backupBytes(t, richStateV3(t))
	header, rest, _ := bytes.Cut(bytes.SplitN(good, []byte("\n"), 2)[1], []byte("\n"))
	doc := string(rest[:len(rest)-len("sha256 ")-2*sha256.Size-1])
	withHeader := func(old, new string) []byte {
		return withChecksum("allot-snapshot 1\n" + strings.Replace(string(header), old, new, 1) + "\n" + doc)
	}
	flipped := bytes.Clone(good)
	flipped[len(good)/2] ^= 0x01

	tests := map[string]struct {
		file []byte
		want error
		says string
	}{
		"empty":                     {nil, api.ErrSnapshotEmpty, "empty"},
		"a snapshot document alone": {snapshotBytes(t, richStateV3(t)), api.ErrNotSnapshot, "allot-snapshot 1"},
		"JSON":                      {[]byte(`{"quotas": []}`), api.ErrNotSnapshot, "does not begin"},
		"a newer file version":      {append([]byte("allot-snapshot 2\n"), good[len("allot-snapshot 1\n"):]...), api.ErrSnapshotVersion, "version 2"},
		"no file version":           {append([]byte("allot-snapshot x\n"), good[len("allot-snapshot 1\n"):]...), api.ErrNotSnapshot, "file version"},
		"a header that is not JSON": {withChecksum("allot-snapshot 1\nheader\n{}\n"), api.ErrNotSnapshot, "header"},
		"one byte flipped":          {flipped, api.ErrSnapshotChecksum, "altered"},
		"the checksum flipped":      {append(bytes.Clone(good[:len(good)-2]), 'x', '\n'), api.ErrSnapshotChecksum, "damaged"},
		"a byte more":               {append(bytes.Clone(good), '\n'), api.ErrSnapshotTruncated, "does not end"},
		"a newer state format": {withHeader(`"format":3`, `"format":4`), ErrBackupTooNew,
			"upgrade every server"},
		"a newer store version": {withHeader(`"rules_version":3`, `"rules_version":9`), ErrBackupTooNew,
			"written under store version 9"},
		"a header of another state": {withHeader(`"index":`, `"index":1`), api.ErrNotSnapshot, "does not describe"},
		"a state that does not read": {withChecksum("allot-snapshot 1\n" + string(header) + "\n{\"format\": 3, \"bogus\": 1}\n"),
			api.ErrNotSnapshot, "bogus"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, _, err := ReadBackup(bytes.NewReader(tc.file))
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %v, want %v saying %q", err, tc.want, tc.says)
			}
			if s != nil {
				t.Fatal("a refused backup returned a state")
			}
		})
	}

	// Cut anywhere, the file is refused: never a state from part of it.
	for n := range len(good) {
		if _, _, err := ReadBackup(bytes.NewReader(good[:n])); err == nil {
			t.Fatalf("the first %d of %d bytes read as a backup", n, len(good))
		} else if n > len("allot-snapshot 1\n") && !errors.Is(err, api.ErrSnapshotTruncated) {
			t.Fatalf("the first %d of %d bytes: %v, want %v", n, len(good), err, api.ErrSnapshotTruncated)
		}
	}
	// Any one byte changed, the file is refused.
	for i := 0; i < len(good); i += 7 {
		altered := bytes.Clone(good)
		altered[i] ^= 0x20
		if _, _, err := ReadBackup(bytes.NewReader(altered)); err == nil {
			t.Fatalf("byte %d of %d changed, the backup still reads", i, len(good))
		}
	}
}

// TestSnapshotStreamsAsTheEncoderWrites: the snapshot document, written one
// list element at a time, is byte for byte what json.Encoder writes of it
// whole, for states with and without every optional part.
func TestSnapshotStreamsAsTheEncoderWrites(t *testing.T) {
	withoutFrameworks := richStateUnder(t, 2)
	withoutFrameworks.frameworks = map[string]FrameworkRecord{}
	emptyAudit := NewState()
	emptyAudit.audit = []api.AuditEntry{}
	for name, s := range map[string]*State{"empty": NewState(), "empty audit trail": emptyAudit, "version 1": richStateUnder(t, 1),
		"version 2": richStateUnder(t, 2), "version 3": richStateV3(t), "no frameworks": withoutFrameworks} {
		doc := newSnapshotDoc(s)
		var whole bytes.Buffer
		enc := json.NewEncoder(&whole)
		enc.SetIndent("", " ")
		if err := enc.Encode(&doc); err != nil {
			t.Fatal(err)
		}
		if got := snapshotBytes(t, s); !bytes.Equal(got, whole.Bytes()) {
			t.Errorf("%s: streamed\n%s\nthe encoder\n%s", name, got, whole.Bytes())
		}
	}
}

// BenchmarkBackup writes and reads back the backup of a state with agents
// admitted and a full audit trail; MB/s is of the file. B/op counts every
// allocation, not what is held at once: writing encodes one list element
// at a time.
func BenchmarkBackup(b *testing.B) {
	for _, agents := range []int{100, 10000} {
		s := NewState()
		var index uint64
		for i := range agents {
			index++
			if res := s.apply(index, admit(fmt.Sprintf("node-%05d", i), api.Resources{"cpus": 64, "mem": 262144})); res.Err != nil {
				b.Fatal(res.Err)
			}
		}
		for len(s.audit) < MaxAuditEntries {
			index++
			if res := s.apply(index, quotaSet(fmt.Sprintf("team%d", index%50), nil, api.Resources{"cpus": float64(index%7 + 1)})); res.Err != nil {
				b.Fatal(res.Err)
			}
		}
		var file bytes.Buffer
		if err := WriteBackup(&file, s, "m1", backupTime); err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("agents=%d/audit=%d", agents, len(s.audit))
		b.Run(name+"/write", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(file.Len()))
			for b.Loop() {
				if err := WriteBackup(io.Discard, s, "m1", backupTime); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/read", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(file.Len()))
			for b.Loop() {
				if _, _, err := ReadBackup(bytes.NewReader(file.Bytes())); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestReadBackupRefusesWhatNoWriteStores: a backup edited by hand, its
// checksum made to match, is still refused when its state holds an object
// the API would never have stored, with an error that names the object;
// what the writes normalize (a null resource map) is normalized.
func TestReadBackupRefusesWhatNoWriteStores(t *testing.T) {
	good := backupBytes(t, richStateV3(t))
	lines := bytes.SplitN(good, []byte("\n"), 3)
	doc := lines[2][:len(lines[2])-len("sha256 ")-2*sha256.Size-1]
	// edited is the good backup with its state document changed by edit.
	edited := func(edit func(doc map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(doc, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		data, err := json.MarshalIndent(m, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		return withChecksum(string(lines[0]) + "\n" + string(lines[1]) + "\n" + string(data) + "\n")
	}
	item := func(m map[string]any, list string, i int) map[string]any { return m[list].([]any)[i].(map[string]any) }

	for name, tc := range map[string]struct {
		edit func(m map[string]any)
		says string
	}{
		"a negative limit": {func(m map[string]any) { item(m, "quotas", 0)["limits"] = map[string]any{"cpus": -5} },
			"quota eng: limits"},
		"a role name no write takes": {func(m map[string]any) { item(m, "quotas", 0)["role"] = "eng//x" }, "quota eng//x"},
		"a child's limit above its parent's": {func(m map[string]any) { item(m, "quotas", 1)["limits"] = map[string]any{"cpus": 99} },
			"exceeds the limit of role eng"},
		"a weight of 0":        {func(m map[string]any) { item(m, "roles", 0)["weight"] = 0 }, "weight must be greater than 0"},
		"a reservation of -1":  {func(m map[string]any) { item(m, "reservations", 0)["resources"] = map[string]any{"cpus": -1} }, "reservation"},
		"a negative qps":       {func(m map[string]any) { item(m, "rate_limits", 0)["qps"] = -1 }, "qps must be greater than 0"},
		"an entry of nothing":  {func(m map[string]any) { m["quotas"] = append(m["quotas"].([]any), nil) }, "quota : role"},
		"two agents, one name": {func(m map[string]any) { item(m, "agents", 1)["name"] = item(m, "agents", 0)["name"] }, "the same name"},
		"a token naming no policy": {func(m map[string]any) { item(m, "acl_tokens", 1)["policies"] = []any{"missing"} },
			"names policy missing"},
		"a token without its secret's hash": {func(m map[string]any) { delete(item(m, "acl_tokens", 1), "secret_hash") }, "no secret hash"},
		"a version past the index":          {func(m map[string]any) { item(m, "quotas", 0)["version"] = 1000 }, "past the backup's index"},
		"an audit trail out of order": {func(m map[string]any) {
			a := m["audit"].([]any)
			a[0], a[1] = a[1], a[0]
		}, "increasing order"},
	} {
		t.Run(name, func(t *testing.T) {
			s, _, err := ReadBackup(bytes.NewReader(edited(tc.edit)))
			if !errors.Is(err, api.ErrNotSnapshot) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %v, want %v saying %q", err, api.ErrNotSnapshot, tc.says)
			}
			if s != nil {
				t.Fatal("a refused backup returned a state")
			}
		})
	}

	s, _, err := ReadBackup(bytes.NewReader(edited(func(m map[string]any) { item(m, "quotas", 2)["limits"] = nil })))
	if err != nil {
		t.Fatal(err)
	}
	if q, ok := s.Quota("ops"); !ok || q.Limits == nil {
		t.Errorf("quota ops %+v: a null limits map stays null, where the API answers {} for no limit", q)
	}
}
