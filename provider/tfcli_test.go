package provider

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/allot/allot/masterd/testcluster"
)

// tfCLI runs the real terraform binary with a provider binary built from this
// module, installed through dev_overrides in a generated CLI configuration:
// the way a user runs a local build, with nothing downloaded. Unlike the
// in-process provider of terraform-plugin-testing, the provider's own logs
// then reach TF_LOG output, which the secrets test needs.
type tfCLI struct {
	dir       string // the Terraform working directory
	cliConfig string
}

var providerBinary struct {
	once sync.Once
	dir  string
	err  error
}

// buildProvider builds terraform-provider-allot once per test process.
func buildProvider(tb testing.TB) string {
	tb.Helper()
	providerBinary.once.Do(func() {
		root, err := testcluster.ModuleRoot("")
		if err != nil {
			providerBinary.err = err
			return
		}
		dir, err := os.MkdirTemp("", "allot-provider-")
		if err != nil {
			providerBinary.err = err
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "terraform-provider-allot"), ".")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			providerBinary.err = fmt.Errorf("go build terraform-provider-allot: %w\n%s", err, out)
			return
		}
		providerBinary.dir = dir
	})
	if providerBinary.err != nil {
		tb.Fatal(providerBinary.err)
	}
	return providerBinary.dir
}

func newTFCLI(tb testing.TB) *tfCLI {
	tb.Helper()
	if _, err := exec.LookPath("terraform"); err != nil {
		tb.Skip("terraform is not on the PATH")
	}
	binDir := buildProvider(tb)
	dir := tb.TempDir()
	cliConfig := filepath.Join(dir, "terraformrc")
	config := fmt.Sprintf(`provider_installation {
  dev_overrides {
    "allot/allot" = %q
  }
  direct {}
}
`, binDir)
	if err := os.WriteFile(cliConfig, []byte(config), 0o644); err != nil {
		tb.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		tb.Fatal(err)
	}
	return &tfCLI{dir: work, cliConfig: cliConfig}
}

// writeConfig writes main.tf, with the required_providers block dev_overrides
// matches.
func (c *tfCLI) writeConfig(tb testing.TB, body string) {
	tb.Helper()
	config := `terraform {
  required_providers {
    allot = { source = "allot/allot" }
  }
}
` + body
	if err := os.WriteFile(filepath.Join(c.dir, "main.tf"), []byte(config), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// run runs terraform with args and extra environment, and returns its
// combined output.
func (c *tfCLI) run(env []string, args ...string) (string, error) {
	cmd := exec.Command("terraform", append([]string{"-chdir=" + c.dir}, args...)...)
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+c.cliConfig, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
	cmd.Env = append(cmd.Env, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("terraform %v: %w\n%s", args, err, out.String())
	}
	return out.String(), err
}
