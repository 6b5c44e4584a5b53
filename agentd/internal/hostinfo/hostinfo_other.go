//go:build !linux

package hostinfo

import (
	"errors"
	"fmt"

	"github.com/allot/allot/masterd/api"
)

// Detect fails: agentd detects resources on Linux only; elsewhere
// -resources names them.
func Detect(workDir string, memReserveMiB float64) (api.Resources, error) {
	return nil, fmt.Errorf("detect resources: %w on this operating system", errors.ErrUnsupported)
}
