// Command allot is the operator's command-line tool for an allot cluster.
package main

import (
	"fmt"
	"os"
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	fmt.Fprintln(os.Stderr, "allot", version, ": not built yet")
	os.Exit(1)
}
