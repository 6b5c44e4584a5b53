package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/agentsim/fakemaster"
	"github.com/allot/allot/masterd/api"
)

func writeToken(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestParseFlagsLabelAndToken(t *testing.T) {
	t.Setenv("ALLOT_TOKEN", "from-env")
	tests := map[string]struct {
		args      []string
		wantLabel string
		wantToken string
		wantErr   string
	}{
		"token from ALLOT_TOKEN":        {args: nil, wantToken: "from-env"},
		"label":                         {args: []string{"-label", "nightly"}, wantLabel: "nightly", wantToken: "from-env"},
		"token file over ALLOT_TOKEN":   {args: []string{"-token-file", writeToken(t, "from-file\n")}, wantToken: "from-file"},
		"label with a space":            {args: []string{"-label", "night ly"}, wantErr: "-label"},
		"label with a slash":            {args: []string{"-label", "a/b"}, wantErr: "-label"},
		"missing token file":            {args: []string{"-token-file", filepath.Join(t.TempDir(), "none")}, wantErr: "-token-file"},
		"empty token file":              {args: []string{"-token-file", writeToken(t, " \n")}, wantErr: "is empty"},
		"no token flag takes the token": {args: []string{"-token", "secret"}, wantErr: "flag provided but not defined: -token"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, err := parseFlags(append([]string{"-master", "http://a:1"}, tc.args...), io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseFlags = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.info.Label != tc.wantLabel || cfg.token != tc.wantToken {
				t.Fatalf("label %q token %q, want %q and %q", cfg.info.Label, cfg.token, tc.wantLabel, tc.wantToken)
			}
		})
	}
}

// The label goes out in SUBSCRIBE's framework_info, and the token from the
// file on every call, to a master that refuses calls without it.
func TestSubscribesWithLabelAndTokenFile(t *testing.T) {
	t.Setenv("ALLOT_TOKEN", "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const token = "allot_framework-token"
	m := fakemaster.New(fakemaster.Options{HeartbeatIntervalSeconds: testHeartbeat, Token: token})
	t.Cleanup(m.Close)
	cfg, err := parseFlags([]string{"-master", m.URL, "-label", "nightly", "-token-file", writeToken(t, token+"\n"), "-tasks", "1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	client, err := schedulerClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	work, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- newFramework(cfg, io.Discard).run(work, client) }()

	streams, err := m.WaitStreams(ctx, api.SchedulerPath, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := streams[0].Subscribe.Subscribe.FrameworkInfo.Label; got != "nightly" {
		t.Errorf("SUBSCRIBE's label %q, want nightly", got)
	}
	if err := m.Send(streams[0].ID, api.Event{Type: api.EventOffers, Offers: &api.Offers{Offers: []api.Offer{offer("o1", "a1", 0.1)}}}); err != nil {
		t.Fatal(err)
	}
	declines, err := m.WaitCalls(ctx, 1, func(c fakemaster.Call) bool { return c.Scheduler != nil && c.Scheduler.Type == api.CallDecline })
	if err != nil {
		t.Fatalf("DECLINE: %v", err)
	}
	if got := declines[0].Header.Get("Authorization"); got != "Bearer "+token {
		t.Errorf("DECLINE's Authorization %q, want the file's token", got)
	}
	stop()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the framework did not return")
	}
}
