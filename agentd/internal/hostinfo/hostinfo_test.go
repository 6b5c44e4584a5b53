//go:build linux

package hostinfo

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/allot/allot/masterd/api"
	"golang.org/x/sys/unix"
)

func openFixture(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestParseCPUList(t *testing.T) {
	for list, want := range map[string][]int{
		"0-3,8":     {0, 1, 2, 3, 8},
		"0":         {0},
		"0-1\n":     {0, 1},
		"3,1-2,2":   {1, 2, 3}, // unordered, overlapping: each CPU once
		"":          {},        // a cpuset without CPUs
		"\n":        {},
		"5-5":       {5},
		"62-63,128": {62, 63, 128},
	} {
		got, err := ParseCPUList(strings.NewReader(list))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %v, %v; want %v", list, got, err, want)
		}
	}
	for _, bad := range []string{"a", "3-1", "1-", "-1", "1,,2", "0-99999999", "0-3:2/4", "1 2", "0x1"} {
		if got, err := ParseCPUList(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: got %v, want an error", bad, got)
		}
	}
}

func TestParseCPUListFixtures(t *testing.T) {
	for fixture, wantCount := range map[string]int{
		"cpuset.cpus.effective":       5,
		"cpuset.cpus.effective-64":    64,
		"cpuset.cpus.effective-empty": 0,
	} {
		got, err := ParseCPUList(openFixture(t, fixture))
		if err != nil || len(got) != wantCount {
			t.Errorf("%s: got %v, %v; want %d CPUs", fixture, got, err, wantCount)
		}
	}
	if _, err := ParseCPUList(openFixture(t, "cpuset.cpus.effective-bad")); err == nil ||
		!strings.Contains(err.Error(), `bad item "a"`) {
		t.Errorf("cpuset.cpus.effective-bad: %v", err)
	}
}

func TestParseCPUsAllowed(t *testing.T) {
	got, err := parseCPUsAllowed(openFixture(t, "status"))
	if err != nil || !reflect.DeepEqual(got, []int{0, 1}) {
		t.Errorf("status: got %v, %v; want [0 1]", got, err)
	}
	got, err = parseCPUsAllowed(openFixture(t, "status-pinned"))
	if err != nil || len(got) != 48 || got[23] != 23 || got[24] != 64 {
		t.Errorf("status-pinned: got %v, %v; want 0-23 and 64-87", got, err)
	}
	if _, err := parseCPUsAllowed(openFixture(t, "status-no-list")); err == nil {
		t.Error("status without Cpus_allowed_list: no error")
	}
}

func TestMemTotalMiB(t *testing.T) {
	got, err := MemTotalMiB(openFixture(t, "meminfo"))
	if want := 24684084.0 / 1024; err != nil || got != want {
		t.Errorf("meminfo: got %v, %v; want %v MiB", got, err, want)
	}
	for _, fixture := range []string{"meminfo-no-memtotal", "meminfo-bad-unit"} {
		if _, err := MemTotalMiB(openFixture(t, fixture)); err == nil {
			t.Errorf("%s: no error", fixture)
		}
	}
	for _, bad := range []string{"", "MemFree: 1 kB\n", "MemTotal: lots kB\n", "MemTotal: 12 MB\n", "MemTotal: -1 kB\n"} {
		if _, err := MemTotalMiB(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestDetectOnThisHost checks each value against a source Detect does not
// read: nproc, sysinfo(2) and stat -f.
func TestDetectOnThisHost(t *testing.T) {
	const reserve = 512
	dir := t.TempDir()
	res, err := Detect(dir, reserve)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 {
		t.Errorf("got %v, want cpus, mem and disk", res)
	}

	out, err := exec.Command("nproc").Output()
	if err != nil {
		t.Fatal(err)
	}
	nproc, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	if res["cpus"] != float64(nproc) {
		t.Errorf("cpus %v, nproc says %d", res["cpus"], nproc)
	}

	// sysinfo's totalram is the same page count MemTotal shows.
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		t.Fatal(err)
	}
	totalMiB := float64(uint64(si.Totalram)*uint64(si.Unit)) / (1 << 20)
	if want := api.RoundScalar(totalMiB - reserve); res["mem"] != want {
		t.Errorf("mem %v, want MemTotal %v MiB less %d = %v", res["mem"], totalMiB, reserve, want)
	}

	out, err = exec.Command("stat", "-f", "-c", "%b %S", dir).Output()
	if err != nil {
		t.Fatal(err)
	}
	var blocks, blockSize float64
	fields := strings.Fields(string(out))
	if len(fields) != 2 {
		t.Fatalf("stat -f: %q", out)
	}
	blocks, _ = strconv.ParseFloat(fields[0], 64)
	blockSize, _ = strconv.ParseFloat(fields[1], 64)
	if want := math.Floor(blocks * blockSize / (1 << 20)); res["disk"] != want || want <= 0 {
		t.Errorf("disk %v MiB, stat -f says %v blocks of %v bytes = %v MiB", res["disk"], blocks, blockSize, want)
	}
	for name, v := range res {
		if v != api.RoundScalar(v) {
			t.Errorf("%s %v is not rounded to 0.001", name, v)
		}
	}
}

func TestDetectRefusesBadInput(t *testing.T) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	total, err := MemTotalMiB(f)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		dir     string
		reserve float64
		want    string
	}{
		"a reserve as large as the memory": {dir: t.TempDir(), reserve: total, want: "leaves nothing"},
		"a reserve larger than the memory": {dir: t.TempDir(), reserve: total + 1, want: "leaves nothing"},
		"a negative reserve":               {dir: t.TempDir(), reserve: -1, want: "want a finite number"},
		"NaN":                              {dir: t.TempDir(), reserve: math.NaN(), want: "want a finite number"},
		"a work dir that does not exist":   {dir: filepath.Join(t.TempDir(), "missing"), want: "disk: statfs"},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := Detect(tc.dir, tc.reserve)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, %v; want an error containing %q", res, err, tc.want)
			}
		})
	}
}
