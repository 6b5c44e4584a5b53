// Package freeaddr picks loopback TCP addresses for tests that must name
// an address before the process that listens on it starts (a masterd's
// -raft and -http flags, a server restarted at the same address).
//
// An address the kernel hands out for port 0 is from the ephemeral range,
// the same range outgoing connections take their local ports from: with
// many test processes connecting at once, one of them may take the port
// between the pick and the listen ("address already in use"). The ports
// picked here are below that range, so only another pick can collide. Each
// process walks the range in order from a random start: it never hands out
// a port twice itself, and two processes collide only once one has walked
// as far as where the other started.
package freeaddr

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Below the ephemeral range on Linux (ip_local_port_range starts at 32768
// by default) and above the ports services usually own.
const (
	low  = 15000
	high = 32000
)

var walk struct {
	sync.Mutex
	first, last, next int // next is an offset from first
	kernel            bool
}

func init() {
	walk.first, walk.last = low, high
	if lo, ok := ephemeralStart(); ok && lo <= high {
		// A host whose ephemeral range starts lower: stay below it if
		// there is room, else leave the choice to the kernel.
		walk.last = lo - 1
		walk.kernel = walk.last-walk.first < 1000
	}
	if !walk.kernel {
		walk.next = rand.IntN(walk.last - walk.first + 1)
	}
}

// Loopback returns a 127.0.0.1 address nothing listened on a moment ago.
func Loopback() (string, error) {
	walk.Lock()
	defer walk.Unlock()
	if walk.kernel {
		return kernelPick()
	}
	span := walk.last - walk.first + 1
	for range span {
		port := walk.first + walk.next%span
		walk.next++
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		l.Close()
		return addr, nil
	}
	return "", fmt.Errorf("freeaddr: no free port in %d-%d", walk.first, walk.last)
}

// Loopbacks returns n different addresses.
func Loopbacks(n int) ([]string, error) {
	out := make([]string, 0, n)
	for range n {
		a, err := Loopback()
		if err != nil {
			return nil, err
		}
		out = append(out, a)
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
