//go:build tools

package tools

// Pinned here so that go.mod and go.sum hold tfplugindocs and its
// dependencies, and `go run` finds it offline at the pinned version.
import (
	_ "github.com/hashicorp/terraform-plugin-docs/cmd/tfplugindocs"
)
