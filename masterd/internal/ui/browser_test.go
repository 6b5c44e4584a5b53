package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
)

// The browser tests drive the system's Chromium, headless, through the
// DevTools protocol (chromedp). They never download a browser.

// chromiumOrSkip returns the path of Debian's Chromium, or skips the test:
// the one reason a browser test does not run.
func chromiumOrSkip(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Skip("needs Chromium at /usr/bin/chromium for the browser test: `make test-deps` installs it (apt-get install chromium)")
	return ""
}

// browser is one headless Chromium with one tab, sized as a laptop screen.
type browser struct {
	t     testing.TB
	ctx   context.Context
	shots string // where screenshots go

	mu       sync.Mutex
	problems []string // exceptions, CSP violations, console.error calls
}

// newBrowser starts Chromium for the rest of the test; everything it does
// must end within budget. It fails the test, when the test ends, on any
// uncaught exception or CSP violation the pages caused.
func newBrowser(t testing.TB, budget time.Duration) *browser {
	t.Helper()
	path := chromiumOrSkip(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // as root
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		// Without these Chromium reaches for the network on its own (the
		// machine has none) and floods it with refused connections.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1366, 768),
	}
	ctx, cancelTime := context.WithTimeout(context.Background(), budget)
	// Chromium now and then dies as it starts on a loaded machine (a
	// crash report and nothing else; CI saw it once): starting it is not
	// what these tests check, so a start is tried three times, each with a
	// fresh profile.
	var (
		bctx                       context.Context
		cancelAlloc, cancelBrowser context.CancelFunc
		err                        error
	)
	for attempt := 1; attempt <= 3; attempt++ {
		var actx context.Context
		actx, cancelAlloc = chromedp.NewExecAllocator(ctx, append(opts, chromedp.UserDataDir(t.TempDir()))...)
		bctx, cancelBrowser = chromedp.NewContext(actx)
		if err = chromedp.Do(bctx); err == nil { // starts the browser and its tab
			break
		}
		cancelBrowser()
		cancelAlloc()
		t.Logf("start %s, attempt %d: %v", path, attempt, err)
	}
	if err != nil {
		cancelTime()
		t.Fatalf("start %s: %v", path, err)
	}
	b := &browser{t: t, ctx: bctx, shots: screenshotDir(t)}
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		cancelTime()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, p := range b.problems {
			t.Errorf("the page reported: %s", p)
		}
	})
	messages := chromedp.Console(bctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			// Answers of 401, 403 and 503 and refused connections are
			// logged by the browser's network layer: the page expects
			// those and shows them itself.
			if m.Source == "network" {
				continue
			}
			if m.IsException() || m.Type == chromedp.ConsoleError || strings.Contains(m.Text, "Content Security Policy") {
				b.mu.Lock()
				b.problems = append(b.problems, m.String())
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// screenshotDir is $ALLOT_UI_SCREENSHOTS, or a directory of the test's own.
func screenshotDir(t testing.TB) string {
	if dir := os.Getenv("ALLOT_UI_SCREENSHOTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("ALLOT_UI_SCREENSHOTS: %v", err)
		}
		return dir
	}
	return t.TempDir()
}

func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatal(err)
	}
}

// eval runs a JavaScript expression and decodes its value into out.
func (b *browser) eval(expression string, out any) error {
	raw, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]byte](expression, chromedp.EvalAwaitPromise))
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}

func (b *browser) mustEval(expression string, out any) {
	b.t.Helper()
	if err := b.eval(expression, out); err != nil {
		b.t.Fatalf("evaluate %s: %v", expression, err)
	}
}

// open loads a page of the UI and waits until its script has started.
// Chromium now and then fails to fetch one of a page's modules on a loaded
// machine and keeps that failure for the document's life, so the script
// never starts; such a page is loaded once more.
func (b *browser) open(url string) {
	b.t.Helper()
	b.do(chromedp.Navigate(url))
	started := func() error {
		ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
		defer cancel()
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById('view')?.dataset.view !== undefined`,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0)))
		return err
	}
	if err := started(); err != nil {
		b.t.Logf("the page's script did not start (%v); loading it again", err)
		b.do(chromedp.Reload())
		if err := started(); err != nil {
			b.t.Fatalf("the page's script did not start after a reload either: %v", err)
		}
	}
}

// waitFor polls a JavaScript condition until it is true, or fails the test
// with what, after the page has had many refreshes to get there.
func (b *browser) waitFor(what, condition string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](condition, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0))); err != nil {
		var state string
		_ = b.eval(`document.getElementById('view').dataset.view + ' ' + document.getElementById('view').dataset.state + ': ' + document.body.innerText.slice(0, 600)`, &state)
		b.t.Fatalf("waiting for %s: %v; the page shows %s", what, err, state)
	}
}

// waitView waits until view has rendered data newer than anything before
// this call (its render counter moved on).
func (b *browser) waitView(view string) {
	b.t.Helper()
	var renders string
	_ = b.eval(`document.getElementById('view').dataset.renders || '0'`, &renders)
	b.waitFor("view "+view, fmt.Sprintf(`(() => { const m = document.getElementById('view');
		return m.dataset.view === %q && m.dataset.state === 'ready' && Number(m.dataset.renders || 0) > %s; })()`, view, jsNumber(renders)))
}

// goTo moves the page to a route, as a click on a link would.
func (b *browser) goTo(hash, view string) {
	b.t.Helper()
	b.mustEval(fmt.Sprintf(`location.hash = %q`, hash), nil)
	b.waitView(view)
}

// click clicks the element sel finds (a real mouse click) and waits until
// the location's hash is want. A link may be redrawn between finding it and
// clicking it by the page's refresh; then the click is tried again.
func (b *browser) click(sel, want string) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel)))
		cancel()
		if err == nil {
			var hash string
			ctx, cancel := context.WithTimeout(b.ctx, 3*time.Second)
			hash, err = chromedp.Run(ctx, chromedp.Poll[string](fmt.Sprintf(`location.hash === %q && location.hash`, want), chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0)))
			cancel()
			if err == nil && hash == want {
				return
			}
		}
		if time.Now().After(deadline) {
			var hash string
			_ = b.eval(`location.hash`, &hash)
			b.t.Fatalf("click %s: want the page at %s, it is at %s (%v)", sel, want, hash, err)
		}
	}
}

// screenshot saves what a 1366×768 screen shows of the page.
func (b *browser) screenshot(name string) string {
	b.t.Helper()
	// The pointer rests in a corner, so that no link shows its hover state.
	_ = chromedp.Do(b.ctx, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, 1360, 760))
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(b.shots, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
	return path
}

// text is the visible text of the first element sel finds ("" if none),
// whitespace folded.
func (b *browser) text(sel string) string {
	b.t.Helper()
	var s string
	b.mustEval(fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.innerText.replace(/\s+/g, ' ').trim() : ''; })()`, sel), &s)
	return s
}

// row is one table row as the page shows it.
type row struct {
	ID    string            `json:"id"`
	Depth string            `json:"depth"`
	Cells map[string]string `json:"cells"`
	// Fields are the parts of cells marked data-field, keyed
	// column.field, or column.resource.field inside a data-resource.
	Fields map[string]string `json:"fields"`
	// Changes are an audit row's diff lines, kind:path.
	Changes []string `json:"changes"`
	Links   []string `json:"links"`
}

// tablesScript reads every table of the view: each row's data-id and the
// visible text of each cell.
const tablesScript = `(() => {
  const norm = (s) => (s || '').replace(/\s+/g, ' ').trim();
  const out = {};
  for (const table of document.querySelectorAll('#view table[data-table]')) {
    out[table.dataset.table] = Array.from(table.tBodies[0].rows).map((tr) => {
      const cells = {}, fields = {};
      for (const td of tr.querySelectorAll(':scope > td[data-col]')) {
        cells[td.dataset.col] = norm(td.innerText);
        for (const f of td.querySelectorAll('[data-field]')) {
          const res = f.closest('[data-resource]');
          fields[td.dataset.col + '.' + (res ? res.dataset.resource + '.' : '') + f.dataset.field] = norm(f.innerText);
        }
      }
      const changes = Array.from(tr.querySelectorAll('[data-path]')).map((e) => e.dataset.kind + ':' + e.dataset.path);
      const links = Array.from(tr.querySelectorAll('a[href]')).map((a) => a.getAttribute('href'));
      return { id: tr.dataset.id || '', depth: tr.dataset.depth || '', cells, fields, changes, links };
    });
  }
  return out;
})()`

func (b *browser) tables() map[string][]row {
	b.t.Helper()
	var out map[string][]row
	b.mustEval(tablesScript, &out)
	return out
}

// eventually checks until check passes: the page refreshes every 2 s and the
// API's answers move on too, so both are read again on every try.
func eventually(t testing.TB, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var numberText = regexp.MustCompile(`^\d+$`)

func jsNumber(s string) string {
	if numberText.MatchString(s) {
		return s
	}
	return "0"
}
