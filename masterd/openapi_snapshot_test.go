package main_test

import (
	"testing"

	"github.com/allot/allot/masterd/api"
)

// driveSnapshot saves a backup of the server and restores it into the same
// server (its state stays what it was), with the answers a bad file gets.
func driveSnapshot(t *testing.T, h *apiHarness) {
	backup := h.do(exchange{method: "GET", path: api.SnapshotPath, want: 200})
	h.do(exchange{method: "GET", path: api.SnapshotPath + "?stale=true", want: 400, request: docInvalid})
	file := string(backup.body)
	binary := map[string]string{"Content-Type": api.SnapshotContentType}
	h.do(exchange{method: "PUT", path: api.SnapshotPath + "?dry_run=true", body: file, header: binary, want: 200})
	h.do(exchange{method: "PUT", path: api.SnapshotPath, body: file, header: binary, want: 200})
	h.do(exchange{method: "PUT", path: api.SnapshotPath, header: binary, want: 400, request: docInvalid})
	h.do(exchange{method: "PUT", path: api.SnapshotPath, body: `{"quotas": []}`, header: binary, want: 400, request: docInWords})
	h.do(exchange{method: "PUT", path: api.SnapshotPath, body: file[:len(file)/2], header: binary, want: 400, request: docInWords})
	h.do(exchange{method: "PUT", path: api.SnapshotPath + "?dry_run=maybe", body: file, header: binary, want: 400, request: docInvalid})
}
