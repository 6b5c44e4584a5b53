package provider

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindResourceAddress(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("main.tf", `
resource "allot_role" "ml" {
  name = "eng/ml"
}
resource "allot_quota" "ml" {
  role   = allot_role.ml.name
  limits = { cpus = 8 }
}
resource "allot_rate_limit" "spark" {
  principal = "spark"
}
resource "allot_rate_limit" "batch" {
  principal = "batch"
}
resource "allot_rate_limit" "each" {
  for_each  = toset(["a", "b"])
  principal = each.key
}
resource "allot_rate_limit_default" "this" {
  qps = 10
}
`)
	write("more.tf", `
resource "allot_reservation" "one" {
  name = var.name
}
resource "allot_reservation" "two" {
  name = var.other
}
`)
	write("broken.tf", `resource "allot_role" {`) // not HCL: skipped
	tests := map[string]struct {
		typeName, attr, id string
		want               string // "" for not found
	}{
		"literal identity":            {"allot_rate_limit", "principal", "spark", "allot_rate_limit.spark"},
		"another literal":             {"allot_rate_limit", "principal", "batch", "allot_rate_limit.batch"},
		"no block manages it":         {"allot_rate_limit", "principal", "a", ""}, // for_each: keys unknown
		"the one computed identity":   {"allot_quota", "role", "eng/ml", "allot_quota.ml"},
		"literal of another identity": {"allot_role", "name", "ops", ""},
		"two computed identities":     {"allot_reservation", "name", "db", ""},
		"singleton":                   {"allot_rate_limit_default", "", "default", "allot_rate_limit_default.this"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := findResourceAddress(dir, tc.typeName, tc.attr, tc.id)
			if got != tc.want || ok != (tc.want != "") {
				t.Fatalf("findResourceAddress(%s, %s=%s) = %q, %v; want %q", tc.typeName, tc.attr, tc.id, got, ok, tc.want)
			}
		})
	}
}

func TestImportHintWithoutAnAddressSaysWhereToFindIt(t *testing.T) {
	// The test's working directory has no .tf files.
	hint := importHint("allot_rate_limit", "principal", "spark")
	for _, want := range []string{"terraform import ADDRESS spark", `with allot_rate_limit.NAME`, `id = "spark"`} {
		if !strings.Contains(hint, want) {
			t.Errorf("hint does not contain %q:\n%s", want, hint)
		}
	}
	if strings.Contains(hint, "<name>") {
		t.Errorf("hint has a placeholder:\n%s", hint)
	}
}
