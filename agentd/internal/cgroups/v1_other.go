//go:build !linux

package cgroups

import (
	"errors"
	"fmt"
)

// NewV1 fails: control groups exist on Linux only.
func NewV1() (Manager, error) {
	return nil, fmt.Errorf("cgroup v1: %w on this operating system", errors.ErrUnsupported)
}
