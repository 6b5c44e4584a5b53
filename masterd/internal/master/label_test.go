package master

import (
	"strings"
	"testing"

	"github.com/allot/allot/masterd/api"
)

// TestFrameworkLabel: a framework's label travels with it, as its calls are
// throttled and counted by (principal, label), and shows in the frameworks'
// view; a SUBSCRIBE may change it.
func TestFrameworkLabel(t *testing.T) {
	h := newHarness(t)
	info := fwInfo("batch", "*")
	info.Label = "nightly"
	fw := h.subscribe(info)
	plain := h.subscribe(fwInfo("batch2", "*"))

	identity := func(id string) (string, string) {
		t.Helper()
		p, l, ok := h.m().Identity(id)
		if !ok {
			t.Fatalf("Identity(%s): unknown framework", id)
		}
		return p, l
	}
	if p, l := identity(fw.id); p != "batch" || l != "nightly" {
		t.Errorf("Identity = %q, %q; want batch, nightly", p, l)
	}
	if p, l := identity(plain.id); p != "batch2" || l != "" {
		t.Errorf("Identity of the unlabeled framework = %q, %q", p, l)
	}
	if p, ok := h.m().Principal(fw.id); !ok || p != "batch" {
		t.Errorf("Principal = %q, %v", p, ok)
	}
	if _, _, ok := h.m().Identity("fw-unknown"); ok {
		t.Error("Identity of an unknown framework answers ok")
	}
	labels := map[string]string{}
	for _, f := range h.m().Frameworks() {
		labels[f.ID] = f.Label
	}
	if labels[fw.id] != "nightly" || labels[plain.id] != "" {
		t.Errorf("frameworks' labels: %v", labels)
	}

	fw.info.Label = "hourly"
	fw.resubscribe()
	if _, l := identity(fw.id); l != "hourly" {
		t.Errorf("label after a SUBSCRIBE with another: %q, want hourly", l)
	}
}

func TestFrameworkLabelRefused(t *testing.T) {
	for name, label := range map[string]string{
		"slash":    "a/b",
		"space":    "night ly",
		"too long": strings.Repeat("l", 300),
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			info := fwInfo("batch", "*")
			info.Label = label
			_, e := h.trySubscribe(info)
			wantCode(t, "SUBSCRIBE with label "+api.EchoName(label), e, api.CodeInvalidArgument)
			if !strings.Contains(e.Message, "label") {
				t.Errorf("message %q does not name the label", e.Message)
			}
			if fws := h.m().Frameworks(); len(fws) != 0 {
				t.Errorf("frameworks after a refused SUBSCRIBE: %+v", fws)
			}
		})
	}
}
