package qos

import (
	"strings"
	"testing"
	"time"
)

func TestNoop(t *testing.T) {
	for _, kind := range []string{"", KindNoop} {
		c, err := New(Config{Kind: kind, ProcDir: t.TempDir()})
		if err != nil {
			t.Fatalf("New(%q): %v", kind, err)
		}
		if c.Name() != KindNoop {
			t.Errorf("Name() = %q, want noop", c.Name())
		}
		got, err := c.Corrections(time.Now(), Node{Tasks: []Task{{ContainerID: "c1", Revocable: true}}})
		if got != nil || err != nil {
			t.Errorf("noop Corrections = %v, %v; want nil, nil", got, err)
		}
	}
}

func TestNewRejectsUnknownKind(t *testing.T) {
	_, err := New(Config{Kind: "magic"})
	if err == nil || !strings.Contains(err.Error(), `unknown qos controller "magic"`) {
		t.Fatalf("New(magic) error %v, want unknown qos controller", err)
	}
}
