package api_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/allot/allot/masterd/api"
)

// backupFile is a backup file around doc.
func backupFile(t testing.TB, doc string) []byte {
	t.Helper()
	var buf bytes.Buffer
	sw, err := api.NewSnapshotWriter(&buf, api.SnapshotHeader{StoreVersion: 3, RulesVersion: 3, Format: 3, Index: 42, Server: "m1",
		CreatedAt: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(sw, doc); err != nil {
		t.Fatal(err)
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readBackup reads a whole file through a SnapshotReader.
func readBackup(r io.Reader) (api.SnapshotHeader, []byte, error) {
	sr, err := api.NewSnapshotReader(r)
	if err != nil {
		return api.SnapshotHeader{}, nil, err
	}
	doc, err := io.ReadAll(sr)
	return sr.Header(), doc, err
}

// TestSnapshotFile: what the writer writes the reader reads back, however
// it is cut into reads; a file cut anywhere or changed anywhere is refused.
func TestSnapshotFile(t *testing.T) {
	doc := "{\n \"quotas\": []\n}\n" + strings.Repeat("x", 200<<10) + "\n"
	file := backupFile(t, doc)
	if !strings.HasPrefix(string(file), "allot-snapshot 1\n{\"store_version\":3,") || !strings.Contains(string(file), "\nsha256 ") {
		t.Fatalf("the file begins %q", file[:80])
	}
	for name, r := range map[string]io.Reader{
		"whole":          bytes.NewReader(file),
		"a byte a read":  iotest.OneByteReader(bytes.NewReader(file)),
		"half of a read": iotest.HalfReader(bytes.NewReader(file)),
	} {
		h, got, err := readBackup(r)
		if err != nil || string(got) != doc || h.Index != 42 || h.Server != "m1" {
			t.Errorf("%s: header %+v, %d bytes, %v; want the document back", name, h, len(got), err)
		}
	}
	// A document without a final newline gets one, so that the checksum
	// starts a line.
	if _, got, err := readBackup(bytes.NewReader(backupFile(t, "{}"))); err != nil || string(got) != "{}\n" {
		t.Errorf("a document without its newline: %q, %v", got, err)
	}

	small := backupFile(t, "{\"quotas\": []}\n")
	for n := range len(small) {
		_, _, err := readBackup(bytes.NewReader(small[:n]))
		switch {
		case n == 0 && !errors.Is(err, api.ErrSnapshotEmpty):
			t.Errorf("nothing: %v, want ErrSnapshotEmpty", err)
		case n > 0 && !errors.Is(err, api.ErrSnapshotTruncated) && !errors.Is(err, api.ErrNotSnapshot):
			t.Errorf("the first %d of %d bytes: %v, want ErrSnapshotTruncated", n, len(small), err)
		}
	}
	for i := range len(small) {
		altered := bytes.Clone(small)
		altered[i] ^= 0x04
		if _, _, err := readBackup(bytes.NewReader(altered)); err == nil {
			t.Errorf("byte %d changed, the file still reads", i)
		}
	}
	if _, _, err := readBackup(strings.NewReader("allot-snapshot 7\n{}\n")); !errors.Is(err, api.ErrSnapshotVersion) || !strings.Contains(err.Error(), "version 7") {
		t.Errorf("a newer file version: %v", err)
	}
	if _, _, err := readBackup(strings.NewReader(strings.Repeat("a", 100<<10))); !errors.Is(err, api.ErrNotSnapshot) {
		t.Errorf("a long line of text: %v", err)
	}
}

func snapshotClient(t *testing.T, addrs ...string) *api.Client {
	t.Helper()
	c, err := api.NewClient(addrs, "tok")
	if err != nil {
		t.Fatal(err)
	}
	c.RetryFor = 10 * time.Second
	return c
}

func noLeader(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	io.WriteString(w, `{"error": {"code": "no_leader", "message": "an election is under way; retry"}}`)
}

// TestSaveSnapshot: the client moves past a server without a leader and
// one that is down, writes the file it gets, and fails, saying so, when the
// transfer is cut short.
func TestSaveSnapshot(t *testing.T) {
	file := backupFile(t, "{\"quotas\": []}\n")
	var cut bool
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != api.SnapshotPath || r.Method != http.MethodGet || r.Header.Get("Authorization") != "Bearer tok" {
			t.Errorf("request %s %s", r.Method, r.URL)
		}
		w.Header().Set("Content-Type", api.SnapshotContentType)
		if cut {
			w.Header().Set("Content-Length", "100000")
			w.Write(file[:len(file)-10])
			return
		}
		w.Write(file)
	}))
	defer good.Close()
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { noLeader(w) }))
	defer busy.Close()

	var out bytes.Buffer
	index, err := snapshotClient(t, deadAddress(t), busy.URL, good.URL).SaveSnapshot(context.Background(), &out)
	if err != nil || index != 42 || !bytes.Equal(out.Bytes(), file) {
		t.Fatalf("save: index %d, %v; wrote %d of %d bytes", index, err, out.Len(), len(file))
	}

	cut = true
	out.Reset()
	_, err = snapshotClient(t, good.URL).SaveSnapshot(context.Background(), &out)
	if !errors.Is(err, api.ErrSnapshotTruncated) || !strings.Contains(err.Error(), "save it again") {
		t.Fatalf("a transfer cut short: %v, want ErrSnapshotTruncated saying to save again", err)
	}
}

// onceReader hides a reader's Seek: a body that cannot be sent twice.
type onceReader struct{ r io.Reader }

func (o onceReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// TestRestoreSnapshotRetriesOnlyWhatItCanReplay: a body that was sent to a
// server that then had no leader is sent again, whole, to the next one only
// if it can seek back; a body never read (the server was down) always is.
func TestRestoreSnapshotRetriesOnlyWhatItCanReplay(t *testing.T) {
	file := backupFile(t, "{\"quotas\": []}\n")
	var (
		mu       sync.Mutex
		received [][]byte
	)
	record := func(r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		received = append(received, body)
		mu.Unlock()
	}
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { record(r); noLeader(w) }))
	defer busy.Close()
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record(r)
		if r.Method != http.MethodPut || r.URL.Path != api.SnapshotPath || r.Header.Get("Content-Type") != api.SnapshotContentType {
			t.Errorf("request %s %s (%s)", r.Method, r.URL, r.Header.Get("Content-Type"))
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"index": 42}`)
	}))
	defer good.Close()
	reset := func() { mu.Lock(); received = nil; mu.Unlock() }
	bodies := func() [][]byte { mu.Lock(); defer mu.Unlock(); return received }

	// A file (a seeker) is sent again from where it started.
	r := bytes.NewReader(append([]byte("skipped"), file...))
	r.Seek(int64(len("skipped")), io.SeekStart)
	res, err := snapshotClient(t, busy.URL, good.URL).RestoreSnapshot(context.Background(), r)
	if err != nil || res.Index != 42 {
		t.Fatalf("restore: %+v, %v", res, err)
	}
	if got := bodies(); len(got) != 2 || !bytes.Equal(got[0], file) || !bytes.Equal(got[1], file) {
		t.Errorf("the servers received %d bodies, want the file twice", len(got))
	}

	// A stream that was read is not sent again.
	reset()
	_, err = snapshotClient(t, busy.URL, good.URL).RestoreSnapshot(context.Background(), onceReader{bytes.NewReader(file)})
	if api.ErrorCode(err) != api.CodeNoLeader || !strings.Contains(err.Error(), "restore again from the file") {
		t.Errorf("a stream that reached a server without a leader: %v", err)
	}
	if got := bodies(); len(got) != 1 {
		t.Errorf("the stream was sent %d times, want once", len(got))
	}

	// A stream that no server read goes on to the next server.
	reset()
	res, err = snapshotClient(t, deadAddress(t), good.URL).RestoreSnapshot(context.Background(), onceReader{bytes.NewReader(file)})
	if err != nil || res.Index != 42 {
		t.Fatalf("restore past a server that is down: %+v, %v", res, err)
	}
	if got := bodies(); len(got) != 1 || !bytes.Equal(got[0], file) {
		t.Errorf("the good server received %d bodies", len(got))
	}

	// The server's refusal comes back as it is.
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error": {"code": "invalid_argument", "message": "the backup is truncated"}}`)
	}))
	defer bad.Close()
	if _, err := snapshotClient(t, bad.URL).RestoreSnapshot(context.Background(), bytes.NewReader(file)); api.ErrorCode(err) != api.CodeInvalidArgument {
		t.Errorf("a refused backup: %v, want invalid_argument", err)
	}
}
