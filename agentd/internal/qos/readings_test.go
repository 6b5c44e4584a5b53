package qos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseLoadAvg(t *testing.T) {
	real, err := os.ReadFile(filepath.Join("testdata", "loadavg"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		in      string
		want    loadAvg
		wantErr string
	}{
		"this machine's sample": {in: string(real), want: loadAvg{0.14, 0.31, 0.36}},
		"busy":                  {in: "7.90 6.12 3.05 9/412 88123\n", want: loadAvg{7.9, 6.12, 3.05}},
		"no newline":            {in: "0.00 0.01 0.05 1/1 1", want: loadAvg{0, 0.01, 0.05}},
		"empty":                 {in: "", wantErr: "want at least three"},
		"two fields":            {in: "0.1 0.2\n", wantErr: "want at least three"},
		"not a number":          {in: "0.1 x 0.3 1/2 3\n", wantErr: `field 2 "x"`},
		"negative":              {in: "0.1 0.2 -0.3 1/2 3\n", wantErr: `field 3 "-0.3"`},
		"NaN":                   {in: "NaN 0.2 0.3 1/2 3\n", wantErr: `field 1 "NaN"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseLoadAvg(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseLoadAvg(%q) = %+v, %v; want error %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseLoadAvg(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParsePSI(t *testing.T) {
	sample := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	full := func(avg10, avg60, avg300 float64, total uint64) *psiLine {
		return &psiLine{avg10, avg60, avg300, total}
	}
	cases := map[string]struct {
		in      string
		want    psi
		wantErr string
	}{
		"this machine's cpu": {in: sample("pressure-cpu"),
			want: psi{Some: psiLine{0.39, 2.54, 3.45, 935888198}, Full: full(0, 0, 0, 0)}},
		"this machine's memory": {in: sample("pressure-memory"),
			want: psi{Some: psiLine{0, 0, 0.05, 57735677}, Full: full(0, 0, 0.04, 49899120)}},
		"memory under pressure": {in: "some avg10=42.00 avg60=17.31 avg300=4.02 total=91234567\nfull avg10=12.50 avg60=5.00 avg300=1.00 total=3456789\n",
			want: psi{Some: psiLine{42, 17.31, 4.02, 91234567}, Full: full(12.5, 5, 1, 3456789)}},
		"cpu before Linux 5.13 (no full line)": {in: "some avg10=63.18 avg60=40.02 avg300=12.00 total=123\n",
			want: psi{Some: psiLine{63.18, 40.02, 12, 123}}},
		"a key the kernel may add": {in: "some avg10=1.00 avg60=2.00 avg300=3.00 avg900=4.00 total=5\n",
			want: psi{Some: psiLine{1, 2, 3, 5}}},
		"empty":          {in: "", wantErr: "no some line"},
		"full only":      {in: "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", wantErr: "no some line"},
		"no avg10":       {in: "some avg60=0.00 avg300=0.00 total=0\n", wantErr: "no avg10"},
		"no total":       {in: "some avg10=0.00 avg60=0.00 avg300=0.00\n", wantErr: "no total"},
		"bad avg":        {in: "some avg10=x avg60=0.00 avg300=0.00 total=0\n", wantErr: `avg10 "x"`},
		"over 100%":      {in: "some avg10=100.01 avg60=0.00 avg300=0.00 total=0\n", wantErr: `avg10 "100.01"`},
		"negative total": {in: "some avg10=0 avg60=0.00 avg300=0.00 total=-1\n", wantErr: `total "-1"`},
		"not key=value":  {in: "some avg10 0.5\n", wantErr: `field "avg10"`},
		"unknown line":   {in: "most avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", wantErr: "want some or full"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parsePSI(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parsePSI(%q) = %+v, %v; want error %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parsePSI(%q): %v", tc.in, err)
			}
			if got.Some != tc.want.Some || (got.Full == nil) != (tc.want.Full == nil) || (got.Full != nil && *got.Full != *tc.want.Full) {
				t.Fatalf("parsePSI(%q) = %+v (full %+v), want %+v (full %+v)", tc.in, got, got.Full, tc.want, tc.want.Full)
			}
		})
	}
}

// TestThisMachine reads this machine's own /proc/loadavg and /proc/pressure.
func TestThisMachine(t *testing.T) {
	loads, err := readFile("/proc/loadavg", parseLoadAvg)
	if err != nil {
		t.Fatalf("this machine's /proc/loadavg: %v", err)
	}
	t.Logf("load averages %+v", loads)
	requirePSI(t)
	for _, resource := range []string{"cpu", "memory", "io"} {
		p, err := readFile(filepath.Join("/proc/pressure", resource), parsePSI)
		if err != nil {
			t.Fatalf("this machine's pressure: %v", err)
		}
		if resource == "memory" && p.Full == nil {
			t.Errorf("/proc/pressure/memory has no full line")
		}
		t.Logf("%s pressure %+v", resource, p.Some)
	}
}
