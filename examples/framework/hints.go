package main

import (
	"fmt"
	"io"

	"github.com/allot/allot/masterd/api"
)

// hint says which of the framework's flags would get it past err ("" when
// it is nothing the framework's configuration can fix).
func hint(err error) string {
	return api.Hint(err, "the framework", "-token-file (or ALLOT_TOKEN) whose policy grants framework register on the framework's roles")
}

// report prints err, and what to do about it when the framework knows.
func report(w io.Writer, err error) {
	fmt.Fprintln(w, "framework: ERROR:", err)
	if h := hint(err); h != "" {
		fmt.Fprintln(w, "framework: hint:", h)
	}
}

// retrying tells, while SUBSCRIBE is retried, why no master took it when
// the cause is the framework's own configuration (a TLS handshake the
// master refuses, a CA the framework does not trust); elections and masters
// down pass by themselves and are not worth a line.
func retrying(w io.Writer) func(rounds int, err error) {
	return func(rounds int, err error) {
		if h := hint(err); h != "" {
			fmt.Fprintf(w, "framework: ERROR: no master takes the SUBSCRIBE yet (%d rounds): %v; still trying\nframework: hint: %s\n", rounds, err, h)
		}
	}
}
