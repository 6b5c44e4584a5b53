package main

import (
	"strings"
	"testing"
)

func TestMachineParsers(t *testing.T) {
	tests := map[string]struct {
		parse func(string) string
		input string
		want  string
	}{
		"cpu model": {
			parse: func(s string) string { return cpuModel(strings.NewReader(s)) },
			input: "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n",
			want:  "Intel(R) Xeon(R) CPU @ 2.20GHz",
		},
		"cpu model missing": {
			parse: func(s string) string { return cpuModel(strings.NewReader(s)) },
			input: "processor\t: 0\n",
			want:  "unknown",
		},
		"mount of a nested path": {
			parse: func(s string) string { return mountOf("/tmp/allot-bench-1")(strings.NewReader(s)) },
			input: "/dev/vda / ext4 rw 0 0\ntmpfs /tmp tmpfs rw 0 0\ntmpfs /tmpfoo tmpfs rw 0 0\n",
			want:  "tmpfs (tmpfs)",
		},
		"mount falls back to the root": {
			parse: func(s string) string { return mountOf("/tmpfoo2/x")(strings.NewReader(s)) },
			input: "/dev/vda / ext4 rw 0 0\ntmpfs /tmp tmpfs rw 0 0\n",
			want:  "ext4 (/dev/vda)",
		},
		"load average": {
			parse: func(s string) string { return loadAverage(strings.NewReader(s)) },
			input: "5.78 2.70 1.17 3/210 15566\n",
			want:  "5.78 2.70 1.17",
		},
		"memory": {
			parse: func(s string) string { return memTotal(strings.NewReader(s)) },
			input: "MemTotal:       24684012 kB\nMemFree:        24000000 kB\n",
			want:  "23.5 GiB",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tt.parse(tt.input); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
