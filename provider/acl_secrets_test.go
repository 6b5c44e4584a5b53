package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
)

// TestAccACL_secretsAppearNowhere is the must-show. A non-dev masterd
// with -acl runs the whole life of a policy and a token through the built
// provider binary with TF_LOG=trace: applies with the bootstrap token, with
// the operator token and with the created token, plans, a destroy. Then every
// secret used — the operator token, the bootstrap secret, the created
// token's secret — is looked for, byte for byte, in masterd's log (its
// stdout and stderr), in Terraform's output, in every state file (where the
// created token's own secret may only be its allot_acl_token's `secret`
// attribute), in the audit trail and in the Raft data directory (the log
// store and the snapshots). Each place is first shown to hold what the test
// searches — the accessor, the API calls — so that an empty search cannot
// pass for a clean one.
func TestAccACL_secretsAppearNowhere(t *testing.T) {
	c := startACLCluster(t)
	cli := newTFCLI(t)
	ctx := context.Background()

	var output strings.Builder
	run := func(env []string, args ...string) {
		t.Helper()
		out, err := cli.run(append([]string{"TF_LOG=trace"}, env...), args...)
		output.WriteString(out)
		if err != nil {
			t.Fatal(err)
		}
	}
	config := func(description string) string {
		return fmt.Sprintf(`
variable "allot_token" {
  type      = string
  sensitive = true
}
provider "allot" {
  addresses = [%q]
  token     = var.allot_token
}
`, c.Address(0)) + fmt.Sprintf(aclResources, description, description) + `
resource "allot_quota" "eng" {
  role   = "eng/secrets"
  limits = { cpus = 1 }
}
`
	}
	withToken := func(token string) []string { return []string{"TF_VAR_allot_token=" + token} }

	cli.writeConfig(t, config("v1"))
	run(withToken(c.bootstrap), "apply", "-auto-approve", "-input=false")
	created := stateTokenSecret(t, filepath.Join(cli.dir, "terraform.tfstate"), "eng")
	secrets := map[string]string{"operator token": c.operatorToken, "bootstrap secret": c.bootstrap, "created token's secret": created}

	// The created token works through the API and, as the provider's token,
	// plans the quota its policy covers.
	engClient := c.client(t, created)
	if _, err := engClient.Quota(ctx, "eng/secrets", api.ReadOptions{}); err != nil {
		t.Fatalf("read the quota with the created token: %v", err)
	}
	cli.writeConfig(t, config("v1"))
	run(withToken(created), "plan", "-input=false", "-target=allot_quota.eng")
	cli.writeConfig(t, config("v2"))
	run(withToken(c.operatorToken), "apply", "-auto-approve", "-input=false")
	run(withToken(c.bootstrap), "plan", "-input=false")

	// Snapshots hold the ACL state: wait for one taken after the token was
	// made (the server takes one every few entries).
	waitForSnapshot(t, c.Dir(0))
	audit, err := c.admin.Audit(ctx, 0)
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	run(withToken(c.bootstrap), "destroy", "-auto-approve", "-input=false")

	// Terraform's output: the provider's API calls are in it.
	logs := output.String()
	if !strings.Contains(logs, "allot API call") || !strings.Contains(logs, "/v1/acl/tokens/acc-eng-token") {
		t.Fatalf("the trace output lacks the provider's API calls; the search would prove nothing:\n%s", tail(logs, 40))
	}
	findSecrets(t, "Terraform's output (TF_LOG=trace)", logs, secrets)

	// masterd's log, at debug level: it runs from the start of the server
	// to past the snapshot that holds the token.
	serverLog, err := os.ReadFile(c.LogPath(0))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(serverLog), "masterd: serving") || !strings.Contains(string(serverLog), "snapshot complete") {
		t.Fatalf("masterd's log lacks its start or its snapshots; the search would prove nothing:\n%s", c.LogTail(0, 40))
	}
	findSecrets(t, "masterd's log "+c.LogPath(0), string(serverLog), secrets)

	// The state files: only the created token's own secret attribute.
	states, _ := filepath.Glob(filepath.Join(cli.dir, "terraform.tfstate*"))
	if len(states) < 2 {
		t.Fatalf("want the state and its backup in %s, found %v", cli.dir, states)
	}
	sawSecret := false
	for _, f := range states {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rest, removed := withoutTokenSecrets(t, data)
		sawSecret = sawSecret || removed[created]
		findSecrets(t, "state file "+filepath.Base(f)+" outside allot_acl_token's secret", rest, secrets)
	}
	if !sawSecret {
		t.Errorf("no state file held the created token's secret in allot_acl_token.eng's secret attribute")
	}

	// The audit trail: it has the token's creation, without any secret.
	auditJSON, err := json.Marshal(audit)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(auditJSON), "acc-eng-token") {
		t.Fatalf("the audit trail does not name the token; the search would prove nothing: %s", auditJSON)
	}
	findSecrets(t, "the audit trail (GET /v1/audit)", string(auditJSON), secrets)

	// The Raft data directory: the log store and every snapshot. The server
	// is stopped first: a running one reaps old snapshots under the walk.
	if err := c.Terminate(0); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(c.Dir(0), "data")
	var raftFiles []string
	err = filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		raftFiles = append(raftFiles, strings.TrimPrefix(path, dataDir+"/"))
		findSecrets(t, "Raft data file "+path, string(data), secrets)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !fileHolds(filepath.Join(dataDir, "raft.db"), "acc-eng-token") || !snapshotHolds(dataDir, "acc-eng-token") {
		t.Fatalf("the Raft log store and a snapshot should both name the token's accessor (files: %v); the search would prove nothing", raftFiles)
	}
	t.Logf("searched %d secrets in Terraform's output (%d bytes), masterd's log (%d bytes), %d state files, %d audit entries and %d Raft files: %v",
		len(secrets), len(logs), len(serverLog), len(states), len(audit), len(raftFiles), raftFiles)
}

// findSecrets fails the test for each secret found in text, naming where and
// showing what comes before it, never the secret itself.
func findSecrets(t *testing.T, where, text string, secrets map[string]string) {
	t.Helper()
	for name, secret := range secrets {
		if i := strings.Index(text, secret); i >= 0 {
			t.Errorf("the %s appears in %s, after: ...%q", name, where, text[max(0, i-120):i])
		}
	}
}

// stateTokenSecret is the secret attribute of allot_acl_token.NAME in a
// state file.
func stateTokenSecret(t *testing.T, file, name string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var state tfState
	if err := json.Unmarshal(data, &state); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for _, r := range state.Resources {
		if r.Type == "allot_acl_token" && r.Name == name && len(r.Instances) == 1 {
			if s, _ := r.Instances[0].Attributes["secret"].(string); s != "" {
				return s
			}
		}
	}
	t.Fatalf("%s has no secret for allot_acl_token.%s", file, name)
	return ""
}

type tfState struct {
	Resources []struct {
		Type      string `json:"type"`
		Name      string `json:"name"`
		Instances []struct {
			Attributes map[string]any `json:"attributes"`
		} `json:"instances"`
	} `json:"resources"`
}

// withoutTokenSecrets is a state file with the secret attribute of every
// allot_acl_token removed, as generic JSON text, and the secrets removed.
func withoutTokenSecrets(t *testing.T, data []byte) (string, map[string]bool) {
	t.Helper()
	var state map[string]any
	if err := json.Unmarshal(data, &state); err != nil {
		t.Fatal(err)
	}
	removed := map[string]bool{}
	resources, _ := state["resources"].([]any)
	for _, r := range resources {
		res, _ := r.(map[string]any)
		if res["type"] != "allot_acl_token" {
			continue
		}
		instances, _ := res["instances"].([]any)
		for _, inst := range instances {
			attrs, _ := inst.(map[string]any)["attributes"].(map[string]any)
			if s, ok := attrs["secret"].(string); ok {
				removed[s] = true
			}
			delete(attrs, "secret")
		}
	}
	rest, err := json.Marshal(state)
	if err != nil {
		t.Fatal(err)
	}
	return string(rest), removed
}

func fileHolds(path, s string) bool {
	data, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(data), s)
}

// snapshotHolds reports whether a snapshot under dataDir/snapshots holds s.
func snapshotHolds(dataDir, s string) bool {
	files, _ := filepath.Glob(filepath.Join(dataDir, "snapshots", "*", "state.bin"))
	for _, f := range files {
		if fileHolds(f, s) {
			return true
		}
	}
	return false
}

// waitForSnapshot waits until a snapshot names the token's accessor: the
// server snapshots every few entries, checked every 200 ms.
func waitForSnapshot(t *testing.T, serverDir string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !snapshotHolds(filepath.Join(serverDir, "data"), "acc-eng-token") {
		if time.Now().After(deadline) {
			files, _ := filepath.Glob(filepath.Join(serverDir, "data", "snapshots", "*"))
			t.Fatalf("no snapshot holds the token after a minute (snapshots: %v)", files)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
