package api

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// SnapshotPath saves (GET) and restores (PUT) a backup of the whole
// replicated state, as `consul snapshot` and `etcdctl snapshot` do.
const SnapshotPath = "/v1/snapshot"

// SnapshotContentType is the media type of a backup file.
const SnapshotContentType = "application/octet-stream"

// SnapshotRestored answers PUT /v1/snapshot.
type SnapshotRestored struct {
	// Index is the Raft index of the state the backup holds: every
	// object's version is at most this.
	Index uint64 `json:"index"`
}

// A backup file, as GET /v1/snapshot streams it and PUT /v1/snapshot takes
// it, is text in four parts:
//
//	allot-snapshot 1
//	{"store_version":3,"rules_version":3,"format":3,"index":42,"server":"m1","created_at":"…"}
//	{ …the state document: JSON, as the servers write their Raft snapshots… }
//	sha256 <64 hex digits>
//
// The first line names the file format and its version, the second is a
// SnapshotHeader, the last is the SHA-256 of every byte before it. The
// checksum comes last so that a server can stream the file as it writes
// it; a reader holds back the last line until the end and checks it there,
// so that a truncated or altered file is refused before anything uses it.
const (
	// SnapshotFileVersion is the version of the file format above (not of
	// the state document, which SnapshotHeader.Format names).
	SnapshotFileVersion = 1
	snapshotMagic       = "allot-snapshot "
	snapshotSumPrefix   = "sha256 "
	// snapshotSumLen is the length of the checksum line.
	snapshotSumLen = len(snapshotSumPrefix) + 2*sha256.Size + 1
	// maxSnapshotLine bounds the first two lines.
	maxSnapshotLine = 64 << 10
)

// SnapshotHeader is the second line of a backup file: what wrote it and
// what a cluster needs to restore it.
type SnapshotHeader struct {
	// StoreVersion is the store version of the masterd that wrote the file.
	StoreVersion uint32 `json:"store_version"`
	// RulesVersion is the store version the state had committed to: a
	// cluster restores the file only if every server runs at least this.
	RulesVersion uint32 `json:"rules_version"`
	// Format is the format of the state document.
	Format int `json:"format"`
	// Index is the Raft index the state reflects.
	Index uint64 `json:"index"`
	// Server is the id of the server that wrote the file, CreatedAt when.
	Server    string    `json:"server"`
	CreatedAt time.Time `json:"created_at"`
}

// Errors of a backup file that does not read; errors.Is tells them apart.
var (
	ErrSnapshotEmpty     = errors.New("the backup is empty")
	ErrNotSnapshot       = errors.New("not an allot backup")
	ErrSnapshotVersion   = errors.New("the backup's file format is newer than this release reads")
	ErrSnapshotTruncated = errors.New("the backup is truncated")
	ErrSnapshotChecksum  = errors.New("the backup's checksum does not match its content")
)

// SnapshotWriter writes a backup file: NewSnapshotWriter writes its first
// two lines, Write the state document, Close the checksum line.
type SnapshotWriter struct {
	w    io.Writer
	sum  hash.Hash
	last byte // the last byte written, so that the checksum starts a line
	err  error
}

// NewSnapshotWriter starts a backup file on w.
func NewSnapshotWriter(w io.Writer, h SnapshotHeader) (*SnapshotWriter, error) {
	sw := &SnapshotWriter{w: w, sum: sha256.New()}
	line, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("write backup header: %w", err)
	}
	first := snapshotMagic + strconv.Itoa(SnapshotFileVersion) + "\n"
	if _, err := sw.Write(append([]byte(first), append(line, '\n')...)); err != nil {
		return nil, err
	}
	return sw, nil
}

// Write writes part of the state document.
func (sw *SnapshotWriter) Write(p []byte) (int, error) {
	if sw.err != nil {
		return 0, sw.err
	}
	n, err := sw.w.Write(p)
	sw.sum.Write(p[:n])
	if n > 0 {
		sw.last = p[n-1]
	}
	if err != nil {
		sw.err = fmt.Errorf("write backup: %w", err)
	}
	return n, sw.err
}

// Close writes the checksum line. It does not close the underlying writer.
func (sw *SnapshotWriter) Close() error {
	if sw.last != '\n' {
		if _, err := sw.Write([]byte{'\n'}); err != nil {
			return err
		}
	}
	if sw.err != nil {
		return sw.err
	}
	line := snapshotSumPrefix + hex.EncodeToString(sw.sum.Sum(nil)) + "\n"
	if _, err := io.WriteString(sw.w, line); err != nil {
		sw.err = fmt.Errorf("write backup checksum: %w", err)
		return sw.err
	}
	sw.err = errors.New("write backup: already closed")
	return nil
}

// SnapshotReader reads a backup file: NewSnapshotReader reads and checks its
// first two lines, Read returns the state document, and the checksum is
// checked when the document ends: Read returns io.EOF only for a complete
// file whose checksum matches, and an error wrapping ErrSnapshotTruncated or
// ErrSnapshotChecksum otherwise.
type SnapshotReader struct {
	header SnapshotHeader
	br     *bufio.Reader
	sum    hash.Hash
	total  int64 // bytes read from the file, checksum line excluded
	err    error
}

// snapshotBuffer is the read buffer: a Read returns at most this less the
// checksum line, which stays in the buffer until the end is found.
const snapshotBuffer = 64 << 10

// NewSnapshotReader reads the first two lines of a backup file.
func NewSnapshotReader(r io.Reader) (*SnapshotReader, error) {
	sr := &SnapshotReader{br: bufio.NewReaderSize(r, snapshotBuffer), sum: sha256.New()}
	first, err := sr.line()
	switch {
	case err == io.EOF && len(first) == 0:
		return nil, ErrSnapshotEmpty
	case err != nil && err != io.EOF:
		return nil, err
	case !bytes.HasPrefix(first, []byte(snapshotMagic)):
		return nil, fmt.Errorf("%w: it does not begin with the line %q (save a backup with GET %s)",
			ErrNotSnapshot, snapshotMagic+strconv.Itoa(SnapshotFileVersion), SnapshotPath)
	case err == io.EOF:
		return nil, fmt.Errorf("%w: it ends within its first line", ErrSnapshotTruncated)
	}
	version, err := strconv.Atoi(strings.TrimSuffix(string(first[len(snapshotMagic):]), "\n"))
	switch {
	case err != nil || version < 1:
		return nil, fmt.Errorf("%w: its first line does not name a file version", ErrNotSnapshot)
	case version > SnapshotFileVersion:
		return nil, fmt.Errorf("%w: file version %d, this release reads version %d: restore it with the release that saved it, or a newer one",
			ErrSnapshotVersion, version, SnapshotFileVersion)
	}
	second, err := sr.line()
	if err == io.EOF {
		return nil, fmt.Errorf("%w: it ends within its header line", ErrSnapshotTruncated)
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(second, &sr.header); err != nil {
		return nil, fmt.Errorf("%w: its header line is not a header: %v", ErrNotSnapshot, err)
	}
	return sr, nil
}

// line reads one line of the file (with its newline) into the checksum.
func (sr *SnapshotReader) line() ([]byte, error) {
	line, err := sr.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull || len(line) > maxSnapshotLine {
		return nil, fmt.Errorf("%w: its first lines are longer than %d bytes", ErrNotSnapshot, maxSnapshotLine)
	}
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("read backup: %w", err)
	}
	sr.sum.Write(line)
	sr.total += int64(len(line))
	// ReadSlice's answer is overwritten by the next read: keep a copy.
	return bytes.Clone(line), err
}

// Header is the file's header line.
func (sr *SnapshotReader) Header() SnapshotHeader { return sr.header }

// Read reads the state document.
func (sr *SnapshotReader) Read(p []byte) (int, error) {
	if sr.err != nil {
		return 0, sr.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	want := min(len(p), snapshotBuffer-snapshotSumLen)
	ahead, err := sr.br.Peek(want + snapshotSumLen)
	switch {
	case err == nil || err == io.EOF:
	case errors.Is(err, io.ErrUnexpectedEOF):
		// A connection closed before the length it announced.
		sr.err = fmt.Errorf("%w: its transfer ended early (%d bytes read): %v", ErrSnapshotTruncated, sr.total+int64(len(ahead)), err)
		return 0, sr.err
	default:
		sr.err = fmt.Errorf("read backup: %w", err)
		return 0, sr.err
	}
	if avail := len(ahead) - snapshotSumLen; avail > 0 {
		// What lies before the last snapshotSumLen bytes seen is document.
		n := copy(p, ahead[:avail])
		sr.sum.Write(p[:n])
		sr.total += int64(n)
		_, _ = sr.br.Discard(n)
		return n, nil
	}
	// Peek found the end: what it holds must be the checksum line.
	sr.err = sr.check(ahead)
	return 0, sr.err
}

// check judges the file's last bytes, which must be its checksum line;
// io.EOF when they are and it matches.
func (sr *SnapshotReader) check(tail []byte) error {
	sum, ok := bytes.CutPrefix(tail, []byte(snapshotSumPrefix))
	if len(tail) != snapshotSumLen || !ok || tail[len(tail)-1] != '\n' {
		return fmt.Errorf("%w: it does not end with its checksum line (%d bytes read)", ErrSnapshotTruncated, sr.total+int64(len(tail)))
	}
	want := string(sum[:len(sum)-1])
	// Written in lower case: any other byte there is damage.
	if strings.Trim(want, "0123456789abcdef") != "" {
		return fmt.Errorf("%w: its checksum line is damaged", ErrSnapshotChecksum)
	}
	if got := hex.EncodeToString(sr.sum.Sum(nil)); got != want {
		return fmt.Errorf("%w: the SHA-256 of its %d bytes is %s, its last line says %s: the file was altered or damaged",
			ErrSnapshotChecksum, sr.total, got, want)
	}
	return io.EOF
}

// Verify reads the rest of the document and checks the checksum: nil when
// the file is whole.
func (sr *SnapshotReader) Verify() error {
	_, err := io.Copy(io.Discard, sr)
	return err
}

// SaveSnapshot streams a backup of the whole replicated state to w and
// returns the Raft index it reflects. The leader writes it (a follower
// passes the request on); the client checks the file as it arrives and
// fails, with what w already holds incomplete, when it was cut short or
// damaged on the way. It moves on to another server, as every call does,
// only until the first byte reaches w.
func (c *Client) SaveSnapshot(ctx context.Context, w io.Writer) (uint64, error) {
	resp, err := c.transfer(ctx, http.MethodGet, SnapshotPath, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	out := &trackedWriter{w: w}
	sr, err := NewSnapshotReader(io.TeeReader(resp.Body, out))
	if err == nil {
		err = sr.Verify()
	}
	switch {
	case out.err != nil:
		return 0, fmt.Errorf("save backup: write it: %w", out.err)
	case err != nil:
		return 0, fmt.Errorf("save backup: %w (%d bytes written are incomplete: save it again)", err, out.n)
	}
	return sr.Header().Index, nil
}

// RestoreSnapshot replaces the cluster's replicated state with the backup
// read from r. The server checks the whole file before it changes
// anything: a file that is not a backup, truncated, altered or newer than
// the cluster reads is an invalid_argument error. When the request fails
// before r was read, or r is an io.Seeker that can go back to where it
// started, the client tries again, on another server when one does not
// answer; otherwise the error says to restore again from the file, which
// is harmless if the first restore happened after all.
func (c *Client) RestoreSnapshot(ctx context.Context, r io.Reader) (*SnapshotRestored, error) {
	resp, err := c.transfer(ctx, http.MethodPut, SnapshotPath, newReplayableBody(r))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out SnapshotRestored
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxErrorBody)).Decode(&out); err != nil {
		return nil, fmt.Errorf("restore backup: the server restored it, but its answer does not read: %w", err)
	}
	return &out, nil
}

// CheckBackup asks the cluster whether it would restore the backup read
// from r (PUT /v1/snapshot?dry_run=true) and changes nothing: the leader
// reads and checks the whole file, and refuses it with the error the
// restore would get (a file that is not a complete backup, one newer than
// the cluster reads, one whose ACLs were never bootstrapped for a cluster
// whose ACLs are). The answer is the index the restore would bring the
// state to. It is sent again, as a restore is, while that is safe.
func (c *Client) CheckBackup(ctx context.Context, r io.Reader) (*SnapshotRestored, error) {
	resp, err := c.transfer(ctx, http.MethodPut, SnapshotPath+"?dry_run=true", newReplayableBody(r))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var dry DryRun
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxErrorBody)).Decode(&dry); err != nil {
		return nil, fmt.Errorf("check backup: the answer does not read: %w", err)
	}
	var out SnapshotRestored
	if err := json.Unmarshal(dry.Object, &out); err != nil || !dry.DryRun {
		return nil, fmt.Errorf("check backup: the answer is not a dry run's (dry_run %v, object %s): %v", dry.DryRun, dry.Object, err)
	}
	return &out, nil
}

// newReplayableBody is the body of a restore or its check: r, which can be
// sent again if it is an io.Seeker.
func newReplayableBody(r io.Reader) *replayableBody {
	body := &replayableBody{r: r}
	if s, ok := r.(io.Seeker); ok {
		if start, err := s.Seek(0, io.SeekCurrent); err == nil {
			body.seeker, body.start = s, start
		}
	}
	return body
}

// transfer sends a backup request until a server answers 200, moving on as
// Do does while that is safe: always for a GET (nothing was written yet),
// for a PUT only while its body can be sent again from its start. The
// answer's body is the caller's to read and close.
func (c *Client) transfer(ctx context.Context, method, path string, body *replayableBody) (*http.Response, error) {
	var resp *http.Response
	err := c.eachServer(ctx, func(base string) (bool, error) {
		r, retry, err := c.transferOnce(ctx, base, method, path, body)
		switch {
		case err == nil:
			resp = r
		case retry && body != nil && !body.rewind():
			return false, fmt.Errorf("%w; the backup was sent and cannot be sent again from here: the restore may or may not "+
				"have happened (GET /v1/audit shows the restored trail): restore again from the file, which is harmless", err)
		}
		return retry, err
	})
	return resp, err
}

// restoreAnswerWait is the least a restore's answer is waited for once
// the backup was sent: the server gives the restore 5 minutes.
const restoreAnswerWait = 5 * time.Minute

// transferOnce makes one attempt at one server. A backup may take longer
// to move than c.HTTP's timeout allows a whole call, so that timeout bounds
// instead the wait for the answer's headers once the request was sent.
func (c *Client) transferOnce(ctx context.Context, base, method, path string, body *replayableBody) (*http.Response, bool, error) {
	u := base + path
	hc := *c.HTTP
	wait := hc.Timeout
	hc.Timeout = 0
	actx, cancel := context.WithCancelCause(ctx)
	var timer atomic.Pointer[time.Timer]
	startTimer := func() {
		if wait > 0 {
			timer.Store(time.AfterFunc(wait, func() { cancel(errOpenTimeout) }))
		}
	}
	var rdr io.Reader
	if body != nil {
		// A restore answers once a quorum holds the state, which may take
		// longer than a call is given.
		wait = max(wait, restoreAnswerWait)
		rdr = body.forAttempt(startTimer)
	} else {
		startTimer()
	}
	req, err := http.NewRequestWithContext(actx, method, u, rdr)
	if err != nil {
		cancel(nil)
		return nil, false, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", SnapshotContentType)
		// A body of unknown length goes chunked, and net/http would not
		// resend it by itself.
		req.GetBody = nil
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := hc.Do(req)
	if t := timer.Load(); t != nil && !t.Stop() && err == nil {
		// The answer came as the wait ran out: its body is cut already.
		resp.Body.Close()
		err = errOpenTimeout
	}
	if err != nil {
		cause := context.Cause(actx)
		cancel(nil)
		if ctx.Err() != nil {
			return nil, false, fmt.Errorf("%s %s: %w", method, path, ctx.Err())
		}
		if errors.Is(cause, errOpenTimeout) {
			return nil, true, fmt.Errorf("%s %s: no answer within %s", method, u, wait)
		}
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, !permanent(err), fmt.Errorf("%s %s: %w", method, u, err)
	}
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		cancel(nil)
		apiErr := decodeError(resp.StatusCode, data)
		if apiErr.Code == CodeNoLeader {
			return nil, true, fmt.Errorf("%s %s: %w", method, u, apiErr)
		}
		return nil, false, apiErr
	}
	// The body is read under actx, which ends with the caller's context.
	resp.Body = cancelOnClose{ReadCloser: resp.Body, cancel: func() { cancel(nil) }}
	return resp, false, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel func()
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// replayableBody is a PUT body that knows whether it may be sent again:
// when nothing of it was read, or it can seek back to where it started.
// Each attempt reads it through an attemptBody; net/http may go on reading
// an attempt's body after the attempt failed, so starting another cuts the
// earlier ones off before the body goes back to its start.
type replayableBody struct {
	mu      sync.Mutex
	r       io.Reader
	seeker  io.Seeker
	start   int64
	read    bool
	attempt int
}

// forAttempt is the body of the next attempt; sent is called once it was
// read to its end.
func (b *replayableBody) forAttempt(sent func()) io.ReadCloser {
	b.mu.Lock()
	defer b.mu.Unlock()
	return &attemptBody{b: b, attempt: b.attempt, sent: sent}
}

// rewind readies the body to be sent again; false when it cannot be.
func (b *replayableBody) rewind() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.attempt++
	if !b.read {
		return true
	}
	if b.seeker == nil {
		return false
	}
	if _, err := b.seeker.Seek(b.start, io.SeekStart); err != nil {
		return false
	}
	b.read = false
	return true
}

var errAttemptOver = errors.New("read the body of an attempt that is over")

type attemptBody struct {
	b       *replayableBody
	attempt int
	sent    func()
	done    bool
}

func (a *attemptBody) Read(p []byte) (int, error) {
	a.b.mu.Lock()
	defer a.b.mu.Unlock()
	if a.attempt != a.b.attempt {
		return 0, errAttemptOver
	}
	n, err := a.b.r.Read(p)
	a.b.read = a.b.read || n > 0 || err != nil
	if err == io.EOF && !a.done {
		a.done = true
		a.sent()
	}
	return n, err
}

func (a *attemptBody) Close() error { return nil }

// trackedWriter counts what reached w and keeps w's error apart from the
// reader's.
type trackedWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (t *trackedWriter) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	t.n += int64(n)
	if err != nil {
		t.err = err
	}
	return n, err
}
