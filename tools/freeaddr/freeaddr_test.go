package freeaddr

import (
	"net"
	"strconv"
	"testing"
)

func TestLoopbacksAreBindableAndBelowTheEphemeralRange(t *testing.T) {
	addrs, err := Loopbacks(20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] {
			t.Fatalf("%s picked twice in %v", a, addrs)
		}
		seen[a] = true
		_, p, _ := net.SplitHostPort(a)
		port, _ := strconv.Atoi(p)
		if lo, ok := ephemeralStart(); ok && lo > low && port >= lo {
			t.Errorf("%s is in the ephemeral range, which starts at %d", a, lo)
		}
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("listen on %s: %v", a, err)
		}
		l.Close()
	}
}
