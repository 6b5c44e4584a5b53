package ui

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"testing"
)

// assetFiles lists every embedded file, by its path under assets/.
func assetFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			files = append(files, strings.TrimPrefix(p, "assets/"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func readAsset(t *testing.T, name string) string {
	t.Helper()
	b, err := fs.ReadFile(assets, "assets/"+name)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

var (
	htmlReference = regexp.MustCompile(`(?:src|href)="([^"#][^"]*)"`)
	jsImport      = regexp.MustCompile(`(?m)^\s*(?:import\s+(?:[\w*{}\s,]+\s+from\s+)?|export\s+(?:\*|\{[^}]*\})\s*from\s*)['"]([^'"]+)['"]`)
)

// TestEveryReferencedAssetExists follows index.html's src and href
// attributes and every module's imports: a missing file would leave the
// page blank in the browser, with nothing but a console message.
func TestEveryReferencedAssetExists(t *testing.T) {
	exists := map[string]bool{}
	for _, f := range assetFiles(t) {
		exists[f] = true
	}
	index := readAsset(t, "index.html")
	refs := htmlReference.FindAllStringSubmatch(index, -1)
	if len(refs) < 3 {
		t.Fatalf("index.html references %d files; want its stylesheet, icon and script", len(refs))
	}
	var modules []string
	for _, m := range refs {
		ref := m[1]
		if !exists[ref] {
			t.Errorf("index.html references %q, which is not among the assets", ref)
		}
		if strings.HasSuffix(ref, ".js") {
			modules = append(modules, ref)
		}
	}
	// Walk the module graph from the entry points.
	seen := map[string]bool{}
	for len(modules) > 0 {
		mod := modules[0]
		modules = modules[1:]
		if seen[mod] || !exists[mod] {
			continue
		}
		seen[mod] = true
		for _, m := range jsImport.FindAllStringSubmatch(readAsset(t, mod), -1) {
			spec := m[1]
			if !strings.HasPrefix(spec, "./") && !strings.HasPrefix(spec, "../") {
				t.Errorf("%s imports %q: only relative imports of embedded modules work offline", mod, spec)
				continue
			}
			target := path.Join(path.Dir(mod), spec)
			if !exists[target] {
				t.Errorf("%s imports %q (%s), which is not among the assets", mod, spec, target)
			}
			modules = append(modules, target)
		}
	}
	for f := range exists {
		if strings.HasSuffix(f, ".js") && !seen[f] {
			t.Errorf("%s is embedded but no page or module imports it", f)
		}
	}
}

// TestAssetsAreServedWithTheirContentTypes asks the handler for every file,
// as masterd mounts it: browsers refuse a module or stylesheet of another
// type under nosniff.
func TestAssetsAreServedWithTheirContentTypes(t *testing.T) {
	srv := httptest.NewServer(http.StripPrefix("/ui", Handler()))
	defer srv.Close()
	want := map[string]string{
		".html": "text/html; charset=utf-8",
		".css":  "text/css; charset=utf-8",
		".js":   "text/javascript; charset=utf-8",
		".svg":  "image/svg+xml",
	}
	get := func(p string) (*http.Response, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(body)
	}
	for _, f := range assetFiles(t) {
		ct, ok := want[path.Ext(f)]
		if !ok {
			t.Errorf("%s: no content type expected for %s files; add one here", f, path.Ext(f))
			continue
		}
		resp, body := get("/ui/" + f)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET /ui/%s: %s", f, resp.Status)
			continue
		}
		if got := resp.Header.Get("Content-Type"); got != ct {
			t.Errorf("GET /ui/%s: Content-Type %q, want %q", f, got, ct)
		}
		if body != readAsset(t, f) {
			t.Errorf("GET /ui/%s: body differs from the embedded file", f)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET /ui/%s: Content-Security-Policy %q lacks default-src 'self'", f, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET /ui/%s: no X-Content-Type-Options: nosniff", f)
		}
	}
	resp, body := get("/ui/")
	if resp.StatusCode != http.StatusOK || body != readAsset(t, "index.html") {
		t.Errorf("GET /ui/: %s, want index.html", resp.Status)
	}
	if resp, _ := get("/ui/js/missing.js"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /ui/js/missing.js: %s, want 404", resp.Status)
	}
}

// TestAssetsKeepToTheCSP looks for what the strict CSP would block (inline
// scripts, styles and handlers, eval) and for HTML built from strings,
// which would run what the API says: principals, roles and audit bodies
// are user input.
func TestAssetsKeepToTheCSP(t *testing.T) {
	index := readAsset(t, "index.html")
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`),       // a script with a body
		regexp.MustCompile(`<script(?:(?:\s)(?:[^s>]|s[^r])*)?>`), // a script without src
		regexp.MustCompile(`<style`),
		regexp.MustCompile(`\sstyle=`),
		regexp.MustCompile(`\son[a-z]+=`),
	} {
		if m := bad.FindString(index); m != "" {
			t.Errorf("index.html: %q is refused by the CSP", m)
		}
	}
	forbidden := []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "setAttribute('style'", "://"}
	for _, f := range assetFiles(t) {
		if path.Ext(f) != ".js" && path.Ext(f) != ".css" {
			continue
		}
		text := readAsset(t, f)
		for _, word := range forbidden {
			if strings.Contains(text, word) {
				t.Errorf("%s uses %q: build DOM with text nodes, load nothing from elsewhere", f, word)
			}
		}
	}
}
