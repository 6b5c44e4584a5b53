//go:build !linux

package cgroups

import (
	"errors"
	"fmt"
)

// NewV2 fails: control groups exist on Linux only.
func NewV2(mountpoint string) (Manager, error) {
	return nil, fmt.Errorf("cgroup v2 at %s: %w on this operating system", mountpoint, errors.ErrUnsupported)
}
