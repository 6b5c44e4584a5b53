// Package freeaddr picks loopback TCP addresses for tests that must name
// an address before the process that listens on it starts (a masterd's
// -raft and -http flags, a server restarted at the same address).
//
// An address the kernel hands out for port 0 is from the ephemeral range,
// the same range outgoing connections take their local ports from: with
// many test processes connecting at once, one of them may take the port
// between the pick and the listen ("address already in use"). The ports
// picked here are below that range, so only another pick can collide, and
// a random start makes that rare.
package freeaddr

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// Below the ephemeral range on Linux (ip_local_port_range starts at 32768
// by default) and above the ports services usually own.
const (
	low  = 20000
	high = 32000
)

// Loopback returns a 127.0.0.1 address nothing listened on a moment ago.
func Loopback() (string, error) {
	first, last := low, high
	if lo, ok := ephemeralStart(); ok && lo <= high {
		// A host whose ephemeral range starts lower: stay below it if
		// there is room, else fall back to the kernel's choice.
		if lo-1 <= first {
			return kernelPick()
		}
		last = lo - 1
	}
	start := first + rand.IntN(last-first+1)
	for i := range last - first + 1 {
		port := first + (start-first+i)%(last-first+1)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		l.Close()
		return addr, nil
	}
	return "", fmt.Errorf("freeaddr: no free port in %d-%d", first, last)
}

// Loopbacks returns n different addresses.
func Loopbacks(n int) ([]string, error) {
	seen := make(map[string]bool, n)
	out := make([]string, 0, n)
	for len(out) < n {
		a, err := Loopback()
		if err != nil {
			return nil, err
		}
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out, nil
}

func kernelPick() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("freeaddr: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func ephemeralStart() (int, bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, false
	}
	lo, err := strconv.Atoi(f[0])
	return lo, err == nil
}
